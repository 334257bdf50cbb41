"""Sessions' lifecycles in this process: create, resume, load, recover, close, delete,
reconcile, lease renewal, shut down.

The lifecycle owns the runtime registry (which sessions are live here) and the per-session
lock: lifecycle operations on one session run one at a time, in the order they arrived.
A runtime is registered before it starts and removed when it closed or failed to start;
nothing else adds or removes one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.core import worktree_place
from sidecar.core.cwd_rules import check_sandboxable
from sidecar.core.endpoint import EndpointOwner, SessionEndpoint
from sidecar.core.events import EventHub
from sidecar.core.lease_renewal import LeaseRenewal
from sidecar.core.leases import Leases
from sidecar.core.queries import SessionQueries
from sidecar.core.registry import KeyedLock, RuntimeRegistry
from sidecar.core.runtime import RuntimeDeps, SessionRuntime
from sidecar.core.views import SessionView
from sidecar.core.worktree_orphans import KnownRepos
from sidecar.core.worktree_place import WorktreeRequest
from sidecar.domain.errors import (
    InvalidInput,
    InvalidState,
    LeaseHeld,
    RuntimeLive,
    SessionNotFound,
    ShuttingDown,
    SidecarError,
)
from sidecar.domain.events import StateChanged
from sidecar.domain.records import LIVE_STATES, SessionRecord, check_transition, now
from sidecar.domain.worktree_info import WorktreeInfo
from sidecar.fs.trash import Trash

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NewSession:
    cwd: str  # absolute (the edge checked); the manager checks it exists
    mode: Mode = Mode.CRAFT
    backend: Backend = Backend.PIPE
    title: str = "Untitled session"
    approval: Approval = Approval.ASK
    sandbox: Sandbox | None = None  # None: the mode's default
    mcp_servers: str = "[]"  # the client's definitions, as given (validated by the edge)
    agent: str = "builtin"  # what runs the turns (RuntimeDeps.knows_agent must know it)
    worktree: WorktreeRequest | None = None  # work in a new git worktree of the cwd's repo


@dataclass(frozen=True, slots=True)
class ManagerDeps:
    runtime: RuntimeDeps
    events: EventHub
    leases: Leases
    model_name: str | None = None
    # Where the repositories sessions made worktrees in are remembered (orphans are looked
    # for there); None: for this process only.
    worktree_repos: Path | None = None


def existing_dir(cwd: str) -> str:
    if not os.path.isdir(cwd):
        raise InvalidInput("cwd", f"no such directory: {cwd}")
    return os.path.normpath(cwd)


class SessionLifecycle:
    def __init__(
        self,
        deps: ManagerDeps,
        registry: RuntimeRegistry[SessionRuntime],
        queries: SessionQueries,
        endpoint_owner: EndpointOwner,
        on_started: Callable[[SessionRuntime], Awaitable[None]] | None = None,
    ) -> None:
        self._deps = deps
        self._on_started = on_started  # each runtime, once started (its queue goes on)
        self.store = deps.runtime.store
        self.events = deps.events
        self._leases = deps.leases
        self._registry = registry
        self._queries = queries
        self._endpoint_owner = endpoint_owner  # what a runtime's HTTP listener calls
        self.locks = KeyedLock()
        self.known_repos = KnownRepos(deps.worktree_repos)
        self._shutting_down = False
        self._renewal = LeaseRenewal(
            self.store, self._leases, self._registry, self._close_superseded, self._release
        )
        self._trash = Trash()

    @property
    def host(self) -> str:
        """This sidecar's host id (`--host-id`): whose disk a worktree made here is on."""
        return self._leases.host

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
        runtime.supersede()
        try:
            async with self.locks.hold(runtime.session_id):
                await self._close_runtime(runtime)
        except SidecarError as exc:  # e.g. the session was deleted by the new holder
            log.info("session %s: superseded runtime closed (%s)", runtime.session_id, exc)

    def refuse_if_shutting_down(self) -> None:
        if self._shutting_down:
            raise ShuttingDown()

    def new_record(self, cwd: str, mode: Mode, backend: Backend, title: str) -> SessionRecord:
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
        self.refuse_if_shutting_down()
        cwd = existing_dir(spec.cwd)
        check_sandboxable(cwd, spec.mode, spec.sandbox)
        if not self._deps.runtime.knows_agent(spec.agent):
            raise InvalidInput("agent", f"unknown agent {spec.agent!r}")
        record = self.new_record(cwd, spec.mode, spec.backend, spec.title).replace(
            approval=spec.approval,
            sandbox=spec.sandbox,
            mcp_servers=spec.mcp_servers,
            agent=spec.agent,
        )
        if spec.worktree is None:
            async with self.locks.hold(record.session_id):
                await self.store.insert(record)
                return await self.start(record)
        info = await worktree_place.make(cwd, record.session_id, spec.worktree, self._leases.host)
        await self.known_repos.add(info.repo)
        record = record.replace(cwd=info.path, worktree=info.to_json())
        async with self.locks.hold(record.session_id):
            try:
                await self.store.insert(record)
            except BaseException:
                # Not stored: the worktree is nobody's (its branch is new, nothing on it).
                await asyncio.shield(self.unmake(info, record.session_id))
                raise
            return await self.start(record)

    async def unmake(self, info: WorktreeInfo, session_id: str) -> None:
        """A worktree made for a session that was never stored goes, with its branch."""
        try:
            await worktree_place.release(info, session_id, self._leases.host, force=True)
        except InvalidState as exc:  # reported by `_session/worktree/orphans`
            log.warning(
                "the worktree of session %s that was never stored stays: %s", session_id, exc
            )

    async def resume(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        """`mcp_servers`: new definitions for the session (None keeps the stored ones)."""
        self.refuse_if_shutting_down()
        async with self.locks.hold(session_id):
            return await self._resume(session_id, mcp_servers)

    async def load(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        """The session live in this process: resumed unless it already is (no new generation;
        a generation in error is replaced, as resume does)."""
        self.refuse_if_shutting_down()
        async with self.locks.hold(session_id):
            runtime = self._queries.runtime(session_id)
            if runtime is not None and runtime.status is not Status.ERROR:
                return self._queries.view_of(await self.store.get(session_id))
            return await self._resume(session_id, mcp_servers)

    async def recover(self, session_id: str) -> SessionRuntime:
        """A session in error (its runtime failed, or never started) gets a new generation
        before the next prompt runs: the failed one is closed, the record keeps its
        history, lastError is cleared."""
        async with self.locks.hold(session_id):
            runtime = self._queries.runtime(session_id)
            if runtime is None or runtime.status is Status.ERROR:
                record = await self.store.get(session_id)
                failed = runtime is not None or record.status is Status.ERROR
                if failed:
                    log.info("session %s: recovering from error before the prompt", session_id)
                    await self._resume(session_id)
        return await self._queries.live(session_id, "prompt")

    async def _resume(self, session_id: str, mcp_servers: str | None = None) -> SessionView:
        failed = self._registry.get(session_id)
        if failed is not None and failed.status is Status.ERROR and not failed.closed:
            # A provider failure left this generation in error. ACP has no error state and
            # no client knows it must close and resume: recovering is ours to do (close the
            # failed generation; the new one starts below, lastError cleared).
            await self._close_runtime(failed)
        if self._queries.runtime(session_id) is not None:
            raise RuntimeLive(session_id, "resume")
        record = await self.claimable(session_id, "resume")
        if record.status is Status.ERROR:
            # error -> closing -> closed -> resume: the table's path, with no runtime to stop.
            record = await self._close_without_runtime(record)
        if record.status in LIVE_STATES:
            raise RuntimeLive(session_id, "resume")
        check_transition(session_id, record.status, Status.CREATING)
        info = WorktreeInfo.from_json(record.worktree)
        if info is not None:
            # On this host, its directory there (recreated when it was removed): checked
            # before a generation begins, so a refusal leaves the record as it was.
            await worktree_place.ensure(info, session_id, self._leases.host)
        record = await self.store.begin_generation(
            session_id,
            record.generation,
            lease_owner=self._leases.owner,
            lease_expires=self._leases.expiry(now()),
        )
        if mcp_servers is not None:
            record = await self.store.update(session_id, record.generation, mcp_servers=mcp_servers)
        return await self.start(record)

    async def start(self, record: SessionRecord) -> SessionView:
        stream = self.events.stream(record.session_id)
        runtime = SessionRuntime(record, self._deps.runtime, stream)
        self._registry.add(runtime)
        stream.publish(StateChanged(record))
        endpoint = SessionEndpoint(
            self._endpoint_owner, record.session_id, record.generation, stream
        )
        try:
            await runtime.start(endpoint)
        except BaseException:
            # RuntimeFailed (the record says error) or worse: either way nothing is live.
            self._registry.remove(runtime)
            raise
        if self._on_started is not None:
            await self._on_started(runtime)
        return self._queries.view_of(runtime.record)

    async def close(self, session_id: str) -> SessionView:
        async with self.locks.hold(session_id):
            runtime = self._registry.get(session_id)
            if runtime is not None:
                await self._close_runtime(runtime)
                return await self._queries.view(session_id)
            record = await self.claimable(session_id, "close")
            if record.status is Status.CLOSED:
                return self._queries.view_of(record)  # idempotent: nothing changes
            if record.status is Status.ERROR:
                return self._queries.view_of(await self._close_without_runtime(record))
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

    async def delete(self, session_id: str, *, remove_worktree: bool = False) -> None:
        """`remove_worktree`: its own worktree goes even with work not merged."""
        async with self.locks.hold(session_id):
            if self._registry.get(session_id) is not None:
                raise RuntimeLive(session_id, "delete")
            record = await self.claimable(session_id, "delete")
            if record.status in LIVE_STATES:
                raise RuntimeLive(session_id, "delete")
            worktree = WorktreeInfo.from_json(record.worktree)
            if worktree is not None:
                await worktree_place.release(
                    worktree, session_id, self._leases.host, force=remove_worktree
                )
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
