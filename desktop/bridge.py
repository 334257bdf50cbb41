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
import os
import threading
import webbrowser
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from desktop import mcp_servers, render, sessions
from desktop.bridge_compose import ComposeCalls, ComposeInput, prompt_content
from desktop.bridge_review import ReviewCalls, coloured
from desktop.bridge_steer import SteerCalls
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
OUTPUT_COLOUR_LIMIT = 64 * 1024  # a stored command's output shown in colour up to this size
OUTPUT_PAGE = 256 * 1024
MAX_DRAFT = 1_000_000
MAX_PROMPT = 1_000_000
MAX_AGENT_NAME = 200

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
    message = exc.message
    # "Invalid input: Invalid params: ..." said the same thing twice.
    for prefix in ("Invalid params: ", "Invalid params:"):
        if exc.code == ErrorCode.INVALID_PARAMS and message.startswith(prefix):
            message = message[len(prefix) :].strip() or message
    return error(exc.code, message, TITLES.get(exc.code, "Sidecar error"))


def _folder(cwd: Any) -> str | dict[str, Any]:
    """The working directory the user typed: `~` expanded, made absolute, and checked, so
    a mistake gets one clear message."""
    if not isinstance(cwd, str) or not cwd.strip():
        return error("invalid_input", "Choose a working directory.", "Working directory")
    path = os.path.abspath(os.path.expanduser(cwd.strip()))
    if not os.path.exists(path):
        return error("invalid_input", f"There is no folder {path}.", "Working directory")
    if not os.path.isdir(path):
        return error("invalid_input", f"{path} is a file, not a folder.", "Working directory")
    return path


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


def _worktree(value: Any) -> bool | dict[str, str] | str | None:
    """`_meta.worktree` from the form (None: not asked for), or what is wrong with it."""
    if value is None or value is False:
        return None
    if value is True:
        return True
    if not isinstance(value, dict) or set(value) - {"branch", "base"}:
        return "worktree must be true or {branch?, base?}"
    place: dict[str, str] = {}
    for key in ("branch", "base"):
        given = value.get(key)
        if given is None or given == "":
            continue
        if not isinstance(given, str) or len(given) > MAX_AGENT_NAME:
            return f"worktree.{key} must be text (at most {MAX_AGENT_NAME} characters)"
        place[key] = given.strip()
    return place or True


