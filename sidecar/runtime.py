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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidecar import events
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.pipe import run_command
from sidecar.agent.backends.pty import Terminal, run_command_pty
from sidecar.agent.loop import begin_turn, run_turn
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
from sidecar.records import SessionRecord, SessionState, check_transition
from sidecar.store.base import SessionStore
from sidecar.summary import build_summary

log = logging.getLogger(__name__)

PROVIDER_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
TRANSCRIPT_PAGE = 1000


@dataclass(frozen=True, slots=True)
class RuntimeDeps:
    store: SessionStore
    make_provider: Callable[[SessionRecord], Provider]
    limits: CommandLimits
    on_event: Callable[[str, Event], None]
    listen: bool = True


def to_provider_message(message: dict[str, Any]) -> dict[str, Any] | None:
    """Transcript row -> Chat Completions message; markers are for people, not the model."""
    if message.get("kind"):
        return None
    return {key: message[key] for key in PROVIDER_KEYS if key in message}


def well_formed(context: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool calls that never got a result (a crash mid-command) so providers accept it."""
    answered = {m.get("tool_call_id") for m in context if m.get("role") == "tool"}
    fixed: list[dict[str, Any]] = []
    for message in context:
        calls = message.get("tool_calls")
        if calls:
            kept = [c for c in calls if c.get("id") in answered]
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            if kept:
                message["tool_calls"] = kept
        fixed.append(message)
    return fixed


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
        self._turn: asyncio.Task[TurnOutcome] | None = None
        self._context: list[dict[str, Any]] | None = None
        self._close_task: asyncio.Task[None] | None = None
        # Transcript length when the running turn began: a fork snapshots up to here.
        self.turn_start_index: int | None = None
        self.superseded = False

    # ---- state -------------------------------------------------------------------------

    def _transition(self, new: SessionState, **changes: Any) -> SessionRecord:
        check_transition(self.session_id, self.status, new)
        try:
            record = self._store.update(
                self.session_id, self.generation, status=new.value, **changes
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
            self._transition(SessionState.ERROR, last_error=f"runtime failed to start: {reason}")
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
                self._transition(SessionState.CLOSED)
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

    # ---- turns ---------------------------------------------------------------------------

    def _start_turn(self, text: str, origin: str) -> asyncio.Task[TurnOutcome]:
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("prompt", "must be non-empty text")
        if self._turn is not None:
            raise SessionBusy(self.session_id)
        if self.status is not SessionState.IDLE:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: a turn starts only from idle"
            )
        started = self._transition(SessionState.RUNNING, interrupted=False)
        self.turn_start_index = started.message_count
        try:
            begin_turn(self, text, origin)
        except Exception:
            self._end_turn_state(SessionState.IDLE)  # the prompt was refused, not lost
            raise
        self._turn = asyncio.create_task(self._run_turn())
        return self._turn

    async def prompt(self, text: str, *, origin: str = "acp") -> TurnOutcome:
        # shield: a caller that goes away (HTTP client hung up) does not cancel the turn.
        return await asyncio.shield(self._start_turn(text, origin))

    async def send(self, message: str) -> TurnOutcome:
        return await self.prompt(message, origin="http")

    def abort(self) -> bool:
        turn = self._turn
        if turn is None or turn.done():
            return False
        turn.cancel()
        return True

    async def _run_turn(self) -> TurnOutcome:
        try:
            outcome = await run_turn(self)
        except asyncio.CancelledError:
            self._end_turn_state(SessionState.IDLE)
            self.events.publish(events.TURN_END, {"stopReason": "cancelled"})
            return TurnOutcome("", "cancelled")
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
        self.events.publish(events.TURN_END, {"stopReason": outcome.stop_reason})
        return outcome

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
        self._store.append_message(self.session_id, self.generation, message)
        if self._context is not None:
            converted = to_provider_message(message)
            if converted is not None:
                self._context.append(converted)

    def provider_context(self) -> list[dict[str, Any]]:
        if self._context is None:
            # Loaded once per generation, on the first model call, not at resume.
            loaded: list[dict[str, Any]] = []
            offset = 0
            while page := self._store.messages(self.session_id, offset, TRANSCRIPT_PAGE):
                loaded.extend(m for m in map(to_provider_message, page) if m is not None)
                offset += len(page)
            self._context = well_formed(loaded)
        return [{"role": "system", "content": system_prompt(self.mode, self.cwd)}, *self._context]

    def publish(self, type_: str, data: dict[str, Any]) -> None:
        self.events.publish(type_, data)

    async def execute(self, command: str, on_output: Callable[[str], None]) -> CommandResult:
        if self.backend == "pty":
            return await run_command_pty(command, self.cwd, self.limits, self.terminal, on_output)
        return await run_command(command, self.cwd, self.limits, on_output)

    def resize(self, rows: int, cols: int) -> dict[str, int]:
        """The terminal size for this session's commands; running PTYs follow at once."""
        for name, value in (("rows", rows), ("cols", cols)):
            if type(value) is not int or not 1 <= value <= 1000:
                raise InvalidInput(name, "must be an integer from 1 to 1000")
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
