"""`McpHub`: every MCP connection of one runtime generation, and the tools they offer.

The hub starts all servers in parallel and never lets one server's trouble reach another or
the caller: a server that cannot start is a status, a failed call is an error result. It is
built for one asyncio event loop (the sidecar's): create it, `await start()`, use it from any
task on that loop, and `await aclose()` before the loop ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from ._text import describe_exception, one_line
from .connection import Connection, State
from .naming import assign_names
from .results import McpCallResult, convert_result, error_result
from .specs import McpServerSpec, Transport
from .tooldefs import ToolSpec
from .transports import Launcher

logger = logging.getLogger(__name__)

_SETTLE_GRACE = 5.0
"""Slack over start_timeout for a failing start to finish describing itself."""


def _identity(argv: list[str]) -> list[str]:
    return argv


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """What a user needs to see about one server; never contains env or header values."""

    name: str
    transport: Transport
    status: State
    tools: int
    error: str | None = None
    """Why it failed (or, once closed, why it had failed), in one line."""
    notes: tuple[str, ...] = ()
    """Non-fatal remarks, e.g. tools skipped for an invalid schema."""


class McpHub:
    """Owns the MCP connections of one runtime and routes the model's tool calls to them.

    `launcher` maps a stdio server's argv to the argv actually run (e.g. wrapped in
    bubblewrap); `cwd` is the working directory stdio servers start in.
    """

    def __init__(
        self,
        specs: list[McpServerSpec],
        *,
        start_timeout: float = 20.0,
        call_timeout: float = 120.0,
        output_cap: int = 65536,
        launcher: Launcher = _identity,
        cwd: str | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        """`on_change` runs whenever a server's state or tool list changes (a server that
        dies between turns, say), so the owner can tell its clients."""
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError("MCP server names must be unique")
        self._specs = {spec.name: spec for spec in specs}
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._output_cap = output_cap
        self._launcher = launcher
        self._cwd = cwd
        self._on_change = on_change
        self._connections = {spec.name: self._connection(spec) for spec in specs}
        self._locks: dict[str, asyncio.Lock] = {}
        self._started = False
        self._closed = False
        self._closing: asyncio.Future[None] | None = None
        self._dirty = True
        self._tools: tuple[ToolSpec, ...] = ()
        self._routes: dict[str, tuple[str, str]] = {}
        self._retired: dict[str, tuple[str, str]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect every server in parallel; returns once each is connected or failed."""
        if self._started or self._closed:
            return
        self._started = True
        for connection in self._connections.values():
            connection.start()
        timeout = self._start_timeout + _SETTLE_GRACE
        await asyncio.gather(*(c.wait_settled(timeout) for c in self._connections.values()))

    async def reconnect(self, name: str) -> ServerStatus:
        """Close one server's connection and start it afresh; KeyError if unknown."""
        spec = self._specs[name]
        if self._closed:
            raise RuntimeError("the MCP hub is closed")
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            await self._connections[name].close()
            if self._closed:  # aclose() ran meanwhile: starting anew would leak the server
                return self._status(self._connections[name])
            connection = self._connection(spec)
            self._connections[name] = connection
            self._changed()
            connection.start()
            await connection.wait_settled(self._start_timeout + _SETTLE_GRACE)
        return self._status(connection)

    async def aclose(self) -> None:
        """Close every connection; idempotent, and finishes even if the caller is cancelled."""
        self._closed = True
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_all())
        await asyncio.shield(self._closing)

    async def _close_all(self) -> None:
        connections = list(self._connections.values())
        results = await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
        for connection, result in zip(connections, results, strict=True):
            if isinstance(result, BaseException):
                logger.error("closing MCP server %r failed: %r", connection.spec.name, result)
        self._changed()

    # -- views -----------------------------------------------------------------------------

    def statuses(self) -> list[ServerStatus]:
        return [self._status(connection) for connection in self._connections.values()]

    def tools(self) -> list[ToolSpec]:
        """The tools of every connected server, under their public names (see `naming`)."""
        self._rebuild()
        return list(self._tools)

    # -- calls -----------------------------------------------------------------------------

    async def call(self, public_name: str, arguments: dict[str, Any]) -> McpCallResult:
        """Run one tool call. Never raises, except `asyncio.CancelledError`: cancelling the
        awaiting task cancels the MCP request on the server too."""
        try:
            return await self._call(public_name, arguments)
        except Exception as exc:  # the contract: failures are results
            logger.exception("MCP call %r failed unexpectedly", public_name)
            return error_result(
                f"calling {public_name!r} failed: {one_line(describe_exception(exc))}"
            )

    async def _call(self, public_name: str, arguments: dict[str, Any]) -> McpCallResult:
        if self._closed:
            return error_result(
                "MCP tools are unavailable: the session's MCP connections are closed"
            )
        self._rebuild()
        route = self._routes.get(public_name)
        if route is None:
            retired = self._retired.get(public_name)
            if retired is None:
                return error_result(f"unknown tool {public_name!r}")
            return error_result(self._unavailable(*retired))
        server, tool = route
        connection = self._connections[server]
        client = connection.client
        if client is None or connection.state != "connected":
            return error_result(self._unavailable(server, tool))
        if not isinstance(arguments, dict):
            return error_result("tool arguments must be a JSON object")
        try:
            with anyio.move_on_after(self._call_timeout) as scope:
                result = await client.call_tool(tool, arguments)
        except MCPError as exc:
            return error_result(connection.redact(self._mcp_error(connection, tool, exc)))
        except Exception as exc:  # noqa: BLE001 - e.g. an invalid result: the model reads why
            reason = connection.redact(one_line(describe_exception(exc)))
            return error_result(f"MCP tool {tool!r} of server {server!r} failed: {reason}")
        if scope.cancelled_caught:
            return error_result(
                f"MCP tool {tool!r} of server {server!r} timed out after {self._call_timeout:g}s;"
                " the call was cancelled"
            )
        return convert_result(result, self._output_cap)

    def _mcp_error(self, connection: Connection, tool: str, exc: MCPError) -> str:
        server = connection.spec.name
        code = exc.error.code
        if code == types.CONNECTION_CLOSED:
            if connection.closing or self._closed:
                return f"the connection to MCP server {server!r} was closed during the call"
            connection.mark_lost()
            why = f": {connection.error}" if connection.error else ""
            return f"MCP server {server!r} disconnected during the call{why}"
        if code == types.REQUEST_TIMEOUT:
            return f"MCP tool {tool!r} of server {server!r} timed out"
        message = one_line(exc.error.message)
        return f"MCP server {server!r} rejected the call to {tool!r}: {message} (error {code})"

    def _unavailable(self, server: str, tool: str) -> str:
        connection = self._connections[server]
        if connection.state == "connected":
            return f"MCP server {server!r} no longer offers tool {tool!r}"
        why = f" ({connection.error})" if connection.error else ""
        return f"MCP server {server!r} is not connected: it is {connection.state}{why}"

    # -- internals -------------------------------------------------------------------------

    def _connection(self, spec: McpServerSpec) -> Connection:
        return Connection(
            spec,
            start_timeout=self._start_timeout,
            call_timeout=self._call_timeout,
            launcher=self._launcher,
            cwd=self._cwd,
            on_change=self._changed,
        )

    def _changed(self) -> None:
        self._dirty = True
        if self._on_change is not None:
            self._on_change()

    def _rebuild(self) -> None:
        """Recompute public names only when some server's tool set changed."""
        if not self._dirty:
            return
        self._dirty = False
        offered = [
            tool
            for connection in self._connections.values()
            if connection.state == "connected"
            for tool in connection.tools
        ]
        names = assign_names((tool.server, tool.tool) for tool in offered)
        self._tools = tuple(
            dataclasses.replace(tool, name=names[(tool.server, tool.tool)]) for tool in offered
        )
        routes = {tool.name: (tool.server, tool.tool) for tool in self._tools}
        self._retired.update(self._routes)
        for name in routes:
            self._retired.pop(name, None)
        self._routes = routes

    def _status(self, connection: Connection) -> ServerStatus:
        return ServerStatus(
            name=connection.spec.name,
            transport=connection.spec.transport,
            status=connection.state,
            tools=len(connection.tools) if connection.state == "connected" else 0,
            error=connection.error,
            notes=connection.notes,
        )
