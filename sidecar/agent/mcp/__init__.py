"""MCP client side of the agent: connect to the servers an ACP client names, offer their tools.

`parse_servers` turns ACP `mcpServers` into specs, `McpHub` owns one runtime's connections
(start, tools, call, reconnect, aclose). See `hub` for the lifecycle, `naming` for how tool
names are made, `tooldefs` for the ACP kind mapping and `connection` for the SDK details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .naming import assign_names
from .results import McpCallResult
from .specs import (
    HttpServer,
    InvalidServers,
    McpServerSpec,
    SseServer,
    StdioServer,
    parse_servers,
)
from .tooldefs import ToolKind, ToolSpec

if TYPE_CHECKING:
    from .hub import McpHub, ServerStatus


def __getattr__(name: str) -> Any:
    """The hub (and with it the MCP SDK, ~1 s of import) loads when a session first has
    MCP servers, not when the sidecar starts."""
    if name in ("McpHub", "ServerStatus"):
        from . import hub

        return getattr(hub, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HttpServer",
    "InvalidServers",
    "McpCallResult",
    "McpHub",
    "McpServerSpec",
    "ServerStatus",
    "SseServer",
    "StdioServer",
    "ToolKind",
    "ToolSpec",
    "assign_names",
    "parse_servers",
]
