"""Test harness: a real `python -m sidecar` child, driven over its pipes.

`Sidecar` wraps desktop.client.SidecarClient (the same client the desktop uses)
with a record of every notification and helpers to wait for one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from desktop.client import SidecarClient

NotificationPredicate = Callable[[str, dict[str, Any]], bool]
WAIT = 20.0
INITIALIZE = {
    "protocolVersion": 1,
    "clientCapabilities": {"_meta": {"acp-session-host": {"notifications": True}}},
}


class Sidecar:
    def __init__(self, client: SidecarClient) -> None:
        self.client = client
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.asked: list[dict[str, Any]] = []  # session/request_permission params, in order
        # How this client answers permission requests (tests of consent replace it).
        self.answer_permission: Callable[[dict[str, Any]], Any] = allow_once
        self._changed = asyncio.Condition()
        client.on_notification(self._record)
        client.on_request(self._answer)

    async def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method != "session/request_permission":
            raise ValueError(f"unexpected request {method}")
        self.asked.append(params)
        self._record(method, params)
        answer = self.answer_permission(params)
        return await answer if asyncio.iscoroutine(answer) else answer

    def _record(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append((method, params))

        async def wake() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(wake())

    @classmethod
    async def start(
        cls,
        data_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
    ) -> Sidecar:
        """`python`: what runs `-m sidecar` (tests/unprivileged.py: a launcher as a user)."""
        client = await SidecarClient.spawn(
            ["--data-dir", str(data_dir), "--log-level", "DEBUG", *args], env=env, python=python
        )
        sidecar = cls(client)
        # Ask for our extension notifications (_session/state, ...), as the desktop does.
        await sidecar.call("initialize", INITIALIZE)
        return sidecar

    @property
    def pid(self) -> int:
        return self.client.process.pid

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await asyncio.wait_for(self.client.request(method, params), WAIT)

    async def new_session(self, cwd: Path | str, **meta: Any) -> dict[str, Any]:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": [], "_meta": meta})
        summary: dict[str, Any] = result["_meta"]
        return summary

    async def status(self, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("_session/status", {"sessionId": session_id})
        return result

    async def endpoint(self, session_id: str) -> tuple[str, str]:
        """The live session's listener URL and bearer token (`_session/http`)."""
        access = await self.call("_session/http", {"sessionId": session_id})
        return access["url"], access["token"]

    async def messages(self, session_id: str, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "_session/messages", {"sessionId": session_id, "offset": offset, "limit": limit}
        )
        return result

    def prompt_task(self, session_id: str, text: str) -> asyncio.Task[Any]:
        return asyncio.ensure_future(
            self.client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
            )
        )

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        result: dict[str, Any] = await asyncio.wait_for(self.prompt_task(session_id, text), WAIT)
        return result

    async def wait_for(
        self, predicate: NotificationPredicate, timeout: float = WAIT
    ) -> dict[str, Any]:
        """The first notification (already seen or future) matching `predicate`."""
        deadline = time.monotonic() + timeout
        checked = 0
        async with self._changed:
            while True:
                for method, params in self.seen[checked:]:
                    if predicate(method, params):
                        return params
                checked = len(self.seen)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching notification; saw {self.seen[-5:]}")
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    continue

    async def wait_state(self, session_id: str, status: str, generation: int | None = None) -> None:
        def match(method: str, params: dict[str, Any]) -> bool:
            return (
                method == "_session/state"
                and params.get("sessionId") == session_id
                and params.get("status") == status
                and (generation is None or params.get("generation") == generation)
            )

        await self.wait_for(match)

    def updates(self, session_id: str, kind: str) -> list[dict[str, Any]]:
        return [
            p["update"]
            for m, p in self.seen
            if m == "session/update"
            and p.get("sessionId") == session_id
            and p["update"].get("sessionUpdate") == kind
        ]

    def states(self, session_id: str) -> list[str]:
        return [
            p["status"]
            for m, p in self.seen
            if m == "_session/state" and p["sessionId"] == session_id
        ]

    async def close(self) -> int:
        return await self.client.close()

    def sigkill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    async def wait_exit(self) -> int:
        return await self.client.close(timeout=10)


def allow_once(params: dict[str, Any]) -> dict[str, Any]:
    """Answer a permission request as a user clicking "Allow once" would."""
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (PID 1 here does not reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def marked_processes(name: str, marker: str) -> list[int]:
    """Live (non-zombie) processes whose environment has `name=marker`: a sidecar started
    with that variable, and every process it ever started, wherever it was reparented."""
    needle = f"{name}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if needle in environ.split(b"\0") and state != b"Z":
            found.append(int(entry))
    return found


def marker() -> tuple[str, str]:
    """A unique mark for the processes of one command, and the shell prefix that sets it.

    Commands run in their own PID namespace (bubblewrap), so `$$` and `$!` inside them
    are namespace pids: find a command's processes on the host by this mark instead.
    """
    value = uuid.uuid4().hex
    return value, f"export TEST_MARK={value}; "


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return -1
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def host_pid(mark: str, namespace_pid: int, timeout: float = 5.0) -> int:
    """The host pid of the marked process whose pid inside its namespace is `namespace_pid`
    (`NSpid:` in /proc/PID/status lists a process's pid at every namespace level)."""
    deadline = time.monotonic() + timeout
    while True:
        marked = marked_processes("TEST_MARK", mark)
        # A shell's own /proc environ is the one it was started with (before `export`):
        # the shell that ran the mark is found as the parent of the processes it started.
        for pid in [*marked, *(_parent(pid) for pid in marked)]:
            try:
                with open(f"/proc/{pid}/status") as handle:
                    line = next((row for row in handle if row.startswith("NSpid:")), "")
            except OSError:
                continue
            levels = line.split()[1:]
            if levels and int(levels[-1]) == namespace_pid:
                return pid
        if time.monotonic() > deadline:
            raise LookupError(f"no live process marked {mark} with namespace pid {namespace_pid}")
        time.sleep(0.02)


def has_line(path: Path) -> bool:
    """`path` holds a whole line: a shell's `echo $$ > f` creates the file before it
    writes, so "exists" alone may be read as empty."""
    try:
        return path.read_text().endswith("\n")
    except FileNotFoundError:
        return False


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()
