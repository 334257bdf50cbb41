"""A sidecar child on plain pipes for race and fault tests: raw bytes in, every line out.

`RawClient` writes exactly the bytes a test gives it (so two requests can share one
`write`), keeps every stdout line as written, checks each one parses as *strict* JSON
(no NaN/Infinity, no non-finite numbers), files every reply under its id (so "exactly
one answer per request" can be checked), answers the sidecar's permission requests, and
sends the sidecar's stderr to a file, so nothing of a long log is lost.

Also here: a scan of the host's /proc for marked processes (by environment entry prefix)
and a tiny raw HTTP/1.1 client for the per-session listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from protocol.framing import MAX_MESSAGE_BYTES

REPO = Path(__file__).resolve().parent.parent
WAIT = 20.0
ALLOW_ONCE = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
_log_numbers = itertools.count(1)


class NotStrictJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise NotStrictJson(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStrictJson(f"number {text} is not finite")
    return value


def strict_json(line: bytes | str) -> Any:
    """Parse like a strict JSON parser would (RFC 8259): NaN, Infinity and numbers that
    overflow a double are refused."""
    return json.loads(line, parse_constant=_refuse_constant, parse_float=_finite_float)


class RpcFailure(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('message')} (code {error.get('code')})")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


def key(request_id: Any) -> str:
    return json.dumps(request_id)


def frame(method: str, params: dict[str, Any] | None = None, request_id: Any = None) -> bytes:
    """One request line; `request_id=None` makes it a notification."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


def text_prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


