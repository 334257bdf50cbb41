"""The sidecar's control plane: create, resume, close, delete, fork, list, reconcile, shut down.

The manager is the only one that knows which sessions are live in this process (its
runtime registry); the store only knows what was last observed. Entry points (the ACP
and HTTP edges) call the manager; they never set a status themselves. Lifecycle
operations on one session run one at a time, in the order they arrived.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.values import Approval, Backend, Mode, RewindScope, Sandbox, Status
from sidecar.agent.context import PageReader
from sidecar.agent.outcome import TurnOutcome
from sidecar.checkpoints.history import turn_changes
from sidecar.core import rewind as rewind_steps
from sidecar.core.cwd_rules import check_sandboxable
from sidecar.core.endpoint import SessionEndpoint
from sidecar.core.events import EventHub
from sidecar.core.lease_renewal import LeaseRenewal
from sidecar.core.leases import Leases
from sidecar.core.mcp_tools import server_views
from sidecar.core.output_spools import OutputPage
from sidecar.core.registry import KeyedLock, RuntimeRegistry
from sidecar.core.rewind import ContextState, context_at, locate_turn
from sidecar.core.runtime import RuntimeDeps, SessionRuntime
from sidecar.core.settings import SessionSettings
from sidecar.core.views import (
    Awaiting,
    CompactionOutcome,
    RewindOutcome,
    SessionView,
    TerminalSize,
)
from sidecar.domain.errors import (
    CheckpointError,
    InvalidInput,
    InvalidState,
    LeaseHeld,
    RuntimeLive,
    SessionBusy,
    SessionNotFound,
    SessionNotLive,
    ShuttingDown,
    SidecarError,
)
from sidecar.domain.events import Origin, StateChanged
from sidecar.domain.files import TurnChanges
from sidecar.domain.records import LIVE_STATES, SessionRecord, check_transition, now
from sidecar.domain.transcript import Entry, from_row
from sidecar.fs.trash import Trash
from sidecar.store.base import ListCursor

log = logging.getLogger(__name__)

FORK_TITLE_MAX = 200
MAX_TURN_PAGE = 1000  # entries in one page of whole turns
EXPORT_PAGE = 500  # transcript rows read at a time by an export


@dataclass(frozen=True, slots=True)
class TurnPage:
    entries: list[tuple[int, Entry]]
    total: int  # entries in the transcript
    turns: int  # turns in the session
    next_turn: int | None  # where the next page starts (None: this was the last)
    next_offset: int | None = None  # a page cut short (a huge turn): the rest from here


@dataclass(frozen=True, slots=True)
class NewSession:
    cwd: str  # absolute (the edge checked); the manager checks it exists
    mode: Mode = Mode.CRAFT
    backend: Backend = Backend.PIPE
    title: str = "Untitled session"
    approval: Approval = Approval.ASK
    sandbox: Sandbox | None = None  # None: the mode's default
    mcp_servers: str = "[]"  # the client's definitions, as given (validated by the edge)


@dataclass(frozen=True, slots=True)
class ManagerDeps:
    runtime: RuntimeDeps
    events: EventHub
    leases: Leases
    model_name: str | None = None


def _existing_dir(cwd: str) -> str:
    if not os.path.isdir(cwd):
        raise InvalidInput("cwd", f"no such directory: {cwd}")
    return os.path.normpath(cwd)


class SessionManager:
    def __init__(self, deps: ManagerDeps) -> None:
        self._deps = deps
        self.store = deps.runtime.store
        self.events = deps.events
        self._leases = deps.leases
        self._registry: RuntimeRegistry[SessionRuntime] = RuntimeRegistry()
        self.locks = KeyedLock()
        self._shutting_down = False
        self.settings = SessionSettings(self)
        self._renewal = LeaseRenewal(
            self.store, self._leases, self._registry, self._close_superseded, self._release
        )
        status = deps.runtime.sandbox
        self._sandbox_problem = None if status.available else status.reason
        self._trash = Trash()

    # ---- queries -------------------------------------------------------------------------

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
            )
        holder = self._leases.holder(record, now())
        mcp = server_views(None, record.mcp_servers)
        checkpoints = self._deps.runtime.checkpoints.problem
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
        read = self._reader(session_id)
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

    # ---- leases and reconciliation -------------------------------------------------------

    def _orphaned(self, record: SessionRecord) -> bool:
        """Live-looking, but no process runs it: none of ours, and its lease holder is gone,
        or is this process (whose runtime closed without writing so: the store was away).
        Callers hold the session's lock, so a create or resume of ours is not half-way."""
        if record.session_id in self._registry:
            return False
        return record.lease_owner == self._leases.owner or self._leases.orphaned(record, now())

    async def _release(self, session_id: str) -> None:
        """A lease this process holds with no runtime here: closed now (reconciled), so no
        host waits on a lease we would otherwise renew for as long as we live."""
        try:
            async with self.locks.hold(session_id):
                if session_id in self._registry:
                    return  # created or resumed meanwhile
                record = await self.store.reconcile_one(session_id, self._orphaned)
        except SidecarError as exc:  # deleted meanwhile, or the store is away: next round
            log.info("session %s: releasing its lease failed: %s", session_id, exc)
            return
        log.info("session %s: closed, its runtime was gone (lease released)", session_id)
        self.events.publish(session_id, StateChanged(record))

    async def claimable(self, session_id: str, action: str) -> SessionRecord:
        """The record, with orphaned live state reconciled (this row only); LeaseHeld if a
        live sidecar elsewhere runs it."""
        record = await self.store.get(session_id)
        if record.status in LIVE_STATES and session_id not in self._registry:
            holder = self._leases.holder(record, now())
            if holder is not None:
                raise LeaseHeld(session_id, action, holder)
            record = await self.store.reconcile_one(session_id, self._orphaned)
            self.events.publish(session_id, StateChanged(record))
        return record

    async def reconcile(self) -> list[SessionRecord]:
        """Start-up: records left live by processes that are gone become closed; those a
        live sidecar elsewhere holds are left alone."""
        changed = await self.store.reconcile_orphans(self._orphaned)
        # What a previous process moved aside at a delete and did not get to remove.
        self._trash.sweep((self._deps.runtime.checkpoints.root, self._deps.runtime.spools.root))
        for record in changed:
            log.info(
                "reconciled session %s: closed%s",
                record.session_id,
                " (turn interrupted)" if record.interrupted else "",
            )
        return changed

    def start_lease_renewal(self) -> None:
        self._renewal.start()

    async def changed_elsewhere(self, session_id: str) -> None:
        """Another sidecar changed this session (the store's change feed): our clients get
        its state, as they do for our own changes. A session live here: a change that left
        it ours (a rename there) is told; a newer generation means it was taken over while
        we were frozen or cut off, so our runtime is dropped now (unwritten, as the lease
        renewal would) and the new state told."""
        try:
            record = await self.store.get(session_id)
        except SessionNotFound:
            return  # deleted there; the next listing says so
        runtime = self._registry.get(session_id)
        if runtime is not None:
            if record.generation <= runtime.generation:
                if record.lease_owner == self._leases.owner:
                    runtime.events.publish(StateChanged(record))
                return
            log.warning("session %s was taken over elsewhere; stopping here", session_id)
            await self._close_superseded(runtime)  # writes nothing: `record` stays current
        if session_id in self._registry:
            return  # resumed here meanwhile: its own events tell
        stream = self.events.stream(session_id)
        stream.publish(StateChanged(record))
        stream.end_subscriptions()  # nothing replays a session not live here: keep no buffer

    async def _close_superseded(self, runtime: SessionRuntime) -> None:
        """Another process took the session over: drop our runtime, writing nothing."""
        runtime.superseded = True
        try:
            async with self.locks.hold(runtime.session_id):
                await self._close_runtime(runtime)
        except SidecarError as exc:  # e.g. the session was deleted by the new holder
            log.info("session %s: superseded runtime closed (%s)", runtime.session_id, exc)

    # ---- lifecycle -----------------------------------------------------------------------

    def _refuse_if_shutting_down(self) -> None:
        if self._shutting_down:
            raise ShuttingDown()

    def _new_record(self, cwd: str, mode: Mode, backend: Backend, title: str) -> SessionRecord:
        created = now()
        return SessionRecord(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            title=title,
            mode=mode,
            backend=backend,
            status=Status.CREATING,
            generation=1,
            created_at=created,
            updated_at=created,
            model=self._deps.model_name,
            lease_owner=self._leases.owner,
            lease_expires=self._leases.expiry(created),
        )

    async def create(self, spec: NewSession) -> SessionView:
        self._refuse_if_shutting_down()
        cwd = _existing_dir(spec.cwd)
        check_sandboxable(cwd, spec.mode, spec.sandbox)
        record = self._new_record(cwd, spec.mode, spec.backend, spec.title).replace(
            approval=spec.approval, sandbox=spec.sandbox, mcp_servers=spec.mcp_servers
        )
        async with self.locks.hold(record.session_id):
            await self.store.insert(record)
            return await self._start(record)

    async def resume(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        """`mcp_servers`: new definitions for the session (None keeps the stored ones)."""
        self._refuse_if_shutting_down()
        async with self.locks.hold(session_id):
            return await self._resume(session_id, mcp_servers)

    async def load(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        """The session live in this process: resumed unless it already is (no new generation;
        a generation in error is replaced, as resume does)."""
        self._refuse_if_shutting_down()
        async with self.locks.hold(session_id):
            runtime = self.runtime(session_id)
            if runtime is not None and runtime.status is not Status.ERROR:
                return self.view_of(await self.store.get(session_id))
            return await self._resume(session_id, mcp_servers)

    async def _recover(self, session_id: str) -> SessionRuntime:
        """A session in error (its runtime failed, or never started) gets a new generation
        before the next prompt runs: the failed one is closed, the record keeps its
        history, lastError is cleared."""
        async with self.locks.hold(session_id):
            runtime = self.runtime(session_id)
            if runtime is None or runtime.status is Status.ERROR:
                record = await self.store.get(session_id)
                failed = runtime is not None or record.status is Status.ERROR
                if failed:
                    log.info("session %s: recovering from error before the prompt", session_id)
                    await self._resume(session_id)
        return await self.live(session_id, "prompt")

    async def _resume(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        failed = self._registry.get(session_id)
        if failed is not None and failed.status is Status.ERROR and not failed.closed:
            # A provider failure left this generation in error. ACP has no error state and
            # no client knows it must close and resume: recovering is ours to do (close the
            # failed generation; the new one starts below, lastError cleared).
            await self._close_runtime(failed)
        if self.runtime(session_id) is not None:
            raise RuntimeLive(session_id, "resume")
        record = await self.claimable(session_id, "resume")
        if record.status is Status.ERROR:
            # error -> closing -> closed -> resume: the table's path, with no runtime to stop.
            record = await self._close_without_runtime(record)
        if record.status in LIVE_STATES:
            raise RuntimeLive(session_id, "resume")
        check_transition(session_id, record.status, Status.CREATING)
        record = await self.store.begin_generation(
            session_id,
            record.generation,
            lease_owner=self._leases.owner,
            lease_expires=self._leases.expiry(now()),
        )
        if mcp_servers is not None:
            record = await self.store.update(session_id, record.generation, mcp_servers=mcp_servers)
        return await self._start(record)

    async def _start(self, record: SessionRecord) -> SessionView:
        stream = self.events.stream(record.session_id)
        runtime = SessionRuntime(record, self._deps.runtime, stream)
        self._registry.add(runtime)
        stream.publish(StateChanged(record))
        endpoint = SessionEndpoint(self, record.session_id, record.generation, stream)
        try:
            await runtime.start(endpoint)
        except BaseException:
            # RuntimeFailed (the record says error) or worse: either way nothing is live.
            self._registry.remove(runtime)
            raise
        return self.view_of(runtime.record)

    async def close(self, session_id: str) -> SessionView:
        async with self.locks.hold(session_id):
            runtime = self._registry.get(session_id)
            if runtime is not None:
                await self._close_runtime(runtime)
                return await self.view(session_id)
            record = await self.claimable(session_id, "close")
            if record.status is Status.CLOSED:
                return self.view_of(record)  # idempotent: nothing changes
            if record.status is Status.ERROR:
                return self.view_of(await self._close_without_runtime(record))
            raise InvalidState(
                f"session {session_id} is {record.status.value} but has no runtime in this sidecar"
            )

    async def _close_runtime(self, runtime: SessionRuntime) -> None:
        try:
            await runtime.close()
        finally:
            self._registry.remove(runtime)

    async def _close_without_runtime(self, record: SessionRecord) -> SessionRecord:
        for status in (Status.CLOSING, Status.CLOSED):
            check_transition(record.session_id, record.status, status)
            if status is Status.CLOSED:
                record = await self.store.update(
                    record.session_id,
                    record.generation,
                    status=status,
                    lease_owner=None,
                    lease_expires=None,
                )
            else:
                record = await self.store.update(
                    record.session_id, record.generation, status=status
                )
            self.events.publish(record.session_id, StateChanged(record))
        return record

    async def fork(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: str | None = None,
        before_turn: int | None = None,
    ) -> SessionView:
        """A new session (new id, generation 1) with a copy of the transcript so far (of a
        running session, up to its last completed turn), or up to before `before_turn`;
        with the source's checkpoints when it works in the same directory."""
        self._refuse_if_shutting_down()
        source = await self.store.get(session_id)
        upto, turns = source.message_count, source.turns
        runtime = self.runtime(session_id)
        if runtime is not None and runtime.turns.before_turn is not None:
            upto, turns = runtime.turns.before_turn
        context = ContextState(source.summary_index, source.context_from, None, ())
        if before_turn is not None:
            if not 1 <= before_turn <= turns:
                raise InvalidInput("turn", f"the session has {turns} completed turn(s)")
            read = self._reader(session_id)
            start = await locate_turn(read, upto, before_turn)
            if start is None:
                raise InvalidInput("turn", f"turn {before_turn} is not in the transcript")
            upto, turns = start, before_turn - 1
            context = await context_at(read, source, start)
        keeps_summary = context.pointer is not None and context.pointer < upto
        cwd = _existing_dir(cwd)
        check_sandboxable(cwd, source.mode, source.sandbox)
        record = self._new_record(
            cwd,
            source.mode,
            source.backend,
            f"{source.title} (fork)"[:FORK_TITLE_MAX],
        ).replace(
            model=source.model,
            forked_from=session_id,
            context_from=context.context_from if keeps_summary else 0,
            summary_index=context.pointer if keeps_summary else None,
            turns=turns,
            approval=source.approval,
            sandbox=source.sandbox,
            rules=source.rules,
            mcp_servers=source.mcp_servers if mcp_servers is None else mcp_servers,
        )
        async with self.locks.hold(record.session_id):
            if cwd == source.cwd:
                try:
                    await self._deps.runtime.checkpoints.fork(
                        session_id, record.session_id, cwd, before_turn
                    )
                except (CheckpointError, OSError) as exc:
                    log.warning("fork %s: checkpoints not copied: %s", record.session_id, exc)
            return await self._start(await self.store.fork(session_id, record, upto))

    # ---- the session library: archive, export, import ----------------------------------

    async def archive(self, session_id: str, archived: bool) -> SessionView:
        """Any session, live or not (a live one stays live: archiving only hides it from
        the default listing)."""
        record = await self.store.update_metadata(session_id, archived=archived)
        runtime = self.runtime(session_id)
        if runtime is not None:
            runtime.record = runtime.record.replace(archived=record.archived)
        self.events.publish(session_id, StateChanged(record))
        return self.view_of(record)

    async def export(
        self, session_id: str
    ) -> tuple[SessionRecord, AsyncIterator[list[dict[str, Any]]]]:
        """The record and its whole transcript in pages, as of now: rows a running turn
        appends meanwhile are not included (the record counts what is exported)."""
        record = await self.store.get(session_id)

        async def pages() -> AsyncIterator[list[dict[str, Any]]]:
            for offset in range(0, record.message_count, EXPORT_PAGE):
                limit = min(EXPORT_PAGE, record.message_count - offset)
                yield await self.store.messages(session_id, offset, limit)

        return record, pages()

    async def import_session(
        self, exported: SessionRecord, rows: Sequence[dict[str, Any]]
    ) -> SessionView:
        """A new session (new id, closed: resume it to work in it) with the exported
        settings and `rows` as its transcript, in one store transaction. `exported` is
        the export's record; its id becomes `imported_from`. Its MCP servers are not
        taken (an export never holds them)."""
        self._refuse_if_shutting_down()
        cwd = _existing_dir(exported.cwd)
        check_sandboxable(cwd, exported.mode, exported.sandbox)
        created = now()
        record = exported.replace(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            status=Status.CLOSED,
            generation=1,
            created_at=created,
            updated_at=created,
            last_error=None,
            interrupted=False,
            message_count=0,
            forked_from=None,
            lease_owner=None,
            lease_expires=None,
            mcp_servers="[]",
            archived=False,
            imported_from=exported.session_id,
        )
        return self.view_of(await self.store.insert_with_transcript(record, rows))

    def _reader(self, session_id: str) -> PageReader:
        async def read(offset: int, limit: int) -> list[Entry]:
            return [from_row(row) for row in await self.store.messages(session_id, offset, limit)]

        return read

    async def delete(self, session_id: str) -> None:
        async with self.locks.hold(session_id):
            if self._registry.get(session_id) is not None:
                raise RuntimeLive(session_id, "delete")
            record = await self.claimable(session_id, "delete")
            if record.status in LIVE_STATES:
                raise RuntimeLive(session_id, "delete")
            await self.store.delete(session_id)
            self.events.forget(session_id)
            runtime = self._deps.runtime
            try:
                # Moved aside now (a rename each), removed after the answer (fs/trash.py).
                aside = [runtime.checkpoints.detach(session_id), runtime.spools.detach(session_id)]
            except OSError as exc:
                # The session is gone; its files stay until removed by hand: say where.
                log.error("session %s deleted, but not all its files were: %s", session_id, exc)
                return
            self._trash.remove_later(aside)

    # ---- turns and settings --------------------------------------------------------------

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

    async def prompt(
        self, session_id: str, text: str, origin: Origin, *, generation: int | None = None
    ) -> TurnOutcome:
        self._refuse_if_shutting_down()
        runtime = self.runtime(session_id)
        if generation is None and (runtime is None or runtime.status is Status.ERROR):
            runtime = await self._recover(session_id)
        else:
            runtime = await self.live(session_id, "prompt", generation)
        return await runtime.turns.prompt(text, origin)

    def start_prompt(
        self, session_id: str, text: str, origin: Origin, *, generation: int
    ) -> asyncio.Task[TurnOutcome]:
        """A turn of one runtime generation (the HTTP listener's), its lock taken before
        this returns: an abort right behind it finds the turn. No recovery here: a
        generation's own endpoint never starts another."""
        self._refuse_if_shutting_down()
        runtime = self.runtime(session_id)
        if runtime is None or runtime.generation != generation:
            raise SessionNotLive(session_id, "prompt")
        return runtime.turns.start_prompt(text, origin)

    async def cancel(self, session_id: str, *, generation: int | None = None) -> bool:
        """True if a turn was running (or starting) and is now being cancelled."""
        try:
            runtime = await self.live(session_id, "cancel", generation)
        except SessionNotLive:
            return False
        return runtime.turns.abort()

    async def compact(self, session_id: str, keep_turns: int) -> CompactionOutcome:
        self._refuse_if_shutting_down()
        runtime = await self.live(session_id, "compact")
        return await runtime.turns.compact(keep_turns)

    async def output(self, session_id: str, call_id: str, offset: int, limit: int) -> OutputPage:
        """A page of a command's whole output (spooled), any session, live or not."""
        await self.store.get(session_id)
        return await asyncio.to_thread(
            self._deps.runtime.spools.read, session_id, call_id, offset, limit
        )

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
            return await runtime.checkpoints.changes(turn, idle=idle)
        repo = self._deps.runtime.checkpoints.repo(session_id, record.cwd)
        if not repo.exists:
            raise CheckpointError(f"session {session_id} has no checkpoints")
        return await turn_changes(repo, turn, current=None, with_diff=True)

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
        self._refuse_if_shutting_down()
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

    async def resize(
        self, session_id: str, rows: int, cols: int, *, generation: int | None = None
    ) -> TerminalSize:
        return (await self.live(session_id, "resize", generation)).resize(rows, cols)

    # ---- the process ---------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Close every live runtime (records kept). Used on stdin EOF, signals, _sidecar/shutdown."""
        self._shutting_down = True
        self._renewal.stop()
        # Loop: a create or resume already in flight may register one more runtime.
        while ids := self._registry.ids():
            results = await asyncio.gather(*(self.close(i) for i in ids), return_exceptions=True)
            for session_id, result in zip(ids, results, strict=True):
                if isinstance(result, BaseException):
                    log.error("closing session %s at shutdown failed: %s", session_id, result)
                    runtime = self._registry.get(session_id)
                    if runtime is not None:
                        self._registry.remove(runtime)
