"""The per-session HTTP listener: the ACP-like boundary other local tools call.

Loopback is not a trust boundary: any local process and any web page can reach
127.0.0.1. So every request must name our port in `Host` (DNS rebinding), carry
no `Origin` (browsers always send one on cross-site fetches) and present the
runtime's bearer token; bodies are capped. Only then does routing happen.

The listener owns no session logic: it parses requests with the same `protocol/`
models as stdio, calls the runtime's `SessionEndpoint` (the manager's per-session
view, so shutdown, busy and liveness rules are the manager's), and maps sidecar
exceptions to statuses through the one error table (`sidecar/wire/errors.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import socket
from collections.abc import AsyncIterator
from typing import Any, Final

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from pydantic import ValidationError

from protocol.models import PermissionAnswerBody, ResizeBody, SendBody
from sidecar.core.endpoint import SessionEndpoint
from sidecar.core.events import Event, Subscription
from sidecar.domain import errors
from sidecar.domain.permissions import Choice
from sidecar.domain.records import iso
from sidecar.http.binding import bind_listener
from sidecar.http.errorlog import request_error_logger
from sidecar.http.sockets import KEEPALIVE_TIMEOUT, MAX_CONNECTIONS, CappedSockSite
from sidecar.wire import errors as wire_errors
from sidecar.wire import transcript as wire_transcript
from sidecar.wire.changes import changes_body
from sidecar.wire.events import sse_event
from sidecar.wire.summary import summary

log = logging.getLogger(__name__)

_CHALLENGE: Final[dict[str, str]] = {"WWW-Authenticate": "Bearer"}
_SSE_HEADERS: Final = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
PING_INTERVAL: Final = 15.0
# Bounds how long stop() waits for a handler that is still reading a slow body;
# our own long handlers (send, SSE) end themselves as soon as stop() begins.
_SHUTDOWN_TIMEOUT: Final = 0.1
_MAX_LIMIT: Final = 1000
_INT_RE: Final = re.compile(r"-?[0-9]{1,18}")


def status_for(exc: BaseException) -> int | None:
    """The status for a sidecar exception, or None for an unexpected one."""
    found = wire_errors.lookup(exc)
    return None if found is None else found.http_status


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def _int_param(request: web.Request, name: str, default: int, low: int, high: int | None) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not _INT_RE.fullmatch(raw):
        raise errors.InvalidInput(name, f"must be an integer, got {raw[:40]!r}")
    value = int(raw)
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise errors.InvalidInput(name, f"must be {bounds}, got {value}")
    return value


def _json_object(body: bytes, example: str) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise errors.InvalidInput("body", f"not valid JSON ({exc})") from exc
    except RecursionError:
        raise errors.InvalidInput("body", "JSON nested too deeply") from None
    if not isinstance(payload, dict):
        raise errors.InvalidInput("body", f"must be a JSON object like {example}")
    return payload


def _invalid(exc: ValidationError) -> errors.InvalidInput:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "body"
    return errors.InvalidInput(field, first["msg"])


def _parse_send(body: bytes) -> str:
    try:
        return SendBody.model_validate(_json_object(body, '{"message": "..."}')).message
    except ValidationError as exc:
        raise _invalid(exc) from None


def _parse_answer(body: bytes) -> PermissionAnswerBody:
    try:
        return PermissionAnswerBody.model_validate(
            _json_object(body, '{"toolCallId": "...", "optionId": "allow_once"}')
        )
    except ValidationError as exc:
        raise _invalid(exc) from None


def _parse_resize(body: bytes) -> ResizeBody:
    try:
        return ResizeBody.model_validate(_json_object(body, '{"rows": 24, "cols": 80}'))
    except ValidationError as exc:
        raise _invalid(exc) from None


async def _next_event(iterator: AsyncIterator[Event]) -> Event | None:
    try:
        return await anext(iterator)
    except StopAsyncIteration:
        return None


def _consume_result(task: asyncio.Future[Any]) -> None:
    # A turn that outlives its HTTP request still reports through the runtime;
    # retrieving the exception here only keeps asyncio from warning about it.
    if not task.cancelled():
        task.exception()


class Listener:
    """One runtime's listener. Create it with `start_listener`."""

    def __init__(self, target: SessionEndpoint, token: str, sock: socket.socket, max_body: int):
        self.port: int = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._target = target
        self._token = token.encode()
        self._sock = sock
        self._max_body = max_body
        self._hosts = frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})
        self._stopping: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._stop_task: asyncio.Task[None] | None = None
        self.app = web.Application(
            client_max_size=max_body, middlewares=[self._errors, self._guard]
        )
        self.app.router.add_post("/agent/send", self._send)
        self.app.router.add_get("/agent/status", self._status, allow_head=False)
        self.app.router.add_post("/agent/abort", self._abort)
        self.app.router.add_get("/agent/messages", self._messages, allow_head=False)
        self.app.router.add_get("/agent/changes", self._changes, allow_head=False)
        self.app.router.add_get("/agent/events", self._events, allow_head=False)
        self.app.router.add_post("/agent/resize", self._resize)
        self.app.router.add_get("/agent/permissions", self._permissions, allow_head=False)
        self.app.router.add_post("/agent/permissions", self._answer)
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            shutdown_timeout=_SHUTDOWN_TIMEOUT,
            keepalive_timeout=KEEPALIVE_TIMEOUT,
            logger=request_error_logger(),  # nothing of a malformed request reaches a log
        )
        self._site: CappedSockSite | None = None

    async def start(self) -> None:
        """Serve the socket (aiohttp's runner and the capped site)."""
        await self._runner.setup()
        try:
            self._site = CappedSockSite(self._runner, self._sock, MAX_CONNECTIONS)
            await self._site.start()
        except BaseException:
            await self._runner.cleanup()
            raise

    async def stop(self) -> None:
        """End SSE streams and pending sends, then close the socket. Idempotent."""
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._stop_task)

    async def _shutdown(self) -> None:
        if not self._stopping.done():
            self._stopping.set_result(None)
        await self._runner.cleanup()
        self._sock.close()  # already closed by the server; this covers a failed start

    # -- middlewares: errors outermost, then the guard, then routing ------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every failure becomes JSON `{"error": ...}`; internals never leak."""
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except web.HTTPException as exc:
            return self._http_error(request, exc)
        except Exception as exc:
            status = status_for(exc)
            if status is None:
                log.exception("session %s: %s failed", self._target.session_id, request.path)
                return _error(500, "internal error")
            return _error(status, str(exc))

    def _http_error(self, request: web.Request, exc: web.HTTPException) -> web.Response:
        # aiohttp's own refusals (no route, wrong method, body too large) as JSON.
        headers: dict[str, str] = {}
        if isinstance(exc, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(exc.allowed_methods))
            headers["Allow"] = allowed
            message = f"method {request.method} not allowed on {request.path}; use {allowed}"
        elif isinstance(exc, web.HTTPNotFound):
            message = f"no such endpoint: {request.method} {request.path}"
        elif isinstance(exc, web.HTTPRequestEntityTooLarge):
            message = f"request body too large: the limit is {self._max_body} bytes"
        else:
            message = exc.reason
        return _error(exc.status, message, headers)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Host and Origin first (cheap, no secret involved), then the token."""
        if self._stopping.done():
            return _error(503, "listener is stopping")
        hosts = request.headers.getall(hdrs.HOST, [])
        if len(hosts) != 1 or hosts[0].lower() not in self._hosts:
            expected = f"127.0.0.1:{self.port} or localhost:{self.port}"
            return _error(403, f"Host header refused: expected {expected}")
        if hdrs.ORIGIN in request.headers:
            return _error(403, "requests with an Origin header are refused (no browser access)")
        auth = request.headers.getall(hdrs.AUTHORIZATION, [])
        if not auth:
            return _error(401, "missing Authorization: Bearer <token> header", _CHALLENGE)
        scheme, _, credential = auth[0].partition(" ")
        if (
            len(auth) != 1
            or scheme.lower() != "bearer"
            or not hmac.compare_digest(credential.strip().encode("utf-8", "replace"), self._token)
        ):
            return _error(401, "invalid bearer token", _CHALLENGE)
        length = request.content_length
        if length is not None and length > self._max_body:
            return _error(413, f"request body too large: the limit is {self._max_body} bytes")
        # An authenticated request in progress is never evicted to make room (sockets.py).
        site = self._site
        if site is not None:
            site.begin_request(request.protocol)
        try:
            response: web.StreamResponse = await handler(request)
        finally:
            if site is not None:
                site.end_request(request.protocol)
        return response

    # -- handlers ---------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.Response:
        """Run one turn. The turn is its own task: a dropped connection or a
        stopping listener must not cancel it half-way; cancelling is abort()'s job."""
        message = _parse_send(await request.read())
        # Started synchronously: an abort that arrives right behind this finds the turn.
        turn = self._target.start_send(message)
        turn.add_done_callback(_consume_result)
        await asyncio.wait({turn, self._stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not turn.done():
            return _error(503, "listener stopped; the turn continues in the session")
        outcome = turn.result()
        return web.json_response(
            {"response": outcome.response, "stopReason": outcome.stop_reason.value}
        )

    async def _status(self, request: web.Request) -> web.Response:
        return web.json_response(summary(await self._target.view()))

    async def _abort(self, request: web.Request) -> web.Response:
        running = await self._target.abort()
        return web.json_response({"status": "abort_requested", "running": running})

    async def _resize(self, request: web.Request) -> web.Response:
        size = _parse_resize(await request.read())
        applied = await self._target.resize(size.rows, size.cols)
        return web.json_response({"rows": applied.rows, "cols": applied.cols})

    async def _permissions(self, request: web.Request) -> web.Response:
        """The calls waiting for consent; answerable with POST (the first answer wins)."""
        pending = await self._target.pending()
        return web.json_response(
            {
                "pending": [
                    {
                        "toolCallId": waiting.request.call_id,
                        "title": waiting.request.title,
                        "kind": waiting.request.kind.value,
                        "rawInput": dict(waiting.request.raw_input),
                        "since": iso(waiting.since),
                        "options": [choice.value for choice in Choice],
                    }
                    for waiting in pending
                ]
            }
        )

    async def _answer(self, request: web.Request) -> web.Response:
        body = _parse_answer(await request.read())
        await self._target.answer(body.tool_call_id, body.option_id)
        return web.json_response({"answered": True})

    async def _messages(self, request: web.Request) -> web.Response:
        offset = _int_param(request, "offset", 0, 0, None)
        limit = _int_param(request, "limit", 100, 1, _MAX_LIMIT)
        entries, total = await self._target.messages(offset, limit)
        return web.json_response(wire_transcript.page(entries, total))

    async def _changes(self, request: web.Request) -> web.Response:
        """What a turn changed (default: the last), as `_session/changes` answers: files,
        the diff, each file's hunks with their ids. A turn the session does not have
        (yet) is a resource that is not there: 404."""
        turns = (await self._target.view()).record.turns
        turn = _int_param(request, "turn", turns, 1, None)
        if turns == 0:
            return _error(404, "the session has no turns yet")
        if turn > turns:
            return _error(404, f"no turn {turn}: the session has {turns} turn(s)")
        found = await self._target.changes(turn)
        return web.json_response(changes_body(found, with_diff=True))

    def _sse_frame(self, event: Event) -> bytes:
        name, data = sse_event(event.body, self._target.view_of)
        line = json.dumps(data, separators=(",", ":"))  # one line: newlines are escaped
        return f"id: {event.id}\nevent: {name}\ndata: {line}\n\n".encode()

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """SSE: the replay after Last-Event-ID (if any), then live events."""
        last_id = self._last_event_id(request)
        # Subscribe before sending headers: nothing published meanwhile is lost.
        subscription = self._target.events.subscribe(last_id)
        iterator = aiter(subscription)
        pending: asyncio.Future[Event | None] | None = None
        response = web.StreamResponse(headers=_SSE_HEADERS)
        try:
            await response.prepare(request)
            while not self._stopping.done():
                if pending is None:
                    pending = asyncio.ensure_future(_next_event(iterator))
                done, _ = await asyncio.wait(
                    {pending, self._stopping},
                    timeout=PING_INTERVAL,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if self._stopping.done():
                    await self._flush_queued(response, pending, subscription)
                    pending = None
                    break
                if pending not in done:
                    await response.write(b": ping\n\n")
                    continue
                event = pending.result()
                pending = None
                if event is None:  # the EventStream closed, or we fell too far behind
                    break
                await response.write(self._sse_frame(event))
        except ConnectionError:
            log.debug("session %s: SSE client went away", self._target.session_id)
        finally:
            subscription.close()
            if pending is not None:
                pending.cancel()
        return response

    async def _flush_queued(
        self,
        response: web.StreamResponse,
        pending: asyncio.Future[Event | None] | None,
        subscription: Subscription,
    ) -> None:
        """On stop, deliver what was already published (e.g. the `closing` state), briefly."""
        queued: list[Event] = []
        if pending is not None and pending.done() and pending.result() is not None:
            queued.append(pending.result())  # type: ignore[arg-type]
        elif pending is not None:
            pending.cancel()
        queued.extend(subscription.drain_nowait())
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(_SHUTDOWN_TIMEOUT):
                for event in queued:
                    await response.write(self._sse_frame(event))

    @staticmethod
    def _last_event_id(request: web.Request) -> int | None:
        raw = request.headers.get("Last-Event-ID") or request.query.get("lastEventId")
        if not raw:
            return None
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            raise errors.InvalidInput("Last-Event-ID", "must be a non-negative integer event id")
        return int(raw)


async def start_listener(
    target: SessionEndpoint, token: str, *, max_body: int = 1024 * 1024
) -> Listener | None:
    """Serve `target` on 127.0.0.1:<free port>, or None where binding is not allowed."""
    sock = bind_listener(target.session_id, token, max_body)
    if sock is None:
        return None
    try:
        listener = Listener(target, token, sock, max_body)
        await listener.start()
    except BaseException:
        sock.close()
        raise
    return listener
