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
from dataclasses import dataclass
from typing import Any

from desktop.client import SidecarClient, SidecarGone
from protocol.methods import EXTENSION_KEY, PROTOCOL_VERSION, Method
from protocol.version import VERSION

log = logging.getLogger(__name__)

NotificationListener = Callable[[str, dict[str, Any]], None]


@dataclass
class PendingPermission:
    params: dict[str, Any]  # the sidecar's session/request_permission params
    answer: asyncio.Future[dict[str, Any]]


# Host events: "sidecar_started", "sidecar_exited", "sidecar_restarted", "sidecar_failed",
# "permission_requested", "permission_settled".
HostListener = Callable[[str, dict[str, Any]], None]

# Results that open a session carry its config options ("sessionId" is the new session's
# in new and fork results, the request's in load and resume).
OPENING_METHODS = frozenset(
    {Method.SESSION_NEW, Method.SESSION_LOAD, Method.SESSION_RESUME, Method.SESSION_FORK}
)
# After these the session has no runtime, so no config options to offer.
ENDING_METHODS = frozenset({Method.SESSION_CLOSE, Method.SESSION_DELETE})
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
        # Permission requests waiting for the user, by (sessionId, toolCallId): kept here,
        # not in a page, so a rebuilt window shows the same cards and its answer counts.
        self.pending_permissions: dict[tuple[str, str], PendingPermission] = {}
        # Each live session's ACP config options (mode, model, approval, sandbox), as the
        # last result that opened it or `config_option_update` said: the model picker's
        # choices, kept here so a rebuilt page has them without asking the sidecar.
        self.config_options: dict[str, list[dict[str, Any]]] = {}

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
        if method == Method.SESSION_UPDATE:
            self._observe_config(params)
        for listener in list(self._notification_listeners):
            try:
                listener(method, params)
            except Exception:
                log.exception("notification listener failed for %s", method)

    def _observe_config(self, params: dict[str, Any]) -> None:
        update = params.get("update")
        session_id = params.get("sessionId")
        if (
            isinstance(update, dict)
            and update.get("sessionUpdate") == "config_option_update"
            and isinstance(session_id, str)
            and isinstance(update.get("configOptions"), list)
        ):
            self.config_options[session_id] = update["configOptions"]

    def _observe_result(self, method: str, params: dict[str, Any] | None, result: Any) -> None:
        """Keep the config options a result that opens a session carries; forget them when
        it is closed or deleted (so the cache holds live sessions only)."""
        asked_about = (params or {}).get("sessionId")
        if method in ENDING_METHODS:
            if isinstance(asked_about, str):
                self.config_options.pop(asked_about, None)
            return
        if not isinstance(result, dict) or not isinstance(result.get("configOptions"), list):
            return
        session_id = result.get("sessionId") or asked_about
        if method in OPENING_METHODS and isinstance(session_id, str):
            self.config_options[session_id] = result["configOptions"]

    # ---- permission requests -------------------------------------------------------------

    async def _on_request(self, method: str, params: dict[str, Any]) -> Any:
        if method != Method.REQUEST_PERMISSION:
            raise ValueError(f"the desktop does not answer {method}")
        session_id = str(params.get("sessionId"))
        call_id = str((params.get("toolCall") or {}).get("toolCallId"))
        key = (session_id, call_id)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending_permissions[key] = PendingPermission(params, answer)
        self._emit_host("permission_requested", params)
        try:
            return await answer
        finally:
            self.pending_permissions.pop(key, None)
            self._emit_host("permission_settled", {"sessionId": session_id, "toolCallId": call_id})

    def answer_permission(self, session_id: str, call_id: str, option_id: str | None) -> bool:
        """The user's choice (None: dismissed, which ACP calls cancelled); False if that
        request is no longer waiting (answered elsewhere, or its turn ended)."""
        waiting = self.pending_permissions.get((session_id, call_id))
        if waiting is None or waiting.answer.done():
            return False
        if option_id is None:
            waiting.answer.set_result({"outcome": {"outcome": "cancelled"}})
        else:
            waiting.answer.set_result({"outcome": {"outcome": "selected", "optionId": option_id}})
        return True

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
        client.on_request(self._on_request)
        self.client = client
        self._started_at = time.monotonic()
        self.initialize_result = await client.request(
            Method.INITIALIZE,
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientInfo": {"name": "acp-session-host-desktop", "version": VERSION},
                # Our own clients want the extension notifications (_session/state, ...).
                "clientCapabilities": {"_meta": {EXTENSION_KEY: {"notifications": True}}},
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
            for waiting in list(self.pending_permissions.values()):
                waiting.answer.cancel()  # nobody is left to answer to
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
        result = await self.client.request(method, params)
        self._observe_result(method, params, result)
        return result

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
            await asyncio.wait_for(client.request(Method.SHUTDOWN, {}), 5.0)
        await client.close(timeout=timeout)
