"""One MCP server connection: a long-lived asyncio task that owns the SDK client.

The SDK's transports and `Client` are anyio context managers with task groups inside; they
must be entered and exited by the same task, and a task group's failure cancels whoever is
inside it. So each server gets its own task that enters them, serves until asked to stop,
and exits them; every exception stays in that task and becomes the server's status. Tool
calls are made from the caller's task: a request only writes to the client's streams and
waits for the reply, which is safe from any task on the same loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Literal

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._procs import child_with_stderr, sweep_group
from ._text import Redactor, StderrTail, describe_exception, leaf_exception, one_line
from ._wire import WireWatch
from .listing import list_tools, listen_for_changes
from .specs import McpServerSpec, StdioServer, secret_values
from .tooldefs import ToolSpec
from .transports import Launcher, after_enter, open_transport

State = Literal["connecting", "connected", "failed", "closed"]

CLIENT_INFO = types.Implementation(name="acp-session-host", version="0.1.0")
MAX_NOTES = 8
CLOSE_GRACE = 8.0
"""How long a close may take before it is forced; covers stdio's staged stop (2 s for the
server to exit on EOF, 2 s after SIGTERM, then SIGKILL)."""
_STDERR_SETTLE = 1.0


class Connection:
    """The connection to one server during one runtime generation."""

    def __init__(
        self,
        spec: McpServerSpec,
        *,
        start_timeout: float,
        call_timeout: float,
        launcher: Launcher,
        cwd: str | None,
        on_change: Callable[[], None],
    ) -> None:
        self.spec = spec
        self.state: State = "connecting"
        self.error: str | None = None
        self.notes: tuple[str, ...] = ()
        self.tools: tuple[ToolSpec, ...] = ()
        self.client: Client | None = None
        """Set while connected: what calls go through."""
        self._sdk_client: Client | None = None
        self.redact = Redactor(secret_values(spec))
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._launcher = launcher
        self._cwd = cwd
        self._on_change = on_change
        self._log = logging.getLogger(f"{__name__}.{spec.name}")
        self._watch = WireWatch(self._version, self.mark_lost)
        self._stderr: StderrTail | None = None
        self._pgid: int | None = None
        self._http_error: str | None = None
        self._phase = "starting the server"
        self._failing = False
        self._lost = False
        self._closing = False
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[None] | None = None
        self._settled = asyncio.Event()
        self._stop = asyncio.Event()
        self._refresh = asyncio.Event()

    @property
    def closing(self) -> bool:
        return self._closing

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._main(), name=f"mcp-server:{self.spec.name}")

    async def wait_settled(self, timeout: float) -> None:
        """Wait until connected or failed; the start timer normally settles it in time."""
        try:
            await asyncio.wait_for(self._settled.wait(), timeout)
        except TimeoutError:
            self._start_expired(force=True)

    async def close(self) -> None:
        """Stop the server and wait for its task: gracefully, then by cancelling."""
        self._closing = True
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self.state == "connecting" and self._scope is not None:
                self._scope.cancel()
            await self._await_end(task)
        self._set_state("closed")

    async def _await_end(self, task: asyncio.Task[None]) -> None:
        for escalate in ("cancelling its scope", "cancelling its task", None):
            done, _ = await asyncio.wait([task], timeout=CLOSE_GRACE)
            if done:
                return
            if escalate is None:
                self._log.error("MCP server %r did not close; abandoning it", self.spec.name)
                return
            self._log.warning("MCP server %r is slow to close; %s", self.spec.name, escalate)
            if escalate == "cancelling its scope" and self._scope is not None:
                self._scope.cancel()
            else:
                task.cancel()

    # -- the connection task ---------------------------------------------------------------

    def mark_lost(self) -> None:
        """The server went away (its stream ended, or a call saw the connection close):
        fail at once, so callers see why before their own error, and wind the task down."""
        if self._closing or self.state != "connected":
            return
        self._lost = True
        self._fail("the server disconnected" + self._details())
        self._stop.set()

    async def _main(self) -> None:
        timer = asyncio.get_running_loop().call_later(self._start_timeout, self._start_expired)
        error: Exception | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                await self._run(timer)
        except Exception as exc:  # noqa: BLE001 - contained: this server fails, nothing else
            error = exc
        finally:
            timer.cancel()
            self.client = None
            await self._sweep()
            if error is not None or self._lost:
                await self._settle_failure(error)
            elif self.state in ("connecting", "connected") and not self._closing:
                self._fail("the connection ended unexpectedly" + self._details())
            if self._stderr is not None:
                self._stderr.close()
            if self._closing:
                self._set_state("closed")
            self._settled.set()

    async def _run(self, timer: asyncio.TimerHandle) -> None:
        """Connect, list tools, then serve until stopped."""
        if self._closing:
            return
        async with AsyncExitStack() as stack:
            if isinstance(self.spec, StdioServer):
                self._stderr = StderrTail(self._log, self.redact)
            inner = await open_transport(
                self.spec,
                stack,
                launcher=self._launcher,
                cwd=self._cwd,
                stderr=self._stderr,
                on_response=self._on_http_response,
            )
            client = Client(
                self._watch.wrap(after_enter(inner, self._entered)),
                cache=None,
                message_handler=self._on_message,
                client_info=CLIENT_INFO,
            )
            self._sdk_client = client
            await stack.enter_async_context(client)
            self._http_error = None  # the era probe may have drawn a 4xx from a legacy server
            self._phase = "listing tools"
            await self._load_tools(client)
            timer.cancel()
            if self.state != "connecting" or self._closing:
                return
            self.client = client
            self._phase = "serving"
            self._set_state("connected")
            self._settled.set()
            await self._serve(client)

    async def _serve(self, client: Client) -> None:
        tools = client.server_capabilities.tools
        async with anyio.create_task_group() as group:
            group.start_soon(self._refresher, client)
            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            if modern and tools is not None and tools.list_changed:
                group.start_soon(listen_for_changes, client, self._refresh, self._log)
            await self._stop.wait()
            group.cancel_scope.cancel()

    async def _load_tools(self, client: Client) -> None:
        """Fetch the tool list and publish the usable tools."""
        self.tools, self.notes = await list_tools(client, self._watch, self.spec.name, self.redact)
        self._on_change()

    async def _refresher(self, client: Client) -> None:
        """Re-list tools after `list_changed`; a burst of notifications costs one listing."""
        while True:
            await self._refresh.wait()
            self._refresh.clear()
            try:
                with anyio.fail_after(self._call_timeout):
                    await self._load_tools(client)
            except Exception as exc:  # noqa: BLE001 - a failed refresh keeps the old tools
                reason = self.redact(describe_exception(exc))
                self._log.warning("refreshing tools of %r failed: %s", self.spec.name, reason)
                self.notes = (
                    *self.notes[: MAX_NOTES - 1],
                    f"refreshing the tool list failed: {reason}",
                )
                self._on_change()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._refresh.set()

    async def _on_http_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._http_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()

    def _entered(self, entered: bool) -> None:
        """The transport is up (the process spawned): learn its group, drop our stderr end."""
        if self._stderr is not None:
            if entered:
                self._pgid = child_with_stderr(self._stderr.inode)
            self._stderr.spawned()
        if entered:
            self._phase = "waiting for the MCP handshake"

    def _version(self) -> str | None:
        client = self._sdk_client
        try:
            return client.protocol_version if client is not None else None
        except RuntimeError:  # not entered yet
            return None

    # -- state -----------------------------------------------------------------------------

    def _start_expired(self, force: bool = False) -> None:
        if self.state != "connecting" or self._closing or (self._failing and not force):
            return
        self._fail(f"timed out after {self._start_timeout:g}s {self._phase}" + self._details())
        if self._scope is not None:
            self._scope.cancel()

    def _fail(self, message: str) -> None:
        self.error = self.redact(one_line(message, 400))
        self.tools = ()
        self.client = None
        self._set_state("failed")
        self._settled.set()

    def _set_state(self, state: State) -> None:
        self.state = state
        self._on_change()

    async def _sweep(self) -> None:
        """Stop what the server left running in its process group (see `_procs`)."""
        if self._pgid is not None:
            await sweep_group(self._pgid)

    async def _settle_failure(self, error: Exception | None) -> None:
        """Say why the connection ended, once the server's last stderr lines are in."""
        self._failing = True
        if self._stderr is not None:
            await self._stderr.wait_done(_STDERR_SETTLE)
        if self._lost:
            cause = f": {describe_exception(error)}" if error is not None else ""
            self._fail(f"the server disconnected{cause}" + self._details())
        elif self._closing or self.state not in ("connecting", "connected"):
            self._log.debug("MCP server %r ended with an error", self.spec.name, exc_info=error)
        elif error is not None:
            self._fail(self._failure_message(error))

    def _failure_message(self, exc: Exception) -> str:
        rejected = isinstance(leaf_exception(exc), MCPError | httpx2.HTTPStatusError)
        if self._http_error is not None and rejected:
            code = self._http_error[5:8]
            hint = " (check the configured headers)" if code in ("401", "403") else ""
            return f"the server answered {self._http_error}{hint}" + self._details()
        if self.state == "connected":
            return f"the connection failed: {describe_exception(exc)}" + self._details()
        if isinstance(leaf_exception(exc), OSError) and self._phase == "starting the server":
            return f"could not start the server: {describe_exception(exc)}" + self._details()
        if self._watch.eof and self.spec.transport == "stdio":
            return f"the server exited while {self._phase}" + self._details()
        return f"failed while {self._phase}: {describe_exception(exc)}" + self._details()

    def _details(self) -> str:
        parts: list[str] = []
        if self._watch.bad_output is not None:
            parts.append(f"stdout was not JSON-RPC: {one_line(self._watch.bad_output, 80)!r}")
        last = self._stderr.last_line() if self._stderr is not None else None
        if last:
            parts.append(f"stderr: {last}")
        return "".join(f"; {part}" for part in parts)
