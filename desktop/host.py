"""The desktop's side of the sidecar: start it, talk to it, restart it if it dies.

The host owns exactly one sidecar child at a time. If the child exits while the
app is running, the host tells its listeners, starts a new one on the same data
dir (whose start-up reconciliation marks the dead process's sessions closed and
resumable), and carries on. A child that keeps dying right after start is given
up on instead of restarted in a loop. Quitting asks the sidecar to close every
live session (records kept) and waits for it to exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from desktop.client import SidecarClient, SidecarGone
from protocol.methods import PROTOCOL_VERSION

log = logging.getLogger(__name__)

NotificationListener = Callable[[str, dict[str, Any]], None]
# Host events: "sidecar_started", "sidecar_exited", "sidecar_restarted", "sidecar_failed".
HostListener = Callable[[str, dict[str, Any]], None]

QUICK_DEATH_SECONDS = 3.0
MAX_QUICK_DEATHS = 5


class SidecarHost:
    def __init__(
        self, sidecar_args: Sequence[str] = (), *, env: dict[str, str] | None = None
    ) -> None:
        self.sidecar_args = list(sidecar_args)
        self.env = env
        self.client: SidecarClient | None = None
        self.initialize_result: dict[str, Any] | None = None
        self.restarts = 0
        self._notification_listeners: list[NotificationListener] = []
        self._host_listeners: list[HostListener] = []
        self._ready = asyncio.Event()
        self._stopping = False
        self._supervisor: asyncio.Task[None] | None = None
        self._quick_deaths = 0
        self._started_at = 0.0

    # ---- listeners ---------------------------------------------------------------------

    def on_notification(self, listener: NotificationListener) -> None:
        self._notification_listeners.append(listener)

    def on_host_event(self, listener: HostListener) -> None:
        self._host_listeners.append(listener)

    def _emit_host(self, kind: str, data: dict[str, Any]) -> None:
        for listener in list(self._host_listeners):
            try:
                listener(kind, data)
            except Exception:
                log.exception("host listener failed for %s", kind)

    def _forward(self, method: str, params: dict[str, Any]) -> None:
        for listener in list(self._notification_listeners):
            try:
                listener(method, params)
            except Exception:
                log.exception("notification listener failed for %s", method)

    # ---- lifecycle ---------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.client.process.pid if self.client else None

    async def start(self) -> None:
        await self._spawn()
        self._supervisor = asyncio.create_task(self._supervise(), name="sidecar-supervisor")

    async def _spawn(self) -> None:
        client = await SidecarClient.spawn(self.sidecar_args, env=self.env)
        client.on_notification(self._forward)
        self.client = client
        self._started_at = time.monotonic()
        self.initialize_result = await client.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientInfo": {"name": "acp-session-host-desktop", "version": "0.1.0"},
            },
        )
        self._ready.set()
        self._emit_host("sidecar_started", {"pid": client.process.pid, "restarts": self.restarts})

    async def _supervise(self) -> None:
        while not self._stopping:
            client = self.client
            assert client is not None
            code = await client.process.wait()
            if self._stopping:
                return
            self._ready.clear()
            lived = time.monotonic() - self._started_at
            self._quick_deaths = self._quick_deaths + 1 if lived < QUICK_DEATH_SECONDS else 0
            tail = list(client.stderr_tail)[-20:]
            log.error("sidecar exited with code %s after %.1f s", code, lived)
            self._emit_host("sidecar_exited", {"code": code, "stderr": tail})
            if self._quick_deaths >= MAX_QUICK_DEATHS:
                self._emit_host(
                    "sidecar_failed",
                    {"reason": f"the sidecar died {self._quick_deaths} times right after start"},
                )
                return
            await asyncio.sleep(min(0.2 * 2**self._quick_deaths, 5.0))
            try:
                self.restarts += 1
                await self._spawn()
            except (OSError, SidecarGone) as exc:
                log.error("restarting the sidecar failed: %s", exc)
                self._emit_host("sidecar_failed", {"reason": f"restart failed: {exc}"})
                return
            self._emit_host("sidecar_restarted", {"pid": self.pid, "restarts": self.restarts})

    async def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any:
        """A request to the current sidecar; waits (bounded) while it is being restarted."""
        await asyncio.wait_for(self._ready.wait(), timeout)
        assert self.client is not None
        return await self.client.request(method, params)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await asyncio.wait_for(self._ready.wait(), 30.0)
        assert self.client is not None
        await self.client.notify(method, params)

    async def shutdown(self, timeout: float = 20.0) -> None:
        """Close every live session (records kept), then stop the sidecar; nothing left running."""
        self._stopping = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        client = self.client
        if client is None or client.process.returncode is not None:
            return
        with contextlib.suppress(SidecarGone, TimeoutError, ConnectionError):
            await asyncio.wait_for(client.request("_sidecar/shutdown", {}), 5.0)
        await client.close(timeout=timeout)
