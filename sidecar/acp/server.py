"""The stdio JSON-RPC server: read lines, dispatch with jsonrpcserver, write replies,
route the client's responses to our own requests.

Each request runs in its own task, so a long `session/prompt` never blocks a
`session/cancel` or a `_session/status` behind it. Replies, notifications and our
requests to the client share one ordered writer. A message with `result` or `error`
and no `method` is a response: it goes to the pending request with that id, or is
logged and dropped; it is never answered. Errors are mapped to wire codes once, by
the one table in `sidecar/wire/errors.py`; handlers below this edge only raise
sidecar errors.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from jsonrpcserver import Error, Success, async_dispatch
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request, to_response
from jsonrpcserver.request import Request
from jsonrpcserver.response import to_serializable
from jsonrpcserver.sentinels import NOID
from pydantic import ValidationError

from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import MAX_MESSAGE_BYTES, encode_message
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


def protocol_error(exc: Exception) -> ProtocolError:
    if isinstance(exc, ProtocolError):
        return exc
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
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


def validate_request(request: Any) -> Any:
    """Reject exactly what the JSON-RPC 2.0 request schema rejects, at a fraction of the cost
    of jsonrpcserver's default JSON-schema check (which dominates a trivial call)."""
    items = request if isinstance(request, list) else [request]
    if isinstance(request, list) and not request:
        raise ValueError("empty batch")
    for item in items:
        if type(item) is not dict or item.keys() - _REQUEST_KEYS:
            raise ValueError("not a request object")
        if item.get("jsonrpc") != "2.0" or type(item.get("method")) is not str:
            raise ValueError("bad jsonrpc or method")
        if "params" in item and type(item["params"]) not in (dict, list):
            raise ValueError("params must be structured")
        if "id" in item and not _valid_id(item["id"]):
            raise ValueError("bad id")
    return request


def _serialize(response: Any) -> str:
    return json.dumps(response, allow_nan=False)


def _is_response(message: Any) -> bool:
    """A result or an error and no method: a response (even one without an id, as an
    answer to a notification would be), never something to answer."""
    return (
        type(message) is dict
        and "method" not in message
        and ("result" in message or "error" in message)
    )


def wrap(handler: Handler) -> Callable[..., Awaitable[Any]]:
    """Adapt a `handler(params)` to jsonrpcserver: named params only, errors mapped here."""

    async def method(_context: object, **params: Any) -> Any:
        try:
            result = await handler(params)
        except asyncio.CancelledError:
            raise
        except (ProtocolError, ValidationError, SidecarError) as exc:
            error = protocol_error(exc)
            return Error(error.code, error.message, error.data)
        except UnicodeEncodeError:
            # JSON may carry lone surrogates ("\\ud800"); paths, ids and SQLite text cannot.
            # Raised before anything is written, so nothing changed.
            error = ProtocolError.invalid_params(
                "params", "text must be valid Unicode (no lone surrogates)"
            )
            return Error(error.code, error.message, error.data)
        except Exception:
            log.exception("internal error in %s", getattr(handler, "__name__", "handler"))
            error = ProtocolError.internal()
            return Error(error.code, error.message)
        return Success({} if result is None else result)

    # jsonrpcserver binds params against inspect.signature() on every call; a precomputed
    # __signature__ makes that lookup immediate.
    method.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return method


class RpcServer:
    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._methods: dict[str, Callable[..., Awaitable[Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Any]] = {}

    def register(self, name: str, handler: Handler) -> None:
        self._methods[name] = wrap(handler)

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
                await self._discard_oversized(reader, exc.consumed)
                self._reply_error(
                    None,
                    ProtocolError(
                        ErrorCode.INVALID_REQUEST,
                        f"message larger than {MAX_MESSAGE_BYTES} bytes; discarded",
                    ),
                )

    @staticmethod
    async def _discard_oversized(reader: asyncio.StreamReader, consumed: int) -> None:
        await reader.readexactly(consumed)
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    def _reply_error(self, request_id: Any, error: ProtocolError) -> None:
        self._writer.send(
            encode_message({"jsonrpc": "2.0", "error": error.to_error_object(), "id": request_id})
        )

    def _single(self, parsed: Any) -> Request | None:
        """The request, if `parsed` is one valid request object; None sends it the full way."""
        if type(parsed) is not dict:
            return None
        try:
            validate_request(parsed)
        except ValueError:
            return None
        return create_request(parsed)

    async def _handle(self, line: bytes) -> None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self._reply_error(None, ProtocolError(ErrorCode.PARSE_ERROR, "Parse error: not UTF-8"))
            return
        try:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None  # the full path answers with the parse error
            if _is_response(parsed):
                self._take_response(parsed)
                return
            single = self._single(parsed)
            if single is not None:
                # The common case, one request object: jsonrpcserver's own dispatch step
                # (method lookup, params binding, the call, the response), without its
                # pipeline's re-parse, batch gather and monad chain around it.
                request, result = await dispatch_request(self._methods, self, single)
                if request.id is not NOID:
                    reply = to_serializable(to_response(request, result))
                    self._writer.send(encode_message(reply))
                return
            # Everything else (bad JSON, invalid requests, batches) takes the full path.
            response = await async_dispatch(
                text,
                methods=self._methods,
                context=self,
                validator=validate_request,
                serializer=_serialize,
            )
        except Exception:
            log.exception("dispatch failed")
            self._reply_error(None, ProtocolError.internal())
            return
        if response:
            self._writer.send(response.encode("utf-8") + b"\n")

    async def drain(self, timeout: float) -> None:
        """Wait for in-flight requests to answer; cancel what is still running after `timeout`."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
