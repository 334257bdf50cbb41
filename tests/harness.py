"""Test harness: a real `python -m sidecar` child, driven over its pipes.

`Sidecar` wraps desktop.client.SidecarClient (the same client the desktop uses)
with a record of every notification and helpers to wait for one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from desktop.client import SidecarClient

NotificationPredicate = Callable[[str, dict[str, Any]], bool]
WAIT = 20.0


class Sidecar:
    def __init__(self, client: SidecarClient) -> None:
        self.client = client
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self._changed = asyncio.Condition()
        client.on_notification(self._record)

    def _record(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append((method, params))

        async def wake() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(wake())

    @classmethod
    async def start(cls, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Sidecar:
        client = await SidecarClient.spawn(
            ["--data-dir", str(data_dir), "--log-level", "DEBUG", *args], env=env
        )
        sidecar = cls(client)
        await sidecar.call("initialize", {"protocolVersion": 1})
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


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()
