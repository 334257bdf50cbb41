"""Reading a server's tool list, and hearing when it changes.

Listing follows cursors (bounded, so a paginator that never ends cannot hang a start) and
keeps at most `MAX_TOOLS`. Changes arrive as `notifications/tools/list_changed`, which the
connection's message handler turns into a refresh; on 2026-07-28 connections the server
sends them only on a `subscriptions/listen` stream, which `listen_for_changes` keeps open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import mcp_types as types
from mcp import Client

from ._text import one_line
from ._wire import WireWatch
from .tooldefs import ToolSpec, collect_tools

MAX_TOOLS = 1000
"""Tools kept per server; more would not fit any model's context anyway."""
MAX_PAGES = 100
MAX_NOTES = 8


async def list_tools(
    client: Client, watch: WireWatch, server: str, redact: Callable[[str], str]
) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    """Every usable tool of the server, and short notes on what was skipped and why."""
    if client.server_capabilities.tools is None:
        return (), ()
    watch.skipped.clear()
    listed: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(listed) > MAX_TOOLS:
            break
    tools, notes = collect_tools(server, listed, max_tools=MAX_TOOLS)
    notes = watch.skipped + notes
    if cursor and len(listed) <= MAX_TOOLS:
        notes.append(f"stopped listing tools after {MAX_PAGES} pages")
    shown = [redact(one_line(note)) for note in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        shown.append(f"... and {len(notes) - MAX_NOTES} more notes")
    return tools, tuple(shown)


async def listen_for_changes(client: Client, refresh: asyncio.Event, log: logging.Logger) -> None:
    """Hold a listen stream open for tool changes; each event asks for a refresh."""
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            async for _event in subscription:
                refresh.set()
    except Exception as exc:  # noqa: BLE001 - optional: servers may not serve listen
        log.debug("no tool change notifications: %s", exc)