class RawClient:
    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        self.process = process
        self.log_path = log_path
        self.lines: list[bytes] = []  # every stdout line, as written, in order
        self.not_strict: list[tuple[bytes, str]] = []  # lines a strict parser refuses
        self.notifications: list[dict[str, Any]] = []
        self.replies: dict[str, list[dict[str, Any]]] = {}  # by key(id), in arrival order
        self.reply_order: list[str] = []  # key(id) of each reply, in arrival order
        self.asked: list[dict[str, Any]] = []  # requests the sidecar made of us
        # How the sidecar's session/request_permission is answered.
        self.answer_permission: Callable[[dict[str, Any]], Any] = lambda params: ALLOW_ONCE
        self.initialized: dict[str, Any] = {}  # the initialize result
        self._ids = itertools.count(1)
        self._waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls,
        data_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        repo: Path = REPO,
        log_level: str = "DEBUG",
        initialize: bool = True,
    ) -> RawClient:
        if log_path is None:
            log_path = data_dir.parent / f"sidecar-{os.getpid()}-{next(_log_numbers)}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log_file:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sidecar",
                "--data-dir",
                str(data_dir),
                "--log-level",
                log_level,
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                cwd=repo,
                env={**os.environ, **(env or {})},
                limit=MAX_MESSAGE_BYTES,
                start_new_session=True,
            )
        client = cls(process, log_path)
        if initialize:
            client.initialized = await client.call("initialize", {"protocolVersion": 1})
        return client

    @property
    def pid(self) -> int:
        return self.process.pid

    # ---- reading -----------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            await self._read_lines()
        finally:
            # No answer will come now: say so at once, with the end of the log.
            for waiter in self._waiters.values():
                if not waiter.done():
                    waiter.set_exception(
                        ConnectionError(
                            f"the sidecar closed its stdout; log:\n{self.stderr_tail()}"
                        )
                    )
            self._waiters.clear()

    async def _read_lines(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while line := await stdout.readline():
            self.lines.append(line)
            try:
                message = strict_json(line)
            except ValueError as exc:
                self.not_strict.append((line, str(exc)))
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
            if not isinstance(message, dict):
                continue
            if "method" in message and "id" in message:
                task = asyncio.create_task(self._answer(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif "method" in message:
                self.notifications.append(message)
            else:
                k = key(message.get("id"))
                self.replies.setdefault(k, []).append(message)
                self.reply_order.append(k)
                waiter = self._waiters.pop(k, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(message)

    async def _answer(self, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        self.asked.append(message)
        if message["method"] == "session/request_permission":
            answer = self.answer_permission(params)
            if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
                answer = await answer
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "not supported by this client"},
            }
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.write(json.dumps(reply).encode() + b"\n")

    # ---- writing -----------------------------------------------------------------------

    def new_id(self) -> int:
        return next(self._ids)

    async def write(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        await stdin.drain()

    def expect(self, request_id: Any) -> asyncio.Future[dict[str, Any]]:
        """The first reply with this id (already arrived or future)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        k = key(request_id)
        if self.replies.get(k):
            future.set_result(self.replies[k][0])
        elif self._reader.done():
            future.set_exception(ConnectionError("the sidecar closed its stdout"))
        else:
            self._waiters[k] = future
        return future

    async def reply(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        return await asyncio.wait_for(self.expect(request_id), timeout)

    async def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = WAIT
    ) -> dict[str, Any]:
        request_id = self.new_id()
        waiter = self.expect(request_id)
        await self.write(frame(method, params if params is not None else {}, request_id))
        return await asyncio.wait_for(waiter, timeout)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = WAIT
    ) -> Any:
        reply = await self.request(method, params, timeout)
        if "error" in reply:
            raise RpcFailure(reply["error"])
        return reply["result"]

    async def together(
        self, *requests: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], bool]
    ) -> list[int | None]:
        """Write several requests in ONE write; a third item False makes a notification.
        Returns each one's id (None for notifications)."""
        ids: list[int | None] = []
        data = b""
        for item in requests:
            method, params = item[0], item[1]
            is_request = item[2] if len(item) > 2 else True  # type: ignore[misc]
            request_id = self.new_id() if is_request else None
            ids.append(request_id)
            data += frame(method, params, request_id)
        await self.write(data)
        return ids

    # ---- helpers -----------------------------------------------------------------------

    async def new_session(self, cwd: Path | str, **meta: Any) -> dict[str, Any]:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": meta})
        summary: dict[str, Any] = result["_meta"]
        return summary

    async def status(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("_session/status", {"sessionId": session_id})
        return result

    async def endpoint(self, session_id: str) -> tuple[str, str]:
        access = await self.call("_session/http", {"sessionId": session_id})
        return access["url"], access["token"]

    async def messages(self, session_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        result = await self.call(
            "_session/messages", {"sessionId": session_id, "offset": 0, "limit": limit}
        )
        entries: list[dict[str, Any]] = result["messages"]
        return entries

    async def prompt(self, session_id: str, text: str, timeout: float = WAIT) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "session/prompt", text_prompt(session_id, text), timeout
        )
        return result

    def states(self, session_id: str) -> list[str]:
        return [
            n["params"]["status"]
            for n in self.notifications
            if n["method"] == "_session/state" and n["params"].get("sessionId") == session_id
        ]

    def stderr_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def sigkill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    async def wait_exit(self, timeout: float = WAIT) -> int:
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.sigkill()
            code = await self.process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader), 5)
        return code

    async def close(self, timeout: float = WAIT) -> int:
        """Close stdin (the sidecar's cue to shut down) and wait for it to exit."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()
        return await self.wait_exit(timeout)


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


# ---- processes ---------------------------------------------------------------------------


def _state(pid: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[0]


def marked(prefix: str) -> dict[int, list[str]]:
    """Live (non-zombie) processes on the host with an environment entry starting with
    `prefix` (e.g. "T_MARK_abc"), and those entries. Processes inside a sandbox's PID
    namespace are seen here under their host pids."""
    needle = prefix.encode()
    found: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        hits = [item.decode() for item in environ.split(b"\0") if item.startswith(needle)]
        if hits and _state(entry) not in (None, b"Z"):
            found[int(entry)] = hits
    return found


def marker_values(found: dict[int, list[str]]) -> set[str]:
    return {item for items in found.values() for item in items}


# ---- raw HTTP ----------------------------------------------------------------------------


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def http(
    port: int,
    method: str,
    path: str,
    token: str | None,
    body: Any = None,
    *,
    timeout: float = WAIT,
    extra: Iterable[str] = (),
) -> tuple[int, Any]:
    """One request on its own connection (Connection: close); (status, parsed JSON body
    or the raw bytes)."""
    data = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += list(extra)
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
            await writer.drain()
            raw = await reader.read()
        finally:
            writer.close()
    return parse_response(raw)


def parse_response(raw: bytes) -> tuple[int, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("closed without an answer")
    status = int(head.split(b"\r\n", 1)[0].split()[1])
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


def connectable(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False