class Bridge(ReviewCalls, SteerCalls, ComposeCalls):
    """The js_api of one page (one per window, so a page can say which one it is); the
    worktree and review calls are ReviewCalls', the queue, edit, plan and notification
    calls SteerCalls', `@` completion and stored images ComposeCalls'."""

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

    def _start_turn(self, method: str, params: dict[str, Any]) -> Any:
        return self._run(_start_prompt(self._app, params, method))

    # ---- page lifecycle -----------------------------------------------------------------

    def page_ready(self) -> dict[str, Any]:
        """The page is listening for pushes; what it needs before its first requests."""
        auto_resumed = self._app.attach_page(self._page_id)
        return {
            "pageId": self._page_id,
            "defaultCwd": self._app.options.default_cwd,
            "modes": available_modes(),
            "backends": [backend.value for backend in Backend],
            "sidecar": self.sidecar_info(),
            "memory": self._app.memory,
            "providerProblem": self._provider_problem(),
            "settings": self._app.settings.snapshot(),
            "autoResume": self._app.options.auto_resume,
            "autoResumed": auto_resumed,
        }

    def provider_problem(self) -> str | None:
        """What the running sidecar said about its provider at start (None: nothing)."""
        return self._provider_problem()

    def _provider_problem(self) -> str | None:
        meta = (self._host.initialize_result or {}).get("_meta") or {}
        problem = meta.get("providerProblem")
        return problem if isinstance(problem, str) else None

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

    def list_sessions(self, query: str | None = None, archived: bool = False) -> Any:
        """Sessions by last activity; `query` searches titles and transcripts (sidecar FTS),
        `archived` lists the archived ones."""
        if query is not None and (not isinstance(query, str) or len(query) > 1000):
            return error("invalid_input", "query must be text (at most 1000 characters)")
        return self._run(
            sessions.list_all(self._host, (query or "").strip() or None, archived is True)
        )

    def list_page(self, cursor: str | None = None) -> Any:
        """One page of the session list and the next page's cursor (None: the last)."""
        if cursor is not None and (not isinstance(cursor, str) or not 0 < len(cursor) <= 1000):
            return error("invalid_input", "cursor must be the nextCursor of a page (text)")
        return self._run(sessions.list_page(self._host, cursor))

    def archive(self, session_id: str, archived: bool = True) -> Any:
        try:
            params = {
                "sessionId": _text(session_id, "sessionId"),
                "archived": _flag(archived, "archived"),
            }
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._request(Method.ARCHIVE, params)

    def rename(self, session_id: str, title: str) -> Any:
        try:
            params = {"sessionId": _text(session_id, "sessionId"), "title": _text(title, "title")}
        except BadInput as exc:
            return error("invalid_input", str(exc), "Title")
        return self._request(Method.RENAME, params)

    def export_session(self, session_id: str, fmt: str = "jsonl") -> Any:
        """Write the session to a file in a folder the user picks (JSON Lines to import
        later, or Markdown to read); `{path, ...}`, or `{cancelled: true}`."""
        if fmt not in ("jsonl", "markdown"):
            return error("invalid_input", "format must be jsonl or markdown")
        picked = self.pick_folder(self._app.options.default_cwd)
        if "error" in picked:
            return picked
        if not picked["folder"]:
            return {"cancelled": True}
        try:
            params = {
                "sessionId": _text(session_id, "sessionId"),
                "format": fmt,
                "directory": picked["folder"],
            }
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._request(Method.EXPORT, params)

    def import_session(self) -> Any:
        """A new (closed) session from a JSON Lines export the user picks."""
        import webview

        try:
            chosen = self._app.windows.current.create_file_dialog(
                webview.FileDialog.OPEN,
                directory=self._app.options.default_cwd,
                file_types=("Session exports (*.jsonl)", "All files (*.*)"),
            )
        except (RuntimeError, OSError) as exc:
            return error("dialog", str(exc), "No file dialog")
        if not chosen:
            return {"cancelled": True}
        return self._request(Method.IMPORT, {"path": str(chosen[0])})

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
        return self._run(_rendered_page(self._host, sid, offset, limit))

    def output(self, session_id: str, tool_call_id: str, offset: int = 0) -> Any:
        """A page of a command's whole output (`_session/output`) with its HTML."""
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            return error("invalid_input", "offset must be a non-negative integer")
        try:
            params = {
                "sessionId": _text(session_id, "sessionId"),
                "toolCallId": _text(tool_call_id, "toolCallId"),
                "offset": offset,
                "limit": OUTPUT_PAGE,
            }
        except BadInput as exc:
            return error("invalid_input", str(exc))
        page = self._request(Method.OUTPUT, params)
        if "error" in page:
            return page
        return {**page, "html": render.ansi_html(page["text"])}

    def live_calls(self, session_id: str) -> Any:
        """The session's running tool calls with their output so far (after a rebuild)."""
        return self._app.live.running(str(session_id))

    # ---- what a page keeps across Rebuild UI --------------------------------------------

    def save_draft(self, session_id: str, text: str) -> Any:
        if not isinstance(session_id, str) or not isinstance(text, str) or len(text) > MAX_DRAFT:
            return error("invalid_input", "a draft is a session id and its text")
        drafts = self._app.memory["drafts"]
        if text:
            drafts[session_id] = text
        else:
            drafts.pop(session_id, None)
        return {"ok": True}

    def remember(self, selected: str | None, scroll: dict[str, Any], focus: str | None) -> Any:
        """The page's view (selected session, scroll positions, focused control)."""
        memory = self._app.memory
        memory["selected"] = selected if isinstance(selected, str) else None
        if isinstance(scroll, dict):
            memory["scroll"] = {
                str(k): v for k, v in scroll.items() if isinstance(v, (int, float)) and v >= 0
            }
        memory["focus"] = focus if isinstance(focus, str) and len(focus) < 200 else None
        return {"ok": True}

    # ---- preferences and the folder picker ---------------------------------------------

    def set_theme(self, theme: str) -> Any:
        try:
            return self._app.settings.set_theme(theme)
        except ValueError as exc:
            return error("invalid_input", str(exc))

    def pick_folder(self, start: str = "") -> Any:
        """The system's folder dialog; the chosen folder, or null when cancelled."""
        directory = os.path.expanduser(start.strip()) if isinstance(start, str) else ""
        if not os.path.isdir(directory):
            directory = self._app.options.default_cwd
        import webview

        try:
            chosen = self._app.windows.current.create_file_dialog(
                webview.FileDialog.FOLDER, directory=directory
            )
        except (RuntimeError, OSError) as exc:
            return error("dialog", str(exc), "No folder dialog")
        if not chosen:
            return {"folder": None}
        return {"folder": str(chosen[0])}

    def markdown(self, text: str) -> Any:
        """Agent text being streamed, rendered as the stored copy will be (the page asks at
        most a few times a second)."""
        if not isinstance(text, str) or len(text) > MAX_DRAFT:
            return error("invalid_input", "text must be a string of at most 1 MB")
        return {"html": render.markdown_html(text)}

    # ---- links and the clipboard --------------------------------------------------------

    def open_link(self, url: str) -> Any:
        """Open a link from agent text in the system browser (http, https, mailto only);
        the app itself never navigates."""
        if not render.safe_link(url):
            return error(
                "invalid_input", "Only http, https and mailto links open.", "Link not opened"
            )
        try:
            opened = webbrowser.open(url, new=2)
        except webbrowser.Error as exc:
            return error("no_browser", str(exc), "Link not opened")
        if not opened:
            return error("no_browser", f"No web browser could open {url}", "Link not opened")
        return {"ok": True}

    def copy_text(self, text: str) -> Any:
        """Put `text` on the system clipboard (a code block's Copy button)."""
        if not isinstance(text, str):
            return error("invalid_input", "text must be a string")

        def put() -> None:
            from qtpy.QtWidgets import QApplication

            clipboard = QApplication.clipboard()
            if clipboard is not None:
                clipboard.setText(text)

        try:
            self._app.windows.gui.call(put)
        except (RuntimeError, TimeoutError) as exc:
            return error("clipboard", str(exc), "Not copied")
        return {"ok": True}

    def new_session(
        self,
        cwd: str,
        mode: str,
        backend: str,
        title: str,
        servers: list[dict[str, str]] | None = None,
        agent: str | None = None,
        worktree: bool | dict[str, str] | None = None,
    ) -> Any:
        """A session in `cwd`; `agent` names who runs it (a `_session/agents` name; none:
        the sidecar's default, our builtin loop); `worktree` (true, or `{branch?, base?}`)
        makes it in a new git worktree of the cwd's repository."""
        folder = _folder(cwd)
        if isinstance(folder, dict):
            return folder
        cwd = folder
        meta: dict[str, Any] = {"mode": mode or "craft", "backend": backend or "pipe"}
        if isinstance(title, str) and title.strip():
            meta["title"] = title.strip()
        if agent is not None:
            if not isinstance(agent, str) or not agent.strip() or len(agent) > MAX_AGENT_NAME:
                return error("invalid_input", "agent must be an agent's name", "Agent")
            meta["agent"] = agent.strip()
        place = _worktree(worktree)
        if isinstance(place, str):
            return error("invalid_input", place, "Worktree")
        if place is not None:
            meta["worktree"] = place
        try:
            mcp = [
                mcp_servers.to_acp(s.get("name", ""), s.get("target", "")) for s in servers or []
            ]
        except (mcp_servers.BadServer, AttributeError) as exc:
            return error("invalid_input", str(exc), "MCP server")
        params = {"cwd": cwd, "mcpServers": mcp, "_meta": meta}
        result = self._request(Method.SESSION_NEW, params)
        if "error" in result:
            return result
        self._app.settings.add_recent(cwd)
        return result["_meta"]

    def agents(self) -> Any:
        """The agents a session can run (`_session/agents`): name, command, whether it is
        installed (else how to install it), where it was defined."""
        result = self._request(Method.AGENTS, {})
        return result if "error" in result else result.get("agents", [])

    def prompt(self, session_id: str, text: str, attachments: list[Any] | None = None) -> Any:
        """Start a turn; answers once it is refused, finished, or clearly running.
        `attachments`: `resource_link` and `image` blocks sent beside the text.

        A turn can run for minutes, so the page is not kept waiting: its progress
        arrives as pushed notifications, and a late failure as a `prompt_failed` push.
        """
        try:
            params = {
                "sessionId": _text(session_id, "sessionId"),
                "prompt": prompt_content(text, attachments, MAX_PROMPT),
            }
        except (BadInput, ComposeInput) as exc:
            return error("invalid_input", str(exc))
        return self._run(_start_prompt(self._app, params))

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

    def config_options(self, session_id: str) -> Any:
        """The session's ACP config options as the sidecar last said (the model picker's
        choices); an empty list for a session that is not live here."""
        return self._host.config_options.get(session_id, [])

    def fork(self, session_id: str, turn: int | None = None) -> Any:
        """A new session from this one (before `turn`, or all of it), in the same folder."""
        try:
            sid = _text(session_id, "sessionId")
            which = None if turn is None else _turn(turn)
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return self._run(sessions.fork(self._host, sid, which))

    # ---- changes and rewind -------------------------------------------------------------

    def changes(self, session_id: str, turn: int | None = None) -> Any:
        """What a turn changed (default: the last): files, +/- counts, the unified diff."""
        try:
            sid = _text(session_id, "sessionId")
            which = None if turn is None else _turn(turn)
        except BadInput as exc:
            return error("invalid_input", str(exc))
        return coloured(self._run(sessions.changes(self._host, sid, which)))

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


