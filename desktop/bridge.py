"""The js_api a page calls: each method is one sidecar request run on the host loop.

pywebview calls these on a worker thread per call, so each method submits a coroutine
to the host's loop and waits (bounded) for it. Results are plain JSON data; failures
come back as `{"error": {"code", "title", "message"}}` (JSON-RPC codes from the
sidecar, or a string code for host-side trouble) for the page's error banner.

pywebview exposes every public attribute of this object to JavaScript (recursively),
so all state is kept in underscore attributes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from desktop import mcp_servers, sessions
from desktop.client import RpcError, SidecarGone
from protocol.errors import ErrorCode
from protocol.methods import Method
from protocol.values import Backend, RewindScope, available_modes

if TYPE_CHECKING:
    from desktop.app import DesktopApp
    from desktop.host import SidecarHost

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0
PERMISSION_OPTIONS = ("allow_once", "allow_always", "reject_once", "reject_always")
PROMPT_ACCEPT_WAIT = 1.0  # a refused prompt is refused at once; longer means it is running
MAX_PAGE = 1000

TITLES: dict[int, str] = {
    ErrorCode.INVALID_PARAMS: "Invalid input",
    ErrorCode.SESSION_NOT_FOUND: "Session not found",
    ErrorCode.SESSION_BUSY: "Session busy",
    ErrorCode.RUNTIME_LIVE: "Session is live",
    ErrorCode.SESSION_NOT_LIVE: "Session not live",
    ErrorCode.INVALID_STATE: "Not possible now",
    ErrorCode.STORE_ERROR: "Storage error",
    ErrorCode.RESOURCE_EXHAUSTED: "Out of resources",
    ErrorCode.SHUTTING_DOWN: "Shutting down",
    ErrorCode.RUNTIME_FAILED: "Session failed to start",
    ErrorCode.PROVIDER_ERROR: "Model provider error",
    ErrorCode.CHECKPOINT_ERROR: "No checkpoints",
}
REWIND_SCOPES = tuple(scope.value for scope in RewindScope)


class BadInput(ValueError):
    """The page sent something that is not a valid argument (a page bug, not a user's)."""


def error(code: int | str, message: str, title: str = "Error") -> dict[str, Any]:
    return {"error": {"code": code, "title": title, "message": message}}


def rpc_error(exc: RpcError) -> dict[str, Any]:
    return error(exc.code, exc.message, TITLES.get(exc.code, "Sidecar error"))


def _turn(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput("turn must be a positive integer")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise BadInput(f"{name} must be true or false")
    return value


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{name} must be non-empty text")
    return value


class Bridge:
    """The js_api of one page (one per window, so a page can say which one it is)."""

    def __init__(self, app: DesktopApp, page_id: str) -> None:
        self._app = app
        self._page_id = page_id

    # ---- plumbing ---------------------------------------------------------------------

    @property
    def _host(self) -> SidecarHost:
        return self._app.host

    def _run(self, coro: Coroutine[Any, Any, Any], timeout: float = REQUEST_TIMEOUT) -> Any:
        if self._app.host_thread.sidecar_state == "failed":
            coro.close()
            return error(
                "sidecar_failed",
                "The sidecar keeps failing and was not restarted again; restart the app.",
                "Sidecar stopped",
            )
        try:
            return self._app.host_thread.call(coro, timeout)
        except RpcError as exc:
            return rpc_error(exc)
        except (SidecarGone, ConnectionError):
            return error(
                "sidecar_gone",
                "The sidecar is not running right now (it is being restarted). Try again.",
                "Sidecar unavailable",
            )
        except TimeoutError:
            return error("timeout", "The sidecar did not answer in time.", "No answer")

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        return self._run(self._host.request(method, params))

    # ---- page lifecycle -----------------------------------------------------------------

    def page_ready(self) -> dict[str, Any]:
        """The page is listening for pushes; what it needs before its first requests."""
        self._app.windows.attach(self._page_id)
        return {
            "pageId": self._page_id,
            "defaultCwd": self._app.options.default_cwd,
            "modes": available_modes(),
            "backends": [backend.value for backend in Backend],
            "sidecar": self.sidecar_info(),
        }

    def sidecar_info(self) -> dict[str, Any]:
        thread = self._app.host_thread
        return {
            "state": thread.sidecar_state,
            "pid": thread.host.pid,
            "restarts": thread.host.restarts,
        }

    def rebuild_ui(self) -> dict[str, Any]:
        # On its own thread: this call's answer goes to the page being replaced, and
        # must reach it before that page is destroyed.
        threading.Thread(target=self._app.windows.rebuild, name="rebuild-ui", daemon=True).start()
        return {"ok": True}

    # ---- sessions -----------------------------------------------------------------------

    def list_sessions(self) -> Any:
        return self._run(sessions.list_all(self._host))

    def status(self, session_id: str) -> Any:
        try:
            params = {"sessionId": _text(session_id, "sessionId")}
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._request(Method.STATUS, params)

    def messages(self, session_id: str, offset: int | None = None, limit: int = 50) -> Any:
        """A page of the transcript; `offset=None` means the newest page."""
        if offset is not None and (not isinstance(offset, int) or offset < 0):
            return error("invalid_input", "offset must be a non-negative integer or null")
        if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            return error("invalid_input", f"limit must be an integer in 1..{MAX_PAGE}")
        try:
            sid = _text(session_id, "sessionId")
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._run(sessions.messages_page(self._host, sid, offset, limit))

    def new_session(
        self,
        cwd: str,
        mode: str,
        backend: str,
        title: str,
        servers: list[dict[str, str]] | None = None,
    ) -> Any:
        meta = {"mode": mode or "craft", "backend": backend or "pipe"}
        if isinstance(title, str) and title.strip():
            meta["title"] = title.strip()
        try:
            mcp = [
                mcp_servers.to_acp(s.get("name", ""), s.get("target", "")) for s in servers or []
            ]
        except (mcp_servers.BadServer, AttributeError) as exc:
            return error("invalid_input", str(exc), "MCP server")
        params = {"cwd": cwd, "mcpServers": mcp, "_meta": meta}
        result = self._request(Method.SESSION_NEW, params)
        return result if "error" in result else result["_meta"]

    def prompt(self, session_id: str, text: str) -> Any:
        """Start a turn; answers once it is refused, finished, or clearly running.

        A turn can run for minutes, so the page is not kept waiting: its progress
        arrives as pushed notifications, and a late failure as a `prompt_failed` push.
        """
        try:
            params = {
                "sessionId": _text(session_id, "sessionId"),
                "prompt": [{"type": "text", "text": _text(text, "prompt")}],
            }
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._run(_start_prompt(self._app, params))

    def cancel(self, session_id: str) -> Any:
        return self._request(Method.SESSION_CANCEL, {"sessionId": session_id})

    def close(self, session_id: str) -> Any:
        result = self._request(Method.SESSION_CLOSE, {"sessionId": session_id})
        return result if "error" in result else result["_meta"]

    def resume(self, session_id: str) -> Any:
        return self._run(sessions.resume(self._host, session_id))

    def delete(self, session_id: str) -> Any:
        return self._request(Method.SESSION_DELETE, {"sessionId": session_id})

    def set_mode(self, session_id: str, mode: str) -> Any:
        return self._request(Method.SESSION_SET_MODE, {"sessionId": session_id, "modeId": mode})

    def set_config(self, session_id: str, config_id: str, value: str) -> Any:
        """A session setting (approval, sandbox, model, mode) by its ACP config option id."""
        params = {"sessionId": session_id, "configId": config_id, "value": value}
        return self._request(Method.SESSION_SET_CONFIG_OPTION, params)

    # ---- changes and rewind -------------------------------------------------------------

    def changes(self, session_id: str, turn: int | None = None) -> Any:
        """What a turn changed (default: the last): files, +/- counts, the unified diff."""
        try:
            sid = _text(session_id, "sessionId")
            which = None if turn is None else _turn(turn)
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._run(sessions.changes(self._host, sid, which))

    def rewind(
        self,
        session_id: str,
        turn: int | None,
        scope: str,
        force: bool = False,
        dry_run: bool = False,
    ) -> Any:
        """Code, conversation or both back to before `turn` (None: undo the last code
        rewind); `dry_run` answers what would change (the page's confirmation)."""
        try:
            sid = _text(session_id, "sessionId")
            which = None if turn is None else _turn(turn)
            if scope not in REWIND_SCOPES:
                raise BadInput(f"scope must be one of {', '.join(REWIND_SCOPES)}")
            forced, dry = _flag(force, "force"), _flag(dry_run, "dryRun")
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._run(sessions.rewind(self._host, sid, which, scope, force=forced, dry_run=dry))

    # ---- MCP servers ---------------------------------------------------------------------

    def saved_mcp_servers(self) -> list[dict[str, str]]:
        return mcp_servers.load_saved()

    def save_mcp_server(self, name: str, target: str) -> Any:
        try:
            return mcp_servers.save(name, target)
        except (mcp_servers.BadServer, OSError) as exc:
            return error("invalid_input", str(exc), "MCP server")

    def reconnect_mcp(self, session_id: str, name: str) -> Any:
        return self._request(Method.MCP_RECONNECT, {"sessionId": session_id, "name": name})

    # ---- consent ------------------------------------------------------------------------

    def pending_permissions(self) -> list[dict[str, Any]]:
        """Every request waiting for the user (a rebuilt page shows the same cards)."""
        return [waiting.params for waiting in self._host.pending_permissions.values()]

    def answer_permission(self, session_id: str, call_id: str, option_id: str | None) -> Any:
        if option_id is not None and option_id not in PERMISSION_OPTIONS:
            return error("invalid_input", f"unknown option {option_id!r}")

        async def answer() -> bool:
            return self._host.answer_permission(session_id, call_id, option_id)

        answered = self._run(answer())
        if answered is False:
            return error("stale", "That request is no longer waiting.", "Already settled")
        return answered

    def permissions(self, session_id: str) -> Any:
        return self._request(Method.PERMISSIONS, {"sessionId": session_id})

    def set_rules(self, session_id: str, rules: list[dict[str, Any]]) -> Any:
        return self._request(Method.SET_PERMISSIONS, {"sessionId": session_id, "rules": rules})


# ---- coroutines run on the host loop -------------------------------------------------


async def _start_prompt(app: DesktopApp, params: dict[str, Any]) -> dict[str, Any]:
    session_id = params["sessionId"]
    turn = asyncio.create_task(app.host.request(Method.SESSION_PROMPT, params))
    done, _ = await asyncio.wait({turn}, timeout=PROMPT_ACCEPT_WAIT)
    if turn in done:
        result: dict[str, Any] = turn.result()  # raises the sidecar's refusal
        return {"done": True, **result}

    def report(task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, SidecarGone):
            return  # the page already shows the sidecar banner
        if isinstance(exc, RpcError):
            app.push_bridge_event("prompt_failed", {"sessionId": session_id, **rpc_error(exc)})
        elif exc is not None:
            log.error("prompt for %s failed: %r", session_id, exc)
            app.push_bridge_event(
                "prompt_failed",
                {"sessionId": session_id, **error("failed", str(exc), "Turn failed")},
            )

    turn.add_done_callback(report)
    return {"done": False, "started": True}
