"""One runtime generation of one session: everything disposable lives here.

A `SessionRuntime` owns its listener, token, turn task, provider client and the
process groups its commands start. It is built for one generation and never
revived: resume makes a new one. Every write it makes goes through the store
with its generation, so a superseded or closed runtime cannot change the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sidecar import events
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.pipe import run_command
from sidecar.agent.backends.pty import Terminal, run_command_pty
from sidecar.agent.context import COMPACTION_PROMPT, ProviderContext
from sidecar.agent.loop import run_turn, user_message
from sidecar.agent.providers.base import Provider
from sidecar.agent.tools import system_prompt
from sidecar.agent.turn import TurnOutcome
from sidecar.errors import (
    InvalidInput,
    InvalidState,
    ProviderError,
    RuntimeFailed,
    SessionBusy,
    StaleGeneration,
    StoreError,
)
from sidecar.events import Event, EventStream
from sidecar.http import Listener, start_listener
from sidecar.records import SessionRecord, SessionState, check_transition, iso, now
from sidecar.store.base import SessionStore
from sidecar.summary import build_summary

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RuntimeDeps:
    store: SessionStore
    make_provider: Callable[[SessionRecord], Provider]
    limits: CommandLimits
    on_event: Callable[[str, Event], None]
    context_budget: int = 0  # characters of provider context before compaction; 0: never
    listen: bool = True


class SessionRuntime:
    def __init__(self, record: SessionRecord, deps: RuntimeDeps) -> None:
        self.session_id = record.session_id
        self.generation = record.generation
        self.cwd = record.cwd
        self.mode = record.mode
        self.backend = record.backend
        self.status = record.status
        self.limits = deps.limits
        self.terminal = Terminal()  # fresh per generation: PTY descriptors are never persisted
        self.token = secrets.token_urlsafe(32)
        self.events = EventStream()
        self.events.add_sink(lambda event: deps.on_event(self.session_id, event))
        self.listener: Listener | None = None
        self._provider: Provider | None = None
        self._record = record
        self._deps = deps
        self._store = deps.store
        self._turn: asyncio.Task[Any] | None = None
        self._context: ProviderContext | None = None
        self._close_task: asyncio.Task[None] | None = None
        # Transcript length when the running turn began: a fork snapshots up to here.
        self.turn_start_index: int | None = None
        self.superseded = False

    # ---- state -------------------------------------------------------------------------

    def _transition(
        self, new: SessionState, *, append: dict[str, Any] | None = None, **changes: Any
    ) -> SessionRecord:
        check_transition(self.session_id, self.status, new)
        try:
            record = self._store.update(
                self.session_id, self.generation, status=new.value, append=append, **changes
            )
        except StaleGeneration:
            self.superseded = True
            raise
        self.status = new
        self.events.publish(
            events.STATE,
            {
                "sessionId": self.session_id,
                "status": new.value,
                "generation": self.generation,
                "lastError": record.last_error,
            },
        )
        return record

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            raise InvalidState(f"session {self.session_id}: runtime not started")
        return self._provider

    @property
    def url(self) -> str | None:
        return self.listener.url if self.listener else None

    @property
    def closed(self) -> bool:
        return self._close_task is not None

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """creating -> idle, or -> error with last_error if a resource cannot be had."""
        try:
            self._provider = self._deps.make_provider(self._record)
            if self._deps.listen:
                self.listener = await start_listener(self, self.token)
        except Exception as exc:
            log.warning("session %s: runtime failed to start: %s", self.session_id, exc)
            await self._release()
            reason = str(exc) or type(exc).__name__
            self._transition(
                SessionState.ERROR,
                last_error=f"runtime failed to start: {reason}",
                lease_owner=None,
                lease_expires=None,
            )
            raise RuntimeFailed(self.session_id, reason) from exc
        if self.closed:
            # Closed while the listener was being opened: close owns the state; free what
            # arrived after it released everything.
            await self._release()
            raise InvalidState(f"session {self.session_id} was closed while starting")
        self._transition(SessionState.IDLE)

    async def close(self) -> None:
        """Cancel the turn, release everything, then write closed. Idempotent."""
        if self._close_task is None:
            self._close_task = asyncio.create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        """Staged: closing is written first, the runtime's resources are released whatever
        happens (even if the store cannot be written), and closed is written last."""
        writable = not self.superseded
        failure: StoreError | None = None
        if writable:
            try:
                self._transition(SessionState.CLOSING)
            except StaleGeneration:
                writable = False
            except StoreError as exc:
                failure = exc
        try:
            turn = self._turn
            if turn is not None and not turn.done():
                turn.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await turn
        finally:
            await self._release()
            self.events.close()
        if writable and failure is None:
            try:
                self._transition(SessionState.CLOSED, lease_owner=None, lease_expires=None)
            except StaleGeneration:
                pass
            except StoreError as exc:
                failure = exc
        if failure is not None:
            log.error(
                "session %s: released, but the store refused the write: %s",
                self.session_id,
                failure,
            )
            raise failure

    async def _release(self) -> None:
        provider, self._provider = self._provider, None
        try:
            if provider is not None:
                await provider.aclose()
        except Exception:
            log.exception("session %s: closing the provider client failed", self.session_id)
        listener, self.listener = self.listener, None
        if listener is not None:
            await listener.stop()  # last: the endpoint answers until the runtime is gone

    # ---- turns (and compactions: they hold the same lock) -----------------------------------

    def _claim(self, message: dict[str, Any] | None = None) -> None:
        """The turn lock: refuse unless idle with nothing running, then go running. A turn's
        user message is written in the same transaction as `running`: a crash can never
        leave one without the other, and nobody is told `running` before it is stored."""
        if self._turn is not None:
            raise SessionBusy(self.session_id)
        if self.status is not SessionState.IDLE:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: a turn starts only from idle"
            )
        if message is None:  # a compaction: not a turn, the interrupted flag stays
            started = self._transition(SessionState.RUNNING)
            self.turn_start_index = started.message_count
            return
        started = self._transition(SessionState.RUNNING, append=message, interrupted=False)
        self.turn_start_index = started.message_count - 1
        if self._context is not None:
            self._context.append(self.turn_start_index, message)

    def _start_turn(self, text: str, origin: str) -> asyncio.Task[TurnOutcome]:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("prompt", "must be non-empty text")
        self._claim(user_message(text))
        self.events.publish(events.USER_MESSAGE, {"text": text, "origin": origin})
        task = asyncio.create_task(self._exclusive(run_turn(self), TurnOutcome("", "cancelled")))
        self._turn = task
        return task

    async def prompt(self, text: str, *, origin: str = "acp") -> TurnOutcome:
        # shield: a caller that goes away (HTTP client hung up) does not cancel the turn.
        return await asyncio.shield(self._start_turn(text, origin))

    async def send(self, message: str) -> TurnOutcome:
        return await self.prompt(message, origin="http")

    async def compact(self, keep_turns: int) -> dict[str, Any]:
        """`_session/compact`: summarize all but the last `keep_turns` turns, under the lock."""
        if type(keep_turns) is not int or keep_turns < 0:
            raise InvalidInput("keepTurns", "must be an integer >= 0")
        self._claim()
        cancelled = {"compacted": False, "cancelled": True}
        task = asyncio.create_task(self._exclusive(self._compact(keep_turns), cancelled))
        self._turn = task
        return await asyncio.shield(task)

    def abort(self) -> bool:
        turn = self._turn
        if turn is None or turn.done():
            return False
        turn.cancel()
        return True

    async def _exclusive(self, work: Coroutine[Any, Any, T], on_cancel: T) -> T:
        """Run a turn or a compaction; leave the session idle, or in error with the reason."""
        try:
            result = await work
        except asyncio.CancelledError:
            self._end_turn_state(SessionState.IDLE)
            self.events.publish(events.TURN_END, {"stopReason": "cancelled"})
            return on_cancel
        except ProviderError as exc:
            self._end_turn_state(SessionState.ERROR, last_error=str(exc))
            self.events.publish(events.TURN_END, {"stopReason": "error", "error": str(exc)})
            raise
        except StaleGeneration:
            log.warning("session %s: generation %s superseded", self.session_id, self.generation)
            raise
        except Exception as exc:
            log.exception("session %s: turn failed", self.session_id)
            self._end_turn_state(SessionState.ERROR, last_error=f"internal error: {exc}")
            raise
        finally:
            self._turn = None
            self.turn_start_index = None
        self._end_turn_state(SessionState.IDLE)
        stop = result.stop_reason if isinstance(result, TurnOutcome) else "end_turn"
        self.events.publish(events.TURN_END, {"stopReason": stop})
        return result

    async def _compact(self, keep_turns: int) -> dict[str, Any]:
        context = self._ensure_context()
        keep_from = context.split_point(keep_turns)
        if keep_from is None:
            return {"compacted": False, "reason": "nothing older than the turns kept"}
        reply = await self.provider.complete(
            [
                {"role": "system", "content": COMPACTION_PROMPT},
                {"role": "user", "content": context.render_before(keep_from)},
            ],
            [],
            lambda _delta: None,
        )
        summary = reply.text.strip() or "(the provider returned an empty summary)"
        marker = {
            "role": "system",
            "kind": "compaction",
            "content": summary,
            "contextFrom": keep_from,
            "createdAt": iso(now()),
        }
        index = self._store.append_message(self.session_id, self.generation, marker)
        self._store.update(
            self.session_id, self.generation, context_from=keep_from, summary_index=index
        )
        context.compact(summary, keep_from)
        result = {
            "compacted": True,
            "summaryIndex": index,
            "contextFrom": keep_from,
            "contextChars": context.chars,
        }
        self.events.publish(events.COMPACTION, result)
        return result

    def _end_turn_state(self, new: SessionState, **changes: Any) -> None:
        # While closing, close owns the state; a superseded runtime writes nothing.
        if self.status is SessionState.RUNNING and not self.closed and not self.superseded:
            try:
                self._transition(new, **changes)
            except StaleGeneration:
                pass
            except StoreError:
                # The record cannot follow; the runtime still must not take turns it cannot
                # record. Close releases it (and reports the store error).
                log.exception("session %s: cannot record the end of a turn", self.session_id)
                self.status = SessionState.ERROR

    def set_mode(self, mode: str) -> None:
        if self.status is not SessionState.IDLE:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: the mode changes only while idle"
            )
        self._store.update(self.session_id, self.generation, mode=mode)
        self.mode = mode
        self.events.publish(events.MODE, {"modeId": mode})

    # ---- TurnHost ------------------------------------------------------------------------

    def record_message(self, message: dict[str, Any]) -> None:
        index = self._store.append_message(self.session_id, self.generation, message)
        if self._context is not None:
            self._context.append(index, message)

    def _ensure_context(self) -> ProviderContext:
        if self._context is None:
            # Loaded once per generation, on the first model call, not at resume.
            self._context = ProviderContext.load(self._store, self._store.get(self.session_id))
        return self._context

    def provider_context(self) -> list[dict[str, Any]]:
        return self._ensure_context().messages(system_prompt(self.mode, self.cwd))

    async def before_model_call(self) -> None:
        """Automatic compaction: keep what the provider is sent within the budget."""
        budget = self._deps.context_budget
        if budget and self._ensure_context().chars > budget:
            await self._compact(keep_turns=1)

    def publish(self, type_: str, data: dict[str, Any]) -> None:
        self.events.publish(type_, data)

    async def execute(self, command: str, on_output: Callable[[str], None]) -> CommandResult:
        if self.backend == "pty":
            return await run_command_pty(command, self.cwd, self.limits, self.terminal, on_output)
        return await run_command(command, self.cwd, self.limits, on_output)

    def resize(self, rows: Any, cols: Any) -> dict[str, int]:
        """The terminal size for this session's commands; running PTYs follow at once."""
        checked: list[int] = []
        for name, value in (("rows", rows), ("cols", cols)):
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # JSON has one number type: 24.0 is the integer 24
            if type(value) is not int or not 1 <= value <= 1000:
                raise InvalidInput(name, "must be an integer from 1 to 1000")
            checked.append(value)
        rows, cols = checked
        self.terminal.resize(rows, cols)
        return {"rows": rows, "cols": cols}

    # ---- ListenerTarget ------------------------------------------------------------------

    def summary(self, *, include_token: bool) -> dict[str, Any]:
        record = self._store.get(self.session_id)
        live = not self.closed
        return build_summary(
            record, live=live, url=self.url, token=self.token, include_token=include_token
        )

    def messages(self, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        total = self._store.get(self.session_id).message_count
        return self._store.messages(self.session_id, offset, limit), total
