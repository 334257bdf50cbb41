"""Scenario 10's MCP server: one read-only `echo` tool, over stdio, built on the MCP SDK
(the way tests/mcp_servers/basic_server.py is). Both sides of the MCP ratio talk to their
own copy of this process: the sidecar (through a turn) and the SDK client (the peer)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
