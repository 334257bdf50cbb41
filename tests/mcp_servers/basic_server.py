"""A well-behaved MCP test server (stdio by default, `--http`/`--sse` to serve over HTTP).

Tools cover the shapes the hub must handle: annotations, images, structured content, a
long sleep that records its cancellation, a crash mid-call, a flood of text, and a tool that
adds a tool and announces the change.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, ToolAnnotations

# A 1x1 transparent PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
    )
).decode()

server = MCPServer("basic", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_thing(thing: str) -> str:
    """Pretend to delete something."""
    return f"deleted {thing}"


@server.tool()
def image() -> ImageContent:
    """Return a tiny PNG."""
    return ImageContent(type="image", data=PIXEL, mime_type="image/png")


@server.tool()
def structured(a: int, b: int) -> dict[str, Any]:
    """Return structured content."""
    return {"sum": a + b, "inputs": [a, b]}


@server.tool()
async def sleep(seconds: float, marker: str) -> str:
    """Sleep; write 'started' then 'cancelled' or 'finished' to the marker file."""
    path = Path(marker)
    path.write_text("started")
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        path.write_text("cancelled")
        raise
    path.write_text("finished")
    return "slept"


@server.tool()
def crash() -> str:
    """Kill the server process in the middle of the call."""
    sys.stderr.write("crashing on purpose\n")
    sys.stderr.flush()
    os._exit(7)


@server.tool()
def flood(size: int) -> str:
    """Return `size` characters of text."""
    return "x" * size


@server.tool()
def fail() -> str:
    """Raise a deliberate tool error, which reaches the client as an error result."""
    raise ToolError("this tool always fails")


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool and tell the client the tool list changed."""

    def added() -> str:
        return "added tool"

    server.add_tool(added, name=name, description="added at runtime")
    await ctx.notify_tools_changed()  # 2026-07-28 listen streams
    try:
        await ctx.request_context.session.send_tool_list_changed()  # earlier versions
    except Exception:
        pass
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="PORT_FILE")
    parser.add_argument("--sse", metavar="PORT_FILE")
    parser.add_argument("--token", help="require 'Authorization: Bearer TOKEN'")
    parser.add_argument("--spawn-child", action="store_true", help="start a sleeping child")
    args = parser.parse_args()
    if args.spawn_child:
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL
        )
    if args.http or args.sse:
        from http_serving import serve

        app = server.sse_app() if args.sse else server.streamable_http_app()
        serve(app, Path(args.http or args.sse), args.token)
    else:
        server.run()


if __name__ == "__main__":
    main()