async def _rendered_page(
    host: SidecarHost, session_id: str, offset: int | None, limit: int
) -> dict[str, Any]:
    """A transcript page with `html` for agent text and tool output. A command's stored
    result is plain text; its spooled output, as printed, gives the colours back when it is
    small enough (the card offers the whole output otherwise)."""
    page = await sessions.messages_page(host, session_id, offset, limit)
    entries = [render.with_html(m) for m in page["messages"]]

    async def coloured(entry: dict[str, Any]) -> dict[str, Any]:
        if entry.get("type") != "tool_result" or entry.get("tool") != "bash":
            return entry
        params = {
            "sessionId": session_id,
            "toolCallId": entry.get("toolCallId"),
            "limit": OUTPUT_COLOUR_LIMIT,
        }
        try:
            out = await host.request(Method.OUTPUT, params)
        except RpcError:
            return entry
        whole = out.get("next", 0) >= out.get("total", 0)
        extra: dict[str, Any] = {"outputTotal": out.get("total", 0), "outputShown": whole}
        if whole:
            extra["html"] = render.ansi_html(str(out.get("text", "")))
        return {**entry, **extra}

    page["messages"] = list(await asyncio.gather(*(coloured(m) for m in entries)))
    return page


async def _start_prompt(
    app: DesktopApp, params: dict[str, Any], method: str = Method.SESSION_PROMPT
) -> dict[str, Any]:
    """`session/prompt` (or `_session/edit`, answered the same way) started: its answer if
    it came at once, else `{done: false, started: true}` and a late failure pushed."""
    session_id = params["sessionId"]
    turn = asyncio.create_task(app.host.request(method, params))
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
