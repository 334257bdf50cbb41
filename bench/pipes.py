"""The measuring client: blocking newline-delimited JSON-RPC over a child's pipes.

One client for every process measured (sidecar, floor, ACP-SDK peer), so client
costs are the same on every side of a ratio. Blocking reads on a plain pipe are the
cheapest way to wait for an answer; nothing else runs in the benchmark process while
a request is in flight. The child's stderr goes to a file (never a pipe nobody
reads, which could block the child).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from bench.core import REPO, python

Notification = Callable[[dict[str, Any]], None]


class RpcFailure(RuntimeError):
    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error.get('message')} (code {error.get('code')})")
        self.error = error


class PipeClient:
    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 (closed in close())
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in: IO[bytes] = self.process.stdin
        self._out: IO[bytes] = self.process.stdout
        self._ids = 0
        self.notifications = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        self._in.write(line.encode() + b"\n")
        self._in.flush()
        return self._ids

    def receive(self, request_id: int, method: str, on_note: Notification | None = None) -> Any:
        while True:
            line = self._out.readline()
            if not line:
                raise RuntimeError(f"{method}: the child exited ({self.tail()})")
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RpcFailure(method, message["error"])
                return message.get("result")
            self.notifications += 1
            if on_note is not None:
                on_note(message)

    def call(self, method: str, params: dict[str, Any], on_note: Notification | None = None) -> Any:
        return self.receive(self.send(method, params), method, on_note)

    def timed(self, method: str, params: dict[str, Any]) -> tuple[float, Any]:
        """(µs from the write to the matching answer, the result)."""
        started = time.perf_counter_ns()
        result = self.call(method, params)
        return (time.perf_counter_ns() - started) / 1000.0, result

    def tail(self, lines: int = 8) -> str:
        self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def close(self, timeout: float = 60.0) -> int:
        """Close stdin (every process measured here exits on EOF) and wait, reading what it
        still writes meanwhile (a sidecar closing 1,000 sessions sends 2,000 notifications,
        more than a pipe holds)."""
        drain = threading.Thread(target=self._drain, daemon=True)
        drain.start()
        try:
            self._in.close()
        except OSError:
            pass
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        drain.join(5)
        self._log.close()
        return code

    def _drain(self) -> None:
        try:
            while self._out.read(1 << 16):
                pass
        except (OSError, ValueError):
            pass

    def __enter__(self) -> PipeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sidecar_argv(data_dir: Path, store: str = "sqlite", *extra: str) -> list[str]:
    return [
        python(),
        "-m",
        "sidecar",
        "--data-dir",
        str(data_dir),
        "--store",
        store,
        "--log-level",
        "WARNING",
        *extra,
    ]


def floor_argv(evented: bool = False) -> list[str]:
    return [python(), "-m", "bench.floor", *(["--asyncio"] if evented else [])]


def peer_argv() -> list[str]:
    return [python(), "-m", "bench.peer"]


def initialize(client: PipeClient) -> Any:
    return client.call("initialize", {"protocolVersion": 1})


def new_session(client: PipeClient, cwd: Path | str, **meta: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.call(
        "session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": meta}
    )
    return result


def prompt_params(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
