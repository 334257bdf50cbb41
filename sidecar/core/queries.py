"""What the manager answers without changing anything: views, listings, transcripts,
command output, a turn's changes, and which runtime is live here.

Read-only by construction: this module holds no lock and writes nothing; a runtime is
only looked up (the lifecycle registers and removes them, `lifecycle.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

from protocol.values import Status
from sidecar.agent.context import PageReader
from sidecar.checkpoints.history import turn_changes
from sidecar.core.leases import Leases
from sidecar.core.mcp_tools import server_views
from sidecar.core.output_spools import OutputPage
from sidecar.core.registry import RuntimeRegistry
from sidecar.core.rewind import locate_turn
from sidecar.core.runtime import RuntimeDeps, SessionRuntime
from sidecar.core.views import Awaiting, SessionView
from sidecar.domain.errors import CheckpointError, InvalidInput, SessionNotLive
from sidecar.domain.files import TurnChanges
from sidecar.domain.records import SessionRecord, now
from sidecar.domain.transcript import Entry, from_row
from sidecar.store.base import ListCursor
from sidecar.worktrees.hunks import parse_diff

MAX_TURN_PAGE = 1000  # entries in one page of whole turns


@dataclass(frozen=True, slots=True)
class TurnPage:
    entries: list[tuple[int, Entry]]
    total: int  # entries in the transcript
    turns: int  # turns in the session
    next_turn: int | None  # where the next page starts (None: this was the last)
    next_offset: int | None = None  # a page cut short (a huge turn): the rest from here


class SessionQueries:
    def __init__(
        self, deps: RuntimeDeps, leases: Leases, registry: RuntimeRegistry[SessionRuntime]
    ) -> None:
        self._deps = deps
        self.store = deps.store
        self._leases = leases
        self._registry = registry
        status = deps.sandbox
        self._sandbox_problem = None if status.available else status.reason

    def runtime(self, session_id: str) -> SessionRuntime | None:
        """This process's live runtime of the session, if any."""
        runtime = self._registry.get(session_id)
        return runtime if runtime is not None and not runtime.closed else None

    def view_of(self, record: SessionRecord) -> SessionView:
        problem = self._sandbox_problem
        runtime = self.runtime(record.session_id)
        if runtime is not None and (runtime.superseded or runtime.generation < record.generation):
            runtime = None  # taken over: a newer generation runs elsewhere, this one is let go
        if runtime is not None:
            waiting = next(iter(runtime.approvals.pending.values()), None)
            awaiting = None
            if waiting is not None:
                request = waiting.request
                awaiting = Awaiting(request.call_id, request.title, waiting.since)
            mcp = server_views(runtime.mcp, record.mcp_servers)
            return SessionView(
                record,
                True,
                runtime.url,
                runtime.token,
                None,
                awaiting,
                problem,
                mcp,
                runtime.checkpoints.problem,
                runtime.engine.options(),
                runtime.worktree_state,
                runtime.instructions.files,
            )
        holder = self._leases.holder(record, now())
        mcp = server_views(None, record.mcp_servers)
        checkpoints = self._deps.checkpoints.problem
        return SessionView(record, False, None, None, holder, None, problem, mcp, checkpoints)

    async def view(self, session_id: str) -> SessionView:
        return self.view_of(await self.store.get(session_id))

    async def list_page(
        self,
        *,
        cwd: str | None,
        cursor: ListCursor | None,
        limit: int,
        query: str | None = None,
        archived: bool = False,
    ) -> tuple[list[SessionView], ListCursor | None]:
        """Most recent activity first; `query` searches titles and transcript text."""
        records, next_cursor = await self.store.list_page(
            cwd=cwd, cursor=cursor, limit=limit, query=query, archived=archived
        )
        return [self.view_of(record) for record in records], next_cursor

    async def messages(
        self, session_id: str, offset: int, limit: int
    ) -> tuple[list[tuple[int, Entry]], int]:
        """A page of the transcript as (index, entry), and the total."""
        total = (await self.store.get(session_id)).message_count
        rows = await self.store.messages(session_id, offset, limit)
        return [(offset + i, from_row(row)) for i, row in enumerate(rows)], total

    async def messages_by_turn(self, session_id: str, turn: int, turns: int) -> TurnPage:
        """Whole turns from `turn` on: the entries from its user message up to the next
        page's first user message (at most MAX_TURN_PAGE entries: a page cut short says
        where the rest starts, `next_offset`)."""
        record = await self.store.get(session_id)
        if turn > max(record.turns, 1):
            raise InvalidInput("turn", f"no turn {turn}: the session has {record.turns} turn(s)")
        read = self.reader(session_id)
        total = record.message_count
        start = 0 if turn == 1 else await locate_turn(read, total, turn)
        if start is None:
            raise InvalidInput("turn", f"turn {turn} is not in the transcript")
        last = turn + turns
        end = total if last > record.turns else await locate_turn(read, total, last)
        end = total if end is None else end
        limit = min(end - start, MAX_TURN_PAGE)
        rows = await self.store.messages(session_id, start, limit) if limit > 0 else []
        entries = [(start + i, from_row(row)) for i, row in enumerate(rows)]
        next_turn = last if last <= record.turns else None
        if start + len(entries) < end:  # cut short: the rest by offset, up to `next_turn`
            return TurnPage(entries, total, record.turns, next_turn, start + len(entries))
        return TurnPage(entries, total, record.turns, next_turn)

    def live_ids(self) -> list[str]:
        return self._registry.ids()

    def reader(self, session_id: str) -> PageReader:
        async def read(offset: int, limit: int) -> list[Entry]:
            return [from_row(row) for row in await self.store.messages(session_id, offset, limit)]

        return read

    async def live(
        self, session_id: str, action: str, generation: int | None = None
    ) -> SessionRuntime:
        """The live runtime (of `generation`, when given); an unknown id is SessionNotFound,
        a known one without a runtime here SessionNotLive."""
        runtime = self.runtime(session_id)
        if runtime is None and generation is None:
            await self.store.get(session_id)
        if runtime is None or (generation is not None and runtime.generation != generation):
            raise SessionNotLive(session_id, action)
        return runtime

    async def output(self, session_id: str, call_id: str, offset: int, limit: int) -> OutputPage:
        """A page of a command's whole output (spooled), any session, live or not."""
        await self.store.get(session_id)
        return await asyncio.to_thread(self._deps.spools.read, session_id, call_id, offset, limit)

    async def changes(self, session_id: str, turn: int | None) -> TurnChanges:
        """What a turn changed (default: the last), with its diff."""
        record = await self.store.get(session_id)
        if record.turns == 0:
            raise InvalidInput("turn", "the session has no turns yet")
        turn = record.turns if turn is None else turn
        if not 1 <= turn <= record.turns:
            raise InvalidInput("turn", f"no turn {turn}: the session has {record.turns} turn(s)")
        runtime = self.runtime(session_id)
        if runtime is not None:
            idle = not runtime.turns.busy and runtime.status is Status.IDLE
            return with_hunks(await runtime.checkpoints.changes(turn, idle=idle))
        repo = self._deps.checkpoints.repo(session_id, record.cwd)
        if not repo.exists:
            raise CheckpointError(f"session {session_id} has no checkpoints")
        return with_hunks(await turn_changes(repo, turn, current=None, with_diff=True))


def with_hunks(changes: TurnChanges) -> TurnChanges:
    """Each file's hunks, with the ids a worktree's diff gives the same hunks (the
    review's Accept / Reject name them); none for a cut diff, whose last hunk may be
    partial."""
    if not changes.diff or changes.diff_truncated:
        return changes
    parsed = {found.path: found.hunks for found in parse_diff(changes.diff)}
    return dataclasses.replace(changes, hunks=parsed)
