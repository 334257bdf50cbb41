"""Building the SDK transport for a server spec.

stdio: the SDK's `stdio_client` spawns `launcher([command, *args])` with `start_new_session`
(own session and process group), an environment of only the SDK's safe defaults (`HOME`,
`LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER`) plus the spec's env, and stderr into a pipe the
hub reads (see `StderrTail`). HTTP and SSE: an `httpx2` client carrying the spec's headers
and a response hook that remembers the last HTTP error status, because the SDK reports a
rejected request only as a generic JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import httpx2
from mcp.client import Transport
from mcp.client._transport import TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ._text import StderrTail
from .specs import McpServerSpec, StdioServer

Launcher = Callable[[list[str]], list[str]]
ResponseHook = Callable[[httpx2.Response], Awaitable[None]]

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults for MCP over HTTP (long reads: responses may be streams)."""


async def open_transport(
    spec: McpServerSpec,
    stack: AsyncExitStack,
    *,
    launcher: Launcher,
    cwd: str | None,
    stderr: StderrTail | None,
    on_response: ResponseHook,
) -> Transport:
    """The (not yet entered) transport for `spec`; `stderr` is required for stdio."""
    if isinstance(spec, StdioServer):
        assert stderr is not None
        errlog = await stderr.open()
        argv = launcher([spec.command, *spec.args])
        if not argv:
            raise ValueError("the launcher returned an empty command")
        params = StdioServerParameters(
            command=argv[0], args=list(argv[1:]), env=dict(spec.env) or None, cwd=cwd
        )
        return stdio_client(params, errlog=errlog)
    hooks: dict[str, list[Callable[..., Any]]] = {"response": [on_response]}
    if spec.transport == "http":
        http = httpx2.AsyncClient(
            headers=dict(spec.headers), timeout=HTTP_TIMEOUT, event_hooks=hooks
        )
        await stack.enter_async_context(http)
        return streamable_http_client(spec.url, http_client=http)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers, timeout=timeout or HTTP_TIMEOUT, auth=auth, event_hooks=hooks
        )

    transport = sse_client(spec.url, headers=dict(spec.headers), httpx_client_factory=factory)
    return cast(Transport, transport)


@asynccontextmanager
async def after_enter(
    inner: Transport, callback: Callable[[bool], None]
) -> AsyncIterator[TransportStreams]:
    """Call `callback(True)` once the transport is entered, `callback(False)` if that fails."""
    entered = False
    try:
        async with inner as streams:
            entered = True
            callback(True)
            yield streams
    finally:
        if not entered:
            callback(False)
