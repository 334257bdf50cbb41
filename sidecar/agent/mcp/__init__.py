"""MCP client side of the agent: connect to the servers an ACP client names, offer their tools.

`parse_servers` turns ACP `mcpServers` into specs, `McpHub` owns one runtime's connections
(start, tools, call, reconnect, aclose). See `hub` for the lifecycle, `naming` for how tool
names are made, `tooldefs` for the ACP kind mapping and `connection` for the SDK details.
"""

from .hub import McpHub, ServerStatus
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
