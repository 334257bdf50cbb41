"""The stdio JSON-RPC server: read lines, dispatch them, write replies, route the
client's responses to our own requests.

Each request runs in its own task, so a long `session/prompt` never blocks a
`session/cancel` or a `_session/status` behind it. Replies, notifications and our
requests to the client share one ordered writer. A message with `result` or `error`
and no `method` is a response: it goes to the pending request with that id, or is
logged and dropped; it is never answered. Errors are mapped to wire codes once, by
the one table in `sidecar/wire/errors.py`; handlers below this edge only raise
sidecar errors.

Every message takes one path, `_answer`, alone or as an item of a batch: a response
goes to the request of ours it answers; a valid request for a registered method goes to
its handler (named params, or none, or an empty array); anything else is answered here
with the error JSON-RPC 2.0 gives it, word for word as jsonrpcserver gives it (the
dispatcher of record before this one; tests/test_protocol_fuzz_ids.py compares every
case with it): bad JSON is a parse error, an object that breaks the request schema an
invalid request naming what is wrong, an unknown method "Method not found" with the
name as data, positional params "Invalid params". A batch is answered item by item the
same way, as a list, so the single, batch and fast paths cannot disagree. Every answer
carries the message's own id whenever that id can be read (a string, a number or null
in an object), so no readable id ever goes unanswered (a request whose `params` is a
number included, and one too large to read whole whose id comes before its bulk:
`oversized.py`); `null` only when it cannot be read (bad JSON, an id of a wrong type,
a non-object, an empty batch).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import MAX_MESSAGE_BYTES, encode_message
from sidecar.acp.oversized import discard_line
from sidecar.acp.stdio import LineWriter
from sidecar.domain.errors import SidecarError
from sidecar.wire.errors import to_protocol_error

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
# Lines a bulk producer (a replay) lets queue before it waits for the writer.
WRITE_BACKLOG = 64


class ClientError(Exception):
    """The client answered one of our requests with an error (or did not answer)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


def _is_validation_error(exc: Exception) -> bool:
    """A pydantic ValidationError, without importing pydantic: if it is not loaded, no
    handler can have raised one (the start-up path never loads it)."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def protocol_error(exc: Exception) -> ProtocolError:
    if isinstance(exc, ProtocolError):
        return exc
    if _is_validation_error(exc):
        first = exc.errors()[0]  # type: ignore[attr-defined]
        field = ".".join(str(part) for part in first["loc"]) or "params"
        return ProtocolError.invalid_params(field, first["msg"])
    if isinstance(exc, SidecarError):
        return to_protocol_error(exc)
    return ProtocolError.internal()


_REQUEST_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


def _valid_id(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        # NaN, Infinity and 1e999 (which parses as infinity) cannot be echoed as JSON.
        return math.isfinite(value)
    return value is None or kind is str or kind is int


def request_problem(item: Any) -> str | None:
    """What makes `item` something other than a JSON-RPC 2.0 request object, or None.
    Rejects exactly what the request schema rejects, at a fraction of the cost of
    jsonrpcserver's JSON-schema check (which dominates a trivial call)."""
    if type(item) is not dict:
        return "a request must be a JSON object"
    unknown = item.keys() - _REQUEST_KEYS
    if unknown:
        names = ", ".join(sorted(repr(name) for name in unknown)[:5])
        return f"unknown member(s) {names}: a request has only jsonrpc, method, params, id"
    if item.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if type(item.get("method")) is not str:
        return "method must be a string"
    if "params" in item and type(item["params"]) not in (dict, list):
        return "params must be an object or an array"
    if "id" in item and not _valid_id(item["id"]):
        return "id must be a string, a number or null"
    return None


def readable_id(message: Any) -> Any:
    """The id to answer `message` with: its own when it can be read (a string, a finite
    number or null in an object), else null (JSON-RPC 2.0: null only when the id
    cannot be detected)."""
    if type(message) is dict:
        value = message.get("id")
        if _valid_id(value):
            return value
    return None


