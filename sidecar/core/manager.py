"""The sidecar's control plane: a small façade over the lifecycle, queries and library.

The manager is the only one that knows which sessions are live in this process (its
runtime registry, held by `lifecycle.py`); the store only knows what was last observed.
Entry points (the ACP and HTTP edges) call the manager; they never set a status
themselves. Lifecycle operations on one session run one at a time, in the order they
arrived. The parts: `lifecycle.py` (create, resume, load, close, delete, reconcile,
leases, shutdown), `queries.py` (views, listings, transcripts, output, changes; read
only), `library.py` (fork, archive, export, import), `settings.py` (mode, model, rules,
consent, names); the turns' calls (prompt, cancel, compact, rewind, resize) are here.

A prompt to a session that is not live in this process is refused (SessionNotLive,
-32044), with one documented exception, the auto-recovery: a session in error (its
runtime failed, e.g. the provider, or its record says error) is recovered before the
prompt runs, on the one resume path `session/resume` takes (the failed generation is
closed, a new one starts with lastError cleared; clients see it in the state events of
the new generation, and the log says "recovering from error before the prompt"). ACP has
no error state, and no client knows it must close and resume. A closed session is never
resumed by a prompt: the client resumes it (`session/resume` or `session/load`). A
prompt for a given generation (the HTTP listener's) never recovers.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Sequence
from typing import Any

from protocol.values import RewindScope, Status
from sidecar.agent.outcome import TurnOutcome
from sidecar.core import rewind as rewind_steps
from sidecar.core.file_search import FileMatches, FileSearch
from sidecar.core.hunk_revert import HunkRevert
from sidecar.core.library import EXPORT_PAGE, FORK_TITLE_MAX, SessionLibrary
from sidecar.core.lifecycle import ManagerDeps, NewSession, SessionLifecycle
from sidecar.core.output_spools import OutputPage
from sidecar.core.prompt_reading import read_prompt
from sidecar.core.queries import MAX_TURN_PAGE, SessionQueries, TurnPage
from sidecar.core.queue import SessionQueue
from sidecar.core.registry import KeyedLock, RuntimeRegistry
from sidecar.core.runtime import SessionRuntime
from sidecar.core.settings import SessionSettings
from sidecar.core.views import (
    CompactionOutcome,
    ImageData,
    RewindOutcome,
    SessionView,
    TerminalSize,
)
from sidecar.core.worktree_orphans import KnownRepos
from sidecar.core.worktree_sessions import SessionWorktrees
from sidecar.domain.agent_options import BUILTIN
from sidecar.domain.errors import InvalidInput, SessionBusy, SessionNotLive
from sidecar.domain.events import Origin
from sidecar.domain.files import TurnChanges
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import Entry
from sidecar.store.base import ListCursor

__all__ = [
    "EXPORT_PAGE",
    "FORK_TITLE_MAX",
    "MAX_TURN_PAGE",
    "ManagerDeps",
    "NewSession",
    "SessionManager",
    "TurnPage",
]


class SessionManager:
    def __init__(self, deps: ManagerDeps) -> None:
        registry: RuntimeRegistry[SessionRuntime] = RuntimeRegistry()
        self._queries = SessionQueries(deps.runtime, deps.leases, registry)
        self.queue = SessionQueue(self)  # `_session/queue*`: messages waiting for a turn
        self._lifecycle = SessionLifecycle(
            deps, registry, self._queries, self, on_started=self.queue.started
        )
        self._library = SessionLibrary(deps, self._lifecycle, self._queries)
        self.store = deps.runtime.store
        self.images = deps.runtime.images  # the data dir's images (queue checks them too)
        # What no session may see (the data and config dirs): also never mentioned.
        self.hidden_dirs: tuple[str, ...] = deps.runtime.hide
        self.events = deps.events
        self.settings = SessionSettings(self)
        self.worktrees = SessionWorktrees(self)  # `_session/worktree/*`
        self._files = FileSearch()  # `_session/files`: listings cached per directory

    @property
    def locks(self) -> KeyedLock:
        return self._lifecycle.locks

    @property
    def host(self) -> str:
        return self._lifecycle.host

    @property
    def known_repos(self) -> KnownRepos:
        """The repositories sessions made worktrees in (where orphans are looked for)."""
        return self._lifecycle.known_repos

    # ---- queries (queries.py) ---------------------------------------------------------------

    def runtime(self, session_id: str) -> SessionRuntime | None:
        """This process's live runtime of the session, if any."""
        return self._queries.runtime(session_id)

    def view_of(self, record: SessionRecord) -> SessionView:
        return self._queries.view_of(record)

    async def view(self, session_id: str) -> SessionView:
        return await self._queries.view(session_id)

    async def list_page(
        self,
        *,
        cwd: str | None,
        cursor: ListCursor | None,
        limit: int,
        query: str | None = None,
        archived: bool = False,
    ) -> tuple[list[SessionView], ListCursor | None]:
        return await self._queries.list_page(
            cwd=cwd, cursor=cursor, limit=limit, query=query, archived=archived
        )

    async def messages(
        self, session_id: str, offset: int, limit: int
    ) -> tuple[list[tuple[int, Entry]], int]:
        return await self._queries.messages(session_id, offset, limit)

    async def messages_by_turn(self, session_id: str, turn: int, turns: int) -> TurnPage:
        return await self._queries.messages_by_turn(session_id, turn, turns)

    def live_ids(self) -> list[str]:
        return self._queries.live_ids()

    async def live(
        self, session_id: str, action: str, generation: int | None = None
    ) -> SessionRuntime:
        return await self._queries.live(session_id, action, generation)

    async def files(self, session_id: str, query: str, limit: int) -> FileMatches:
        """Paths under a live session's cwd matching `query` (core/file_search.py)."""
        runtime = await self.live(session_id, "complete file names in")
        return await self._files.search(runtime.cwd, query, limit, runtime.hidden_dirs)

    async def output(self, session_id: str, call_id: str, offset: int, limit: int) -> OutputPage:
        return await self._queries.output(session_id, call_id, offset, limit)

    async def read_prompt(self, session_id: str, blocks: Sequence[dict[str, Any]]) -> UserPrompt:
        """The turn's user message from the client's blocks: the builtin engine's model
        gets `@`-mentioned files' text; an external agent that takes embedded context
        gets small text files embedded, any other keeps the links."""
        runtime = self.runtime(session_id)  # a live session's cwd and agent: no read
        record = runtime.record if runtime is not None else await self.store.get(session_id)
        return await read_prompt(
            blocks,
            cwd=record.cwd,
            hidden=self.hidden_dirs,
            reads_files=record.agent == BUILTIN,
            embeds_files=runtime is not None and runtime.engine.embeds_files,
        )

    async def image(self, session_id: str, digest: str) -> ImageData:
        """An image of the session's transcript (its id is the digest of its bytes: who
        has the id has seen the image), for a client to show."""
        await self.store.get(session_id)  # SessionNotFound for an unknown session
        mime, data = await self.images.load(digest)
        return ImageData(digest, mime, base64.b64encode(data).decode())

    async def changes(self, session_id: str, turn: int | None) -> TurnChanges:
        return await self._queries.changes(session_id, turn)

    # ---- lifecycle (lifecycle.py) -------------------------------------------------------------

    async def claimable(self, session_id: str, action: str) -> SessionRecord:
        return await self._lifecycle.claimable(session_id, action)

    async def reconcile(self) -> list[SessionRecord]:
        return await self._lifecycle.reconcile()

    def start_lease_renewal(self) -> None:
        self._lifecycle.start_lease_renewal()

    async def changed_elsewhere(self, session_id: str) -> None:
        await self._lifecycle.changed_elsewhere(session_id)

    async def create(self, spec: NewSession) -> SessionView:
        return await self._lifecycle.create(spec)

    async def resume(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        return await self._lifecycle.resume(session_id, mcp_servers)

    async def load(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        return await self._lifecycle.load(session_id, mcp_servers)

    async def close(self, session_id: str) -> SessionView:
        try:
            return await self._lifecycle.close(session_id)
        finally:
            self.queue.closed(session_id)  # the queue stays stored; its waiters are answered
            self.worktrees.changes.forget(session_id)

    async def delete(self, session_id: str, *, remove_worktree: bool = False) -> None:
        await self._lifecycle.delete(session_id, remove_worktree=remove_worktree)
        self.queue.closed(session_id)
        self.worktrees.changes.forget(session_id)

    async def shutdown(self) -> None:
        await self.queue.aclose()  # no queued message starts while sessions close
        await self._lifecycle.shutdown()
        self.worktrees.changes.close()

    # ---- the library (library.py) -------------------------------------------------------------

    async def fork(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: str | None = None,
        before_turn: int | None = None,
    ) -> SessionView:
        return await self._library.fork(session_id, cwd, mcp_servers, before_turn)

    async def archive(self, session_id: str, archived: bool) -> SessionView:
        return await self._library.archive(session_id, archived)

    async def export(
        self, session_id: str
    ) -> tuple[SessionRecord, AsyncIterator[list[dict[str, Any]]]]:
        return await self._library.export(session_id)

    async def import_session(
        self, exported: SessionRecord, rows: Sequence[dict[str, Any]]
    ) -> SessionView:
        return await self._library.import_session(exported, rows)

    # ---- turns ------------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        text: str | UserPrompt,
        origin: Origin,
        *,
        generation: int | None = None,
    ) -> TurnOutcome:
        """One turn. Not live here: SessionNotLive (-32044), but for a session in error
        (see the module's docstring): recovered first, by the same resume as
        `session/resume`, then prompted. With `generation`: that generation only."""
        self._lifecycle.refuse_if_shutting_down()
        runtime = self.runtime(session_id)
        if generation is None and (runtime is None or runtime.status is Status.ERROR):
            runtime = await self._lifecycle.recover(session_id)
        else:
            runtime = await self.live(session_id, "prompt", generation)
        return await runtime.turns.prompt(text, origin)

    def start_prompt(
        self, session_id: str, text: str, origin: Origin, *, generation: int
    ) -> asyncio.Task[TurnOutcome]:
        """A turn of one runtime generation (the HTTP listener's), its lock taken before
        this returns: an abort right behind it finds the turn. No recovery here: a
        generation's own endpoint never starts another."""
        self._lifecycle.refuse_if_shutting_down()
        runtime = self.runtime(session_id)
        if runtime is None or runtime.generation != generation:
            raise SessionNotLive(session_id, "prompt")
        return runtime.turns.start_prompt(text, origin)

    async def cancel(
        self, session_id: str, *, generation: int | None = None, clear_queue: bool = False
    ) -> bool:
        """True if a turn was running (or starting) and is now being cancelled. The queue
        is paused (kept), or emptied with `clear_queue`."""
        try:
            runtime = await self.live(session_id, "cancel", generation)
        except SessionNotLive:
            return False
        return await self.queue.cancel(runtime, clear=clear_queue)

    async def compact(self, session_id: str, keep_turns: int) -> CompactionOutcome:
        self._lifecycle.refuse_if_shutting_down()
        runtime = await self.live(session_id, "compact")
        return await runtime.turns.compact(keep_turns)

    async def rewind(
        self,
        session_id: str,
        turn: int | None,
        scope: RewindScope,
        *,
        force: bool = False,
        dry_run: bool = False,
    ) -> RewindOutcome:
        """Code, conversation or both back to before `turn` (None: undo the last code
        rewind); only while idle."""
        self._lifecycle.refuse_if_shutting_down()
        runtime = await self.live(session_id, "rewind")
        turns = runtime.record.turns
        if turn is None:
            if scope is not RewindScope.CODE:
                raise InvalidInput("undo", "undo takes back a code rewind: scope must be code")
        elif not 1 <= turn <= turns:
            raise InvalidInput("turn", f"no turn {turn}: the session has {turns} turn(s)")
        if runtime.turns.busy:
            raise SessionBusy(session_id)
        if dry_run:
            # Changes nothing: no turn lock, no state change (a prompt meanwhile still runs).
            return await rewind_steps.rewind(runtime.turns, turn, scope, force=force, dry_run=True)
        return await runtime.turns.rewind(turn, scope, force=force, dry_run=dry_run)

    async def revert(
        self, session_id: str, turn: int, path: str, hunks: Sequence[str], *, force: bool
    ) -> HunkRevert | None:
        """Hunks (none named: the whole file) of one file of `turn` taken back in the
        working tree; only while idle (None: cancelled before it began)."""
        self._lifecycle.refuse_if_shutting_down()
        runtime = await self.live(session_id, "revert changes of")
        turns = runtime.record.turns
        if not 1 <= turn <= turns:
            raise InvalidInput("turn", f"no turn {turn}: the session has {turns} turn(s)")
        if runtime.turns.busy:
            raise SessionBusy(session_id)
        return await runtime.turns.revert(turn, path, tuple(hunks), force=force)

    async def edit(self, session_id: str, turn: int, text: str, scope: RewindScope) -> TurnOutcome:
        """Edit and resend: the conversation (with `both`, the code too) back to before
        `turn`, then `text` as the next turn, as one step (no queued message in between).
        The earlier turns stay in the transcript, behind the rewind's marker."""
        if scope is RewindScope.CODE:
            raise InvalidInput("scope", "an edit rewinds the conversation: conversation or both")
        if not text.strip():
            raise InvalidInput("text", "must not be empty")
        runtime = await self.live(session_id, "edit a message of")
        async with self.queue.steering(session_id):
            await self.rewind(session_id, turn, scope)
            task = runtime.turns.start_prompt(text, Origin.ACP)
        return await asyncio.shield(task)

    async def resize(
        self, session_id: str, rows: int, cols: int, *, generation: int | None = None
    ) -> TerminalSize:
        return (await self.live(session_id, "resize", generation)).resize(rows, cols)
