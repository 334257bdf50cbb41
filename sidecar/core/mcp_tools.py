"""A runtime's MCP servers: connected with its generation, closed with it.

The servers a client named (`mcpServers`, stored in the record) are connected in the
background when the runtime starts, so opening a session never waits on a slow server;
the first model call waits for them (bounded by the start timeout) so the model sees
their tools. A server that fails does not fail the session: its status says why. Stdio
servers run inside bubblewrap with their own PID namespace (sandbox `off`: a server
needs the user's files and network), so none outlives the sidecar, even a SIGKILLed one;
the sidecar's data and config dirs are hidden from them as from commands.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.values import Mode, Sandbox
from sidecar.agent import sandbox
from sidecar.agent.mcp import (
    HttpServer,
    McpCallResult,
    StdioServer,
    ToolSpec,
    parse_servers,
)
from sidecar.agent.mcp.specs import secret_values
from sidecar.agent.sandbox import SandboxStatus
from sidecar.core.views import McpServerView
from sidecar.domain.redaction import SECRETS

if TYPE_CHECKING:
    from sidecar.agent.mcp.hub import McpHub, ServerStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class McpSettings:
    start_timeout: float = 20.0  # seconds a server may take to connect
    call_timeout: float = 120.0  # seconds one tool call may take


def specs_from_json(text: str) -> list[Any]:
    """The stored definitions (validated when they were given)."""
    return parse_servers(json.loads(text or "[]"))


class McpTools:
    def __init__(
        self,
        definitions: str,
        settings: McpSettings,
        output_cap: int,
        cwd: str,
        containment: SandboxStatus,
        *,
        hide: Sequence[str] = (),
    ) -> None:
        self._hub: McpHub | None = None
        self._starting: asyncio.Task[None] | None = None
        self._announce: Callable[[], None] | None = None  # set once the start settled
        self._announcing = False
        specs = specs_from_json(definitions)
        if not specs:
            return
        # Before any server starts: what they print may reach a library's log line.
        SECRETS.add(*(value for spec in specs for value in secret_values(spec)))
        from sidecar.agent.mcp.hub import McpHub  # the MCP SDK: loaded with the first servers

        self._hub = McpHub(
            specs,
            start_timeout=settings.start_timeout,
            call_timeout=settings.call_timeout,
            output_cap=output_cap,
            launcher=_contained(cwd, containment, hide),
            cwd=cwd,
            on_change=self._changed,
        )

    @property
    def active(self) -> bool:
        return self._hub is not None

    def start(self, on_settled: Callable[[], None]) -> None:
        """Connect in the background; `on_settled` runs once every server connected or
        failed (the session tells its clients)."""
        if self._hub is not None and self._starting is None:
            self._starting = asyncio.create_task(self._start(on_settled), name="mcp-start")

    async def _start(self, on_settled: Callable[[], None]) -> None:
        assert self._hub is not None
        await self._hub.start()
        on_settled()
        self._announce = on_settled  # from now on, every later change is told too

    def _changed(self) -> None:
        """A server's state or tools changed: told once per loop iteration, however many
        changes came together (the start announces its own outcome once)."""
        if self._announce is None or self._announcing:
            return
        self._announcing = True

        def announce() -> None:
            self._announcing = False
            if self._announce is not None:
                self._announce()

        asyncio.get_running_loop().call_soon(announce)

    async def ready(self) -> None:
        """Wait (bounded by the start timeout) until every server connected or failed."""
        if self._starting is not None:
            await asyncio.shield(self._starting)

    def statuses(self) -> list[ServerStatus]:
        return self._hub.statuses() if self._hub is not None else []

    def tools(self, mode: Mode) -> list[ToolSpec]:
        """What the mode may use: everything in craft, read-only tools in plan, none in ask."""
        if self._hub is None or mode is Mode.ASK:
            return []
        tools = self._hub.tools()
        return tools if mode is Mode.CRAFT else [t for t in tools if t.read_only]

    def tool(self, name: str, mode: Mode) -> ToolSpec | None:
        return next((t for t in self.tools(mode) if t.name == name), None)

    async def call(self, name: str, arguments: dict[str, Any]) -> McpCallResult:
        assert self._hub is not None
        return await self._hub.call(name, arguments)

    async def reconnect(self, name: str) -> ServerStatus:
        if self._hub is None:
            raise KeyError(name)
        return await self._hub.reconnect(name)

    async def aclose(self) -> None:
        self._announce = None  # the generation is going: its servers closing is not news
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        if self._hub is not None:
            await self._hub.aclose()


def _contained(
    cwd: str, containment: SandboxStatus, hide: Sequence[str]
) -> Callable[[list[str]], list[str]]:
    """Every stdio server in bubblewrap, mode `off`, the data and config dirs hidden."""

    def launch(argv: list[str]) -> list[str]:
        if not containment.available or containment.bwrap is None:
            log.warning("bubblewrap unavailable: MCP server %s runs uncontained", argv[:1])
            return argv
        return sandbox.wrap(argv, mode=Sandbox.OFF, cwd=cwd, bwrap=containment.bwrap, hide=hide)

    return launch


def server_views(tools: McpTools | None, definitions: str) -> tuple[McpServerView, ...]:
    """A live runtime's servers as they are; a session without one: its definitions, closed."""
    if tools is not None:
        return tuple(
            McpServerView(s.name, s.transport, s.status, s.tools, s.error) for s in tools.statuses()
        )
    views = []
    for spec in specs_from_json(definitions):
        transport = (
            "stdio"
            if isinstance(spec, StdioServer)
            else ("http" if isinstance(spec, HttpServer) else "sse")
        )
        views.append(McpServerView(spec.name, transport, "closed", 0, None))
    return tuple(views)
