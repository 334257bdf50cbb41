"""An async ACP client for a sidecar child process: many requests in flight, matched by id.

Used by the desktop host, the terminal client and the test-suite alike. Messages
are built and parsed with jsonrpcclient; framing is newline-delimited JSON. The
child's stderr is drained continuously (a full stderr pipe would block it) and
kept in a bounded buffer for diagnostics.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from jsonrpcclient import notification, request
from jsonrpcclient.responses import Error, Ok, to_response

from protocol.framing import MAX_MESSAGE_BYTES, encode_message

log = logging.getLogger(__name__)

NotificationHandler = Callable[[str, dict[str, Any]], None]
# Answers a request the sidecar sends us (e.g. session/request_permission): its result.
RequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


class RpcError(Exception):
    """The sidecar answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class SidecarGone(ConnectionError):
    """The sidecar process exited or closed its stdout."""


class SidecarClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._handlers: list[NotificationHandler] = []
        self._request_handler: RequestHandler | None = None
        self._answering: set[asyncio.Task[None]] = set()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=400)
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read_stdout())
        self._stderr = asyncio.create_task(self._read_stderr())

    @classmethod
    async def spawn(
        cls,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
    ) -> SidecarClient:
        process = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "sidecar",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
            limit=MAX_MESSAGE_BYTES,
            # Its own session: a Ctrl-C meant for the UI must not reach the sidecar, which
            # treats SIGINT as "close every session and exit".
            start_new_session=True,
        )
        return cls(process)

    def on_notification(self, handler: NotificationHandler) -> None:
        self._handlers.append(handler)

    def on_request(self, handler: RequestHandler) -> None:
        """Who answers the sidecar's requests to us; without one they get method-not-found."""
        self._request_handler = handler

    async def _write(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            raise SidecarGone("the sidecar's stdin is closed")
        async with self._write_lock:
            try:
                stdin.write(encode_message(message))
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise SidecarGone("the sidecar is gone") from exc

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            # The id first: a request too large for the sidecar to read whole is still
            # answered by its id (the sidecar reads it from the line's start).
            message = request(method, params=params or {}, id=request_id)
            await self._write({"id": message.pop("id"), **message})
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write(notification(method, params=params or {}))

    async def send_raw(self, line: bytes) -> None:
        """Write bytes as they are (tests of malformed input)."""
        stdin = self.process.stdin
        assert stdin is not None
        async with self._write_lock:
            stdin.write(line)
            await stdin.drain()

    async def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while line := await stdout.readline():
                self._dispatch(line)
        except (ValueError, asyncio.LimitOverrunError):
            log.exception("sidecar sent a line over the size limit")
        finally:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 2.0)
            gone = SidecarGone(f"sidecar exited (code {self.process.returncode})")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(gone)

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.error("sidecar wrote a non-JSON line: %r", line[:200])
            return
        if not isinstance(message, dict):
            log.error("sidecar wrote a non-object message: %r", line[:200])
            return
        if "method" in message and "id" in message:
            task = asyncio.ensure_future(self._answer(message))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
            return
        if "method" in message:
            method, params = message["method"], message.get("params") or {}
            for handler in self._handlers:
                try:
                    handler(method, params)
                except Exception:
                    log.exception("notification handler failed for %s", method)
            return
        future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            if message.get("id") is None and "error" in message:
                log.warning("sidecar error without id: %s", message["error"])
            return
        response = to_response(message)
        if isinstance(response, Ok):
            future.set_result(response.result)
        elif isinstance(response, Error):
            future.set_exception(RpcError(response.code, response.message, response.data))

    async def _answer(self, message: dict[str, Any]) -> None:
        """Answer one request from the sidecar (results and errors both go back)."""
        request_id = message["id"]
        handler = self._request_handler
        reply: dict[str, Any]
        if handler is None:
            reply = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32601, "message": f"method not found: {message['method']}"},
            }
        else:
            try:
                result = await handler(str(message["method"]), message.get("params") or {})
                reply = {"jsonrpc": "2.0", "id": request_id, "result": result}
            except Exception as exc:  # noqa: BLE001 (reported to the sidecar, which decides)
                log.exception("answering %s failed", message["method"])
                reply = {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32603, "message": str(exc) or type(exc).__name__},
                }
        try:
            await self._write(reply)
        except SidecarGone:
            log.debug("the sidecar went away before our answer to %s", message["method"])

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        while line := await stderr.readline():
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    async def close(self, timeout: float = 20.0) -> int:
        """Close stdin (the sidecar's signal to shut down) and wait for it to exit."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        await asyncio.gather(self._reader, self._stderr, return_exceptions=True)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
