"""The sidecar's control plane: create, resume, close, forget, list, reconcile, shut down.

The manager is the only one that knows which sessions are live in this process
(its runtime registry); the store only knows what was last observed. Entry points
(stdio, HTTP) call the manager; they never set a status themselves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

from protocol.models import BACKENDS, MODES
from sidecar import lease
from sidecar.agent.turn import TurnOutcome
from sidecar.errors import (
    InvalidInput,
    InvalidState,
    LeaseHeld,
    RuntimeLive,
    SessionNotLive,
    ShuttingDown,
    SidecarError,
)
from sidecar.events import STATE, Event
from sidecar.records import (
    LIVE_STATES,
    SessionRecord,
    SessionState,
    check_transition,
    now,
)
from sidecar.runtime import RuntimeDeps, SessionRuntime
from sidecar.summary import build_summary

log = logging.getLogger(__name__)


def validate_new(cwd: Any, mode: Any, backend: Any, title: Any) -> None:
    if not isinstance(cwd, str) or not cwd:
        raise InvalidInput("cwd", "must be a non-empty string")
    if "\x00" in cwd or not os.path.isabs(cwd):
        raise InvalidInput("cwd", f"must be an absolute path, got {cwd!r}")
    if not os.path.isdir(cwd):
        raise InvalidInput("cwd", f"no such directory: {cwd}")
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if backend not in BACKENDS:
        raise InvalidInput("backend", f"must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("title", "must be non-empty text")


class SessionManager:
    def __init__(self, deps: RuntimeDeps, *, lease_ttl: float = 15.0) -> None:
        self._deps = deps
        self._store = deps.store
        self._runtimes: dict[str, SessionRuntime] = {}
        self._shutting_down = False
        self.owner = lease.this_process().encode()
        self.lease_ttl = lease_ttl
        self._renewal: asyncio.Task[None] | None = None
        # Why the store cannot be used (told to clients at initialize), or None.
        self.store_problem: str | None = None
        self.model_name: Callable[[], str | None] = lambda: None

    # ---- queries -------------------------------------------------------------------------

    def runtime(self, session_id: str) -> SessionRuntime | None:
        return self._runtimes.get(session_id)

    def summary(self, session_id: str, *, include_token: bool = True) -> dict[str, Any]:
        return self._summarize(self._store.get(session_id), include_token=include_token)

    def _summarize(self, record: SessionRecord, *, include_token: bool = True) -> dict[str, Any]:
        runtime = self._runtimes.get(record.session_id)
        live = runtime is not None and not runtime.closed
        return build_summary(
            record,
            held_by=self._holder(record),
            live=live,
            url=runtime.url if runtime else None,
            token=runtime.token if runtime else None,
            include_token=include_token,
        )

    def list_page(
        self, *, cwd: str | None, cursor: int | None, limit: int
    ) -> tuple[list[dict[str, Any]], int | None]:
        records, next_cursor = self._store.list_page(cwd=cwd, cursor=cursor, limit=limit)
        return [self._summarize(r) for r in records], next_cursor

    def messages(
        self, session_id: str, offset: int, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        total = self._store.get(session_id).message_count
        return self._store.messages(session_id, offset, limit), total

    def live_ids(self) -> list[str]:
        return list(self._runtimes)

    # ---- lifecycle -----------------------------------------------------------------------

    # ---- leases --------------------------------------------------------------------------

    def _expiry(self) -> float:
        return now() + self.lease_ttl

    def _orphaned(self, record: SessionRecord) -> bool:
        """Live-looking, but no process runs it: none of ours, and its lease holder is gone."""
        return record.session_id not in self._runtimes and lease.holder_gone(
            record.lease_owner, record.lease_expires, now()
        )

    def _holder(self, record: SessionRecord) -> str | None:
        """Who else runs this session right now, if another live sidecar does."""
        if record.status not in LIVE_STATES or record.lease_owner in (None, self.owner):
            return None
        if lease.holder_gone(record.lease_owner, record.lease_expires, now()):
            return None
        return lease.describe(record.lease_owner)

    def _claimable(self, session_id: str, action: str) -> SessionRecord:
        """The record, with any orphaned live state reconciled; LeaseHeld if a live
        sidecar elsewhere runs it."""
        record = self._store.get(session_id)
        if record.status in LIVE_STATES and session_id not in self._runtimes:
            holder = self._holder(record)
            if holder is not None:
                raise LeaseHeld(session_id, action, holder)
            self._store.reconcile_orphans(
                lambda r: r.session_id == session_id and self._orphaned(r)
            )
            record = self._store.get(session_id)
        return record

    async def renew_leases_forever(self) -> None:
        """Renew every lease this process holds, all in one statement, every ttl/3. A
        session another process took over meanwhile loses its runtime here, unwritten."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                held = self._store.renew_leases(self.owner, self._expiry())
            except SidecarError as exc:
                log.error("renewing leases failed: %s", exc)
                continue
            for session_id, runtime in list(self._runtimes.items()):
                if session_id not in held and not runtime.closed:
                    log.warning("session %s was taken over elsewhere; stopping here", session_id)
                    runtime.superseded = True
                    asyncio.create_task(self.close(session_id))

    def start_lease_renewal(self) -> None:
        if self._renewal is None:
            self._renewal = asyncio.create_task(self.renew_leases_forever(), name="leases")

    def reconcile(self) -> list[SessionRecord]:
        """Start-up: records left live by processes that are gone become closed; those a
        live sidecar elsewhere holds are left alone."""
        changed = self._store.reconcile_orphans(self._orphaned)
        for record in changed:
            log.info(
                "reconciled session %s: closed%s",
                record.session_id,
                " (turn interrupted)" if record.interrupted else "",
            )
        return changed

    async def create(
        self, cwd: Any, mode: Any = "craft", backend: Any = "pipe", title: Any = "Untitled session"
    ) -> dict[str, Any]:
        self._refuse_if_shutting_down()
        validate_new(cwd, mode, backend, title)
        created = now()
        record = SessionRecord(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=os.path.normpath(cwd),  # noqa: ASYNC240 (pure string operation)
            title=title.strip(),
            mode=mode,
            backend=backend,
            status=SessionState.CREATING,
            generation=1,
            created_at=created,
            updated_at=created,
            model=self.model_name(),
            lease_owner=self.owner,
            lease_expires=self._expiry(),
        )
        self._store.insert(record)
        return await self._start(record)

    async def resume(self, session_id: str) -> dict[str, Any]:
        self._refuse_if_shutting_down()
        if session_id in self._runtimes:
            raise RuntimeLive(session_id, "resume")
        record = self._claimable(session_id, "resume")
        if record.status is SessionState.ERROR:
            # error -> closing -> closed -> resume: the table's path, with no runtime to stop.
            record = self._close_without_runtime(record)
        if record.status in LIVE_STATES:
            raise RuntimeLive(session_id, "resume")
        check_transition(session_id, record.status, SessionState.CREATING)
        if session_id in self._runtimes:  # re-check: nothing above awaited, but stay explicit
            raise RuntimeLive(session_id, "resume")
        record = self._store.begin_generation(
            session_id, record.generation, lease_owner=self.owner, lease_expires=self._expiry()
        )
        return await self._start(record)

    async def _start(self, record: SessionRecord) -> dict[str, Any]:
        runtime = SessionRuntime(record, self._deps)
        self._runtimes[record.session_id] = runtime
        self._deps.on_event(record.session_id, self._state_event(record))
        try:
            await runtime.start()
        except BaseException:
            # RuntimeFailed (record says error) or worse: either way nothing is live.
            self._runtimes.pop(record.session_id, None)
            raise
        return self.summary(record.session_id)

    async def close(self, session_id: str) -> dict[str, Any]:
        runtime = self._runtimes.get(session_id)
        if runtime is not None:
            try:
                await runtime.close()
            finally:
                if self._runtimes.get(session_id) is runtime:
                    del self._runtimes[session_id]
            return self.summary(session_id)
        record = self._claimable(session_id, "close")
        if record.status is SessionState.CLOSED:
            return self._summarize(record)  # idempotent: nothing changes
        if record.status is SessionState.ERROR:
            return self._summarize(self._close_without_runtime(record))
        raise InvalidState(
            f"session {session_id} is {record.status.value} but has no runtime in this sidecar"
        )

    def _close_without_runtime(self, record: SessionRecord) -> SessionRecord:
        check_transition(record.session_id, record.status, SessionState.CLOSING)
        record = self._store.update(record.session_id, record.generation, status="closing")
        check_transition(record.session_id, record.status, SessionState.CLOSED)
        record = self._store.update(
            record.session_id,
            record.generation,
            status="closed",
            lease_owner=None,
            lease_expires=None,
        )
        self._deps.on_event(record.session_id, self._state_event(record))
        return record

    async def fork(self, session_id: str, cwd: Any) -> dict[str, Any]:
        """A new session (new id, generation 1) with a copy of the transcript so far; of a
        running session, up to its last completed turn."""
        self._refuse_if_shutting_down()
        source = self._store.get(session_id)
        validate_new(cwd, source.mode, source.backend, source.title)
        upto = source.message_count
        runtime = self._runtimes.get(session_id)
        if runtime is not None and runtime.turn_start_index is not None:
            upto = runtime.turn_start_index
        keeps_summary = source.summary_index is not None and source.summary_index < upto
        created = now()
        record = SessionRecord(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=os.path.normpath(cwd),  # noqa: ASYNC240 (pure string operation)
            title=f"{source.title} (fork)"[:200],
            mode=source.mode,
            backend=source.backend,
            status=SessionState.CREATING,
            generation=1,
            created_at=created,
            updated_at=created,
            model=source.model,
            forked_from=session_id,
            lease_owner=self.owner,
            lease_expires=self._expiry(),
            context_from=source.context_from if keeps_summary else 0,
            summary_index=source.summary_index if keeps_summary else None,
        )
        return await self._start(self._store.fork(session_id, record, upto))

    async def forget(self, session_id: str) -> None:
        if session_id in self._runtimes:
            raise RuntimeLive(session_id, "delete")
        record = self._claimable(session_id, "delete")
        if record.status in LIVE_STATES:
            raise RuntimeLive(session_id, "delete")
        self._store.delete(session_id)

    def _live(self, session_id: str, action: str) -> SessionRuntime:
        runtime = self._runtimes.get(session_id)
        if runtime is None or runtime.closed:
            self._store.get(session_id)  # SessionNotFound beats SessionNotLive
            raise SessionNotLive(session_id, action)
        return runtime

    async def prompt(self, session_id: str, text: str, *, origin: str = "acp") -> TurnOutcome:
        self._refuse_if_shutting_down()
        return await self._live(session_id, "prompt").prompt(text, origin=origin)

    def cancel(self, session_id: str) -> bool:
        return self._live(session_id, "cancel").abort()

    async def compact(self, session_id: str, keep_turns: int) -> dict[str, Any]:
        self._refuse_if_shutting_down()
        return await self._live(session_id, "compact").compact(keep_turns)

    def resize(self, session_id: str, rows: int, cols: int) -> dict[str, int]:
        return self._live(session_id, "resize").resize(rows, cols)

    def set_mode(self, session_id: str, mode: Any) -> None:
        if mode not in MODES:
            raise InvalidInput("modeId", f"must be one of {', '.join(MODES)}, got {mode!r}")
        self._live(session_id, "set the mode of").set_mode(mode)

    async def shutdown(self) -> None:
        """Close every live runtime (records kept). Used on stdin EOF, signals, _sidecar/shutdown."""
        self._shutting_down = True
        if self._renewal is not None:
            self._renewal.cancel()
        # Loop: a create or resume already in flight may register one more runtime.
        while ids := list(self._runtimes):
            results = await asyncio.gather(*(self.close(i) for i in ids), return_exceptions=True)
            for session_id, result in zip(ids, results, strict=True):
                if isinstance(result, BaseException):
                    log.error("closing session %s at shutdown failed: %s", session_id, result)
                self._runtimes.pop(session_id, None)

    def _refuse_if_shutting_down(self) -> None:
        if self._shutting_down:
            raise ShuttingDown()

    @staticmethod
    def _state_event(record: SessionRecord) -> Event:
        return Event(
            0,
            STATE,
            {
                "sessionId": record.session_id,
                "status": record.status.value,
                "generation": record.generation,
                "lastError": record.last_error,
            },
        )
