"""A transport wrapper between the SDK's transport and its `Client`: it watches the wire.

It exists for three things the SDK does not expose:

- noticing that the server went away (the read stream ends) the moment it happens, so the
  status says "failed" before the pending call returns its "connection closed" error;
- remembering the first line of stdout that was not JSON-RPC, to explain a failed start;
- dropping individual tools with an invalid schema from `tools/list` responses. The SDK
  validates the listing as a whole, so one bad tool would otherwise lose the server all of
  them; here each entry is checked against the negotiated version and only bad ones go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.client import Transport
from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import methods
from pydantic import ValidationError

_LIST_TOOLS = "tools/list"


class WireWatch:
    """What was seen on one connection's wire; callbacks fire on the reading task."""

    def __init__(self, version: Callable[[], str | None], on_eof: Callable[[], None]) -> None:
        self._version = version
        self._on_eof = on_eof
        self._list_ids: set[str] = set()
        self.eof = False
        self.bad_output: str | None = None
        """The first stdout line that was not a JSON-RPC message, if any."""
        self.skipped: list[str] = []
        """Why tools were dropped from the latest listing pages (reset by the caller)."""

    @asynccontextmanager
    async def wrap(self, inner: Transport) -> AsyncIterator[TransportStreams]:
        async with inner as (read, write):
            yield _WatchedRead(read, self), _WatchedWrite(write, self)

    def ended(self) -> None:
        if not self.eof:
            self.eof = True
            self._on_eof()

    def bad_item(self, exc: Exception) -> None:
        if self.bad_output is None:
            self.bad_output = _offending_input(exc)

    def outbound(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == _LIST_TOOLS:
            self._list_ids.add(str(message.id))

    def inbound(self, item: SessionMessage) -> SessionMessage:
        message = item.message
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return item
        key = str(message.id)
        if key not in self._list_ids:
            return item
        self._list_ids.discard(key)
        if isinstance(message, types.JSONRPCError):
            return item
        tools = message.result.get("tools")
        if not isinstance(tools, list):
            return item
        envelope = {key: value for key, value in message.result.items() if key != "tools"}
        kept = [tool for tool in tools if self._tool_ok(tool, envelope)]
        if len(kept) == len(tools):
            return item
        result = {**message.result, "tools": kept}
        reply = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
        return SessionMessage(reply, metadata=item.metadata)

    def _tool_ok(self, tool: object, envelope: dict[str, Any]) -> bool:
        """Validate one entry as a one-tool listing, at the negotiated protocol version."""
        name = tool.get("name") if isinstance(tool, dict) else None
        label = repr(name) if isinstance(name, str) else "(unnamed)"
        if not isinstance(tool, dict):
            self.skipped.append("skipped a tool listing entry that is not an object")
            return False
        try:
            methods.validate_server_result(
                _LIST_TOOLS, self._version() or "2025-11-25", {**envelope, "tools": [tool]}
            )
        except ValidationError as exc:
            self.skipped.append(f"skipped tool {label}: {_first_error(exc)}")
            return False
        except (KeyError, ValueError):
            return True  # a version this SDK cannot check: leave it to the SDK
        return True


class _WatchedRead:
    def __init__(self, inner: ReadStream[SessionMessage | Exception], watch: WireWatch) -> None:
        self._inner = inner
        self._watch = watch

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.ended()
            raise
        if isinstance(item, Exception):
            self._watch.bad_item(item)
            return item
        return self._watch.inbound(item)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _WatchedWrite:
    def __init__(self, inner: WriteStream[SessionMessage], watch: WireWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def send(self, item: SessionMessage, /) -> None:
        self._watch.outbound(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _offending_input(exc: Exception) -> str:
    """The raw line the SDK could not parse, as far as its error says."""
    if isinstance(exc, ValidationError):
        for error in exc.errors():
            if isinstance(error.get("input"), str):
                return str(error["input"])
    return str(exc)


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid tool definition"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"][2:])  # drop ("tools", 0)
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where or 'definition'}: {first['msg']}{more}"
