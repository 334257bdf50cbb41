"""The stdio JSON-RPC server: read lines, dispatch with jsonrpcserver, write replies.

Each request runs in its own task, so a long `session/prompt` never blocks a
`session/cancel` or a `_session/status` behind it. Replies and notifications
share one ordered writer. Errors are mapped to wire codes here, once, in one
table; handlers below this edge only raise sidecar errors.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
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
from sidecar.errors import (
    InvalidInput,
    InvalidState,
    ProviderError,
    ResourceExhausted,
    RuntimeFailed,
    RuntimeLive,
    SessionBusy,
    SessionNotFound,
    SessionNotLive,
    ShuttingDown,
    SidecarError,
    StaleGeneration,
    StoreError,
)
from sidecar.stdio import LineWriter

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

ERROR_CODES: dict[type[Exception], ErrorCode] = {
    InvalidInput: ErrorCode.INVALID_PARAMS,
    SessionNotFound: ErrorCode.SESSION_NOT_FOUND,
    SessionBusy: ErrorCode.SESSION_BUSY,
    RuntimeLive: ErrorCode.RUNTIME_LIVE,
    SessionNotLive: ErrorCode.SESSION_NOT_LIVE,
    StaleGeneration: ErrorCode.SESSION_NOT_LIVE,
    InvalidState: ErrorCode.INVALID_STATE,
    StoreError: ErrorCode.STORE_ERROR,
    ProviderError: ErrorCode.PROVIDER_ERROR,
    ResourceExhausted: ErrorCode.RESOURCE_EXHAUSTED,
    RuntimeFailed: ErrorCode.RUNTIME_FAILED,
    ShuttingDown: ErrorCode.SHUTTING_DOWN,
}


def to_protocol_error(exc: Exception) -> ProtocolError:
    """The closest entry in ERROR_CODES wins (walks the MRO, like Starlette)."""
    if isinstance(exc, ProtocolError):
        return exc
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "params"
        return ProtocolError.invalid_params(field, first["msg"])
    if isinstance(exc, InvalidInput):
        return ProtocolError.invalid_params(exc.field, exc.reason)
    for cls in type(exc).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            data = {"sessionId": exc.session_id} if hasattr(exc, "session_id") else None
            return ProtocolError(code, str(exc), data)
    return ProtocolError.internal()


_REQUEST_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


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
        if "id" in item and item["id"] is not None and type(item["id"]) not in (str, int, float):
            raise ValueError("bad id")
    return request


def _single_request(text: str) -> Request | None:
    """The request, if `text` is one valid request object; None sends it the full way."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(parsed) is not dict:
        return None
    try:
        validate_request(parsed)
    except ValueError:
        return None
    return create_request(parsed)


def wrap(handler: Handler) -> Callable[..., Awaitable[Any]]:
    """Adapt a `handler(params)` to jsonrpcserver: named params only, errors mapped here."""

    async def method(_context: object, **params: Any) -> Any:
        try:
            result = await handler(params)
        except asyncio.CancelledError:
            raise
        except (ProtocolError, ValidationError, SidecarError) as exc:
            error = to_protocol_error(exc)
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

    def register(self, name: str, handler: Handler) -> None:
        self._methods[name] = wrap(handler)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._writer.send(encode_message({"jsonrpc": "2.0", "method": method, "params": params}))

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

    async def _handle(self, line: bytes) -> None:
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self._reply_error(None, ProtocolError(ErrorCode.PARSE_ERROR, "Parse error: not UTF-8"))
            return
        try:
            single = _single_request(text)
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
                text, methods=self._methods, context=self, validator=validate_request
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