def _error_reply(request_id: Any, error: ProtocolError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": error.to_error_object(), "id": request_id}


def _invalid_request(problem: str) -> ProtocolError:
    # jsonrpcserver's message; the reason says what is wrong with this one.
    return ProtocolError(ErrorCode.INVALID_REQUEST, "Invalid request", problem)


def _is_response(message: Any) -> bool:
    """A result or an error and no method: a response (even one without an id, as an
    answer to a notification would be), never something to answer."""
    return (
        type(message) is dict
        and "method" not in message
        and ("result" in message or "error" in message)
    )


# A handler's outcome: (result, None) or (None, (code, message, data)); data is NO_DATA
# when the error carries none (jsonrpcserver then leaves "data" out).
NO_DATA: Any = object()
Outcome = tuple[Any, "tuple[int, str, Any] | None"]


async def call_handler(handler: Handler, params: dict[str, Any]) -> Outcome:
    """Run one handler; every failure becomes its wire error here, once."""
    try:
        result = await handler(params)
    except asyncio.CancelledError:
        raise
    except (ProtocolError, SidecarError) as exc:
        error = protocol_error(exc)
        return None, (error.code, error.message, error.data)
    except UnicodeEncodeError:
        # JSON may carry lone surrogates ("\\ud800"); paths, ids and SQLite text cannot.
        # Raised before anything is written, so nothing changed.
        error = ProtocolError.invalid_params(
            "params", "text must be valid Unicode (no lone surrogates)"
        )
        return None, (error.code, error.message, error.data)
    except Exception as exc:
        if _is_validation_error(exc):
            error = protocol_error(exc)
            return None, (error.code, error.message, error.data)
        log.exception("internal error in %s", getattr(handler, "__name__", "handler"))
        error = ProtocolError.internal()
        return None, (error.code, error.message, NO_DATA)
    return ({} if result is None else result), None


_NOT_FOUND = "Method not found"
_POSITIONAL = ProtocolError(
    ErrorCode.INVALID_PARAMS, "Invalid params", "too many positional arguments"
)


def _route(request: dict[str, Any], handlers: dict[str, Handler]) -> Handler | ProtocolError:
    """The handler of a valid request object, or the error it is answered with."""
    handler = handlers.get(request["method"])
    if handler is None:
        return ProtocolError(ErrorCode.METHOD_NOT_FOUND, _NOT_FOUND, request["method"])
    params = request.get("params")
    if type(params) is list and params:
        return _POSITIONAL
    return handler


class RpcServer:
    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._handlers: dict[str, Handler] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Any]] = {}

    def register(self, name: str, handler: Handler) -> None:
        self._handlers[name] = handler

    def in_flight(self) -> int:
        """Requests dispatched and not yet answered."""
        return sum(not task.done() for task in self._tasks)

    async def writer_drained(self, backlog: int = WRITE_BACKLOG) -> None:
        await self._writer.below(backlog)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._writer.send(encode_message({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """A request to the client; returns its result or raises ClientError. Waits as long
        as the client takes (cancel the awaiting task to give up)."""
        request_id = f"sidecar-{next(self._ids)}"  # never equal to an id the client uses
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._writer.send(
                encode_message(
                    {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                )
            )
            return await future
        finally:
            self._pending.pop(request_id, None)

    def _take_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        future = self._pending.get(request_id) if type(request_id) is str else None
        if future is None or future.done():
            log.warning(
                "dropped a response to no request of ours (id %r): %.200s",
                message.get("id"),
                json.dumps(message.get("error") or "result"),
            )
            return
        error = message.get("error")
        if error is None:
            future.set_result(message.get("result"))
            return
        if not isinstance(error, dict):
            error = {"code": ErrorCode.INTERNAL_ERROR, "message": f"malformed error: {error!r}"}
        code = error.get("code")
        future.set_exception(
            ClientError(
                code if type(code) is int else ErrorCode.INTERNAL_ERROR,
                str(error.get("message") or "error without a message"),
                error.get("data"),
            )
        )

    async def serve(self, reader: asyncio.StreamReader, stop: asyncio.Event) -> None:
        """Read until EOF or `stop`; each line is dispatched in its own task."""
        reading = asyncio.create_task(self._read_lines(reader))
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reading, stopping):
                task.cancel()
            await asyncio.gather(reading, stopping, return_exceptions=True)
            gone = ClientError(ErrorCode.INTERNAL_ERROR, "the client went away")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(gone)

    async def _read_lines(self, reader: asyncio.StreamReader) -> None:
        # One long-lived loop: no per-line futures on the hot path.
        while (line := await self._read_line(reader)) is not None:
            if line.strip():
                task = asyncio.create_task(self._handle(line))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _read_line(self, reader: asyncio.StreamReader) -> bytes | None:
        while True:
            try:
                return await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                return exc.partial or None  # EOF (a last line without newline still counts)
            except asyncio.LimitOverrunError as exc:
                members = await discard_line(reader, exc.consumed)
                # Answered by its id when its start shows a request's (never a response's:
                # that id is ours); null otherwise.
                request_id = readable_id(members) if "method" in members else None
                self._reply_error(
                    request_id,
                    ProtocolError(
                        ErrorCode.INVALID_REQUEST,
                        f"message larger than {MAX_MESSAGE_BYTES} bytes; discarded",
                    ),
                )

    def _reply_error(self, request_id: Any, error: ProtocolError) -> None:
        self._writer.send(
            encode_message({"jsonrpc": "2.0", "error": error.to_error_object(), "id": request_id})
        )

    async def _handle(self, line: bytes) -> None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self._reply_error(None, ProtocolError(ErrorCode.PARSE_ERROR, "Parse error: not UTF-8"))
            return
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError) as exc:
            # jsonrpcserver's parse error, word for word (its message, the reason as data).
            self._reply_error(None, ProtocolError(ErrorCode.PARSE_ERROR, "Parse error", str(exc)))
            return
        if type(parsed) is list:
            reply: Any = await self._answer_batch(parsed)
        else:
            reply = await self._answer(parsed)
        if reply is None:
            return
        try:
            data = encode_message(reply)
        except ValueError:  # a result that is not JSON (NaN): nothing non-JSON goes out
            log.exception("a reply that JSON cannot carry")
            data = encode_message(_error_reply(readable_id(parsed), ProtocolError.internal()))
        self._writer.send(data)

    async def _answer_batch(self, items: list[Any]) -> list[dict[str, Any]] | dict[str, Any] | None:
        """Each item answered as if it came alone (concurrently, as jsonrpcserver runs a
        batch), the answers in the batch's order; None when all were notifications or
        responses."""
        if not items:
            return _error_reply(None, _invalid_request("an empty batch"))
        answers = await asyncio.gather(*(self._answer(item) for item in items))
        replies = [answer for answer in answers if answer is not None]
        return replies or None

    async def _answer(self, item: Any) -> dict[str, Any] | None:
        """The reply to one message (None: a notification, or a response of the client's)."""
        try:
            if _is_response(item):
                self._take_response(item)
                return None
            problem = request_problem(item)
            if problem is not None:
                return _error_reply(readable_id(item), _invalid_request(problem))
            routed = _route(item, self._handlers)
            result: Any
            error: tuple[int, str, Any] | None
            if isinstance(routed, ProtocolError):
                result, error = None, (routed.code, routed.message, routed.data)
            else:
                params = item.get("params")
                result, error = await call_handler(routed, params if type(params) is dict else {})
            if "id" not in item:
                return None  # a notification: never answered
            if error is None:
                return {"jsonrpc": "2.0", "result": result, "id": item["id"]}
            code, message, data = error
            body = {"code": code, "message": message}
            if data is not NO_DATA:
                body["data"] = data
            return {"jsonrpc": "2.0", "error": body, "id": item["id"]}
        except Exception:
            log.exception("dispatch failed")
            if request_problem(item) is None and "id" not in item:
                return None  # a notification still gets no answer
            return _error_reply(readable_id(item), ProtocolError.internal())

    async def drain(self, timeout: float) -> None:
        """Wait for in-flight requests to answer; cancel what is still running after `timeout`."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
