"""A scripted ACP agent over stdio, built on the official `acp` SDK's agent side.

Tests of the sidecar run it as a session's external engine: each prompt line is a
directive (say, write, run, crash, garbage, ...) so a test can make the agent do every
normal thing and every fault on cue. One process serves any number of sessions, each
with its own id, history and running turn (a shared agent process: `read-as` asks the
client for another session's id, `ignore-cancel` keeps one session's turn going after
its cancel while the others run). Environment variables pick process-level faults
(SCRIPTED_AGENT_FAIL, ..._IGNORE_EOF, ..._IGNORE_TERM), the advertised session
capabilities (..._CAPS), its commands announced before it answers session/new
(..._COMMANDS_ON_NEW), a log of what the host sent (..._LOG) and persistence
(..._STATE). Run as `python tests/agents/scripted_agent.py`; stdlib + `acp` only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from acp import (
    PROTOCOL_VERSION,
    Client,
    RequestError,
    run_agent,
    stdio_streams,
    text_block,
    tool_content,
    tool_diff_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.connection import StreamDirection, StreamEvent
from acp.helpers import start_tool_call, update_available_commands, update_current_mode
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    AgentPlanUpdate,
    AllowedOutcome,
    AuthenticateResponse,
    AvailableCommand,
    AvailableCommandInput,
    ClientCapabilities,
    CloseSessionResponse,
    ConfigOptionUpdate,
    ContentToolCallContent,
    FileEditToolCallContent,
    ForkSessionResponse,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PlanEntry,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
    TerminalToolCallContent,
    ToolCallLocation,
    ToolCallUpdate,
    ToolKind,
    UnstructuredCommandInput,
    Usage,
    UsageUpdate,
)

T = TypeVar("T")
McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None
ToolContent = list[ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent]

ALL_CAPS = ("load", "resume", "list", "fork", "close", "image", "embedded")
DEFAULT_CAPS = "load,resume,close"
MODES = ("default", "plan")
MODELS = ("fast", "smart")
# usage_update carries context-window use (used/size), not in/out tokens: `usage IN OUT`
# reports used = IN + OUT of this fixed window, and the exact split in PromptResponse.usage.
CONTEXT_WINDOW = 200_000
ALLOW_IDS = ("yes-once", "yes-always")
PERMISSION_OPTIONS = [
    PermissionOption(option_id="yes-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="yes-always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="no-once", name="Reject once", kind="reject_once"),
    PermissionOption(option_id="no-always", name="Always reject", kind="reject_always"),
]
STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
DIRECTIVES = frozenset(
    "say think plan plan-many usage commands write shell-write read run sleep wait-cancel block crash"
    " garbage"
    " bigline unknown-request other-session unannounced-permission daemon exit-after-reply stop"
    " ignore-cancel read-as".split()
)


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _die(line: str, code: int) -> None:
    """Exit at once, as a real agent that crashes does: no reply, no cleanup."""
    _stderr(line)
    os._exit(code)


async def _forever() -> None:
    await asyncio.Event().wait()


@dataclass
class Turn:
    """One running prompt: its cancel signal and the agent texts it sent (for history)."""

    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    agent_texts: list[str] = field(default_factory=list)
    usage: Usage | None = None


@dataclass
class Session:
    id: str
    cwd: str
    history: list[dict[str, str]] = field(default_factory=list)
    mode: str = "default"
    model: str = "fast"
    next_call: int = 1
    turn: Turn | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.id,
            "cwd": self.cwd,
            "history": self.history,
            "mode": self.mode,
            "model": self.model,
            "nextCall": self.next_call,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(
            id=data["sessionId"],
            cwd=data["cwd"],
            history=list(data.get("history", [])),
            mode=data.get("mode", "default"),
            model=data.get("model", "fast"),
            next_call=int(data.get("nextCall", 1)),
        )


class Log:
    """SCRIPTED_AGENT_LOG: one JSON line per message received, flushed before it is handled."""

    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None
        self._sent: dict[Any, str] = {}

    def write(self, entry: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(entry) + "\n")
            self._file.flush()

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self._sent[message["id"]] = message["method"]
            return
        if "method" in message:
            self.write({"method": message["method"], "params": message.get("params")})
        elif "id" in message:
            entry: dict[str, Any] = {"response_to": self._sent.pop(message["id"], None)}
            if "error" in message:
                entry["error"] = message["error"]
            else:
                entry["result"] = message.get("result")
            self.write(entry)


class Store:
    """SCRIPTED_AGENT_STATE: sessions as DIR/<sessionId>.json; without it, memory only."""

    def __init__(self, directory: str | None) -> None:
        self._dir = Path(directory) if directory else None
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)

    def save(self, session: Session) -> None:
        if self._dir is None:
            return
        target = self._dir / f"{session.id}.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(session.to_json()), encoding="utf-8")
        tmp.replace(target)

    def load(self, session_id: str) -> Session | None:
        if self._dir is None or "/" in session_id or session_id.startswith("."):
            return None
        try:
            data = json.loads((self._dir / f"{session_id}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return Session.from_json(data)

    def all(self) -> list[Session]:
        if self._dir is None:
            return []
        return [
            Session.from_json(json.loads(p.read_text(encoding="utf-8")))
            for p in sorted(self._dir.glob("*.json"))
        ]


def _caps_from_env() -> set[str]:
    raw = os.environ.get("SCRIPTED_AGENT_CAPS", DEFAULT_CAPS)
    caps = {c.strip() for c in raw.split(",") if c.strip()}
    unknown = caps - set(ALL_CAPS)
    if unknown:
        _stderr(f"scripted agent: unknown SCRIPTED_AGENT_CAPS {sorted(unknown)}")
    return caps & set(ALL_CAPS)


def _modes(session: Session) -> SessionModeState:
    return SessionModeState(
        current_mode_id=session.mode,
        available_modes=[SessionMode(id=m, name=m.capitalize()) for m in MODES],
    )


def _config(session: Session) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
    return [
        SessionConfigOptionSelect(
            id="model",
            name="Model",
            category="model",
            type="select",
            current_value=session.model,
            options=[SessionConfigSelectOption(value=m, name=m.capitalize()) for m in MODELS],
        )
    ]


def _read_or_none(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


class ScriptedAgent:
    """The ACP agent: lifecycle methods plus a prompt interpreter (see the module doc)."""

    def __init__(self, writer: asyncio.StreamWriter, log: Log, store: Store) -> None:
        self._writer = writer
        self._log = log
        self._store = store
        self._caps = _caps_from_env()
        self._fail = os.environ.get("SCRIPTED_AGENT_FAIL", "")
        self._conn: Any = None
        self._client_caps = ClientCapabilities()
        self._sessions: dict[str, Session] = {}
        self._prompt_ids: dict[Any, str] = {}
        self._exit_after_reply: set[str] = set()
        self._exiting: asyncio.Task[None] | None = None

    # -- wiring --------------------------------------------------------------------------

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    def observe(self, event: StreamEvent) -> None:
        """Log traffic, and exit once a prompt marked `exit-after-reply` has been answered."""
        self._log.observe(event)
        message = event.message
        if event.direction is StreamDirection.INCOMING:
            if message.get("method") == "session/prompt" and "id" in message:
                params = message.get("params") or {}
                self._prompt_ids[message["id"]] = str(params.get("sessionId"))
            return
        if "method" not in message and "id" in message:
            session_id = self._prompt_ids.pop(message["id"], None)
            if session_id in self._exit_after_reply and self._exiting is None:
                self._exiting = asyncio.get_running_loop().create_task(self._exit_when_flushed())

    async def _exit_when_flushed(self) -> None:
        transport = self._writer.transport
        while transport.get_write_buffer_size() > 0:
            await asyncio.sleep(0.01)
        _die("scripted agent: exiting after reply", 0)

    # -- lifecycle -----------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        if self._fail == "initialize-exit":
            _die("scripted agent: failing at initialize", 3)
        if self._fail == "initialize-hang":
            await _forever()
        self._client_caps = client_capabilities or ClientCapabilities()
        caps = self._caps
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session="load" in caps,
                prompt_capabilities=PromptCapabilities(
                    image="image" in caps, embedded_context="embedded" in caps
                ),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities() if "list" in caps else None,
                    fork=SessionForkCapabilities() if "fork" in caps else None,
                    resume=SessionResumeCapabilities() if "resume" in caps else None,
                    close=SessionCloseCapabilities() if "close" in caps else None,
                ),
            ),
            agent_info=Implementation(name="scripted-agent", version="1.0"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        return AuthenticateResponse()

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        if self._fail == "new-hang":
            await _forever()
        if self._fail == "new-exit":
            _die("scripted agent: failing at session/new", 4)
        session = Session(id=f"sess-{uuid.uuid4().hex[:12]}", cwd=cwd)
        self._sessions[session.id] = session
        self._store.save(session)
        if os.environ.get("SCRIPTED_AGENT_COMMANDS_ON_NEW") == "1":
            # Before the answer (real agents do): the client knows no such id yet.
            await self._send_commands(session)
        return NewSessionResponse(
            session_id=session.id, modes=_modes(session), config_options=_config(session)
        )

    def _require(self, cap: str, method: str) -> None:
        if cap not in self._caps:
            raise RequestError.method_not_found(method)

    def _find(self, session_id: str) -> Session:
        session = self._sessions.get(session_id) or self._store.load(session_id)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        self._sessions[session_id] = session
        return session

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: McpServers = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        self._require("load", "session/load")
        session = self._find(session_id)
        session.cwd = cwd
        for entry in session.history:
            make = (
                update_user_message_text if entry["role"] == "user" else update_agent_message_text
            )
            await self._conn.session_update(session.id, make(entry["text"]))
        return LoadSessionResponse(modes=_modes(session), config_options=_config(session))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        self._require("resume", "session/resume")
        session = self._find(session_id)
        session.cwd = cwd
        return ResumeSessionResponse(modes=_modes(session), config_options=_config(session))

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: McpServers = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        self._require("fork", "session/fork")
        source = self._find(session_id)
        fork = Session(
            id=f"sess-{uuid.uuid4().hex[:12]}",
            cwd=cwd,
            history=[dict(e) for e in source.history],
            mode=source.mode,
            model=source.model,
            next_call=source.next_call,
        )
        self._sessions[fork.id] = fork
        self._store.save(fork)
        return ForkSessionResponse(
            session_id=fork.id, modes=_modes(fork), config_options=_config(fork)
        )

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        self._require("list", "session/list")
        known = {s.id: s for s in self._store.all()}
        known.update(self._sessions)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(session_id=s.id, cwd=s.cwd)
                for s in known.values()
                if cwd is None or s.cwd == cwd
            ]
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self._require("close", "session/close")
        session = self._find(session_id)
        if session.turn is not None:
            session.turn.cancelled.set()
        del self._sessions[session_id]
        return CloseSessionResponse()

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._find(session_id)
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": mode_id, "available": list(MODES)})
        session.mode = mode_id
        self._store.save(session)
        await self._conn.session_update(session.id, update_current_mode(mode_id))
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._find(session_id)
        if config_id != "model" or value not in MODELS:
            raise RequestError.invalid_params({"configId": config_id, "value": value})
        session.model = str(value)
        self._store.save(session)
        options = _config(session)
        await self._conn.session_update(
            session.id,
            ConfigOptionUpdate(session_update="config_option_update", config_options=options),
        )
        return SetSessionConfigOptionResponse(config_options=options)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.turn is not None:
            session.turn.cancelled.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # -- prompt --------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        session = self._find(session_id)
        if session.turn is not None:
            raise RequestError.invalid_request({"details": "a prompt is already running"})
        text = "".join(getattr(block, "text", "") for block in prompt)
        turn = Turn()
        session.turn = turn
        try:
            stop = await self._run_script(session, turn, text)
        finally:
            session.turn = None
            session.history.append({"role": "user", "text": text})
            session.history.extend({"role": "agent", "text": t} for t in turn.agent_texts)
            self._store.save(session)
        if stop not in STOP_REASONS:
            # An unknown stopReason goes out as-is: a fault for the host to survive.
            return {"stopReason": stop}
        return PromptResponse(stop_reason=stop, usage=turn.usage)  # type: ignore[arg-type]

    async def _run_script(self, session: Session, turn: Turn, text: str) -> str:
        lines = [line for line in text.splitlines() if line.strip()]
        if not any(line.split(" ", 1)[0] in DIRECTIVES for line in lines):
            await self._say(session, turn, f"echo: {text}")
            return "end_turn"
        for line in lines:
            word, _, rest = line.partition(" ")
            if word not in DIRECTIVES:
                await self._say(session, turn, f"echo: {line}")
                stop = None
            else:
                handler = getattr(self, "_do_" + word.replace("-", "_"))
                try:
                    stop = cast("str | None", await handler(session, turn, rest))
                except (ValueError, IndexError):
                    await self._say(session, turn, f"bad directive: {line}")
                    stop = None
            if turn.cancelled.is_set():
                return "cancelled"
            if stop is not None:
                return stop
        return "end_turn"

    async def _update(self, session: Session, update: Any) -> None:
        await self._conn.session_update(session.id, update)

    async def _say(self, session: Session, turn: Turn, text: str) -> None:
        await self._update(session, update_agent_message_text(text))
        turn.agent_texts.append(text)

    async def _until_cancel(self, turn: Turn, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """Run `awaitable` unless the turn is cancelled first: (finished, result)."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(turn.cancelled.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            work.cancel()
            raise
        finally:
            stop.cancel()
        if work.done():
            return True, work.result()
        work.cancel()
        return False, None

    def _path(self, session: Session, arg: str) -> str:
        return os.path.normpath(os.path.join(session.cwd, os.path.expanduser(arg)))

    def _call_id(self, session: Session) -> str:
        call_id = f"call-{session.next_call}"
        session.next_call += 1
        return call_id

    async def _fail_call(self, session: Session, call_id: str, message: str) -> None:
        await self._update(
            session,
            update_tool_call(call_id, status="failed", content=[tool_content(text_block(message))]),
        )

    # -- directives: talk ----------------------------------------------------------------

    async def _do_say(self, session: Session, turn: Turn, rest: str) -> None:
        await self._say(session, turn, rest)

    async def _do_think(self, session: Session, turn: Turn, rest: str) -> None:
        await self._update(session, update_agent_thought_text(rest))

    async def _do_plan(self, session: Session, turn: Turn, rest: str) -> None:
        items = [item.strip() for item in rest.split("|") if item.strip()]
        entries = [
            PlanEntry(
                content=item, priority="medium", status="in_progress" if i == 0 else "pending"
            )
            for i, item in enumerate(items)
        ]
        await self._update(session, AgentPlanUpdate(session_update="plan", entries=entries))

    async def _do_plan_many(self, session: Session, turn: Turn, rest: str) -> None:
        """`plan-many N [CHARS]`: a plan of N entries, the first CHARS characters long."""
        count, *size = (int(n) for n in rest.split()[:2])
        entries = [
            PlanEntry(
                content=("x" * size[0]) if i == 0 and size else f"step {i}",
                priority="low",
                status="pending",
            )
            for i in range(count)
        ]
        await self._update(session, AgentPlanUpdate(session_update="plan", entries=entries))

    async def _do_usage(self, session: Session, turn: Turn, rest: str) -> None:
        tokens_in, tokens_out = (int(n) for n in rest.split()[:2])
        total = tokens_in + tokens_out
        turn.usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=total)
        await self._update(
            session, UsageUpdate(session_update="usage_update", used=total, size=CONTEXT_WINDOW)
        )

    async def _do_commands(self, session: Session, turn: Turn, rest: str) -> None:
        await self._send_commands(session)

    async def _send_commands(self, session: Session) -> None:
        hello = AvailableCommand(
            name="hello",
            description="Say hello",
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint="name")),
        )
        bye = AvailableCommand(name="bye", description="Say goodbye")
        await self._update(session, update_available_commands([hello, bye]))

    async def _do_stop(self, session: Session, turn: Turn, rest: str) -> str:
        return rest.strip() or "end_turn"

    # -- directives: tools ---------------------------------------------------------------

    async def _ask(self, session: Session, call: ToolCallUpdate) -> str | None:
        """The chosen optionId, or None when the client answered `cancelled`."""
        answer = await self._conn.request_permission(
            session_id=session.id, tool_call=call, options=PERMISSION_OPTIONS
        )
        if isinstance(answer.outcome, AllowedOutcome):
            return answer.outcome.option_id
        return None

    async def _do_write(self, session: Session, turn: Turn, rest: str) -> None:
        await self._write(session, rest, shell=False)

    async def _do_shell_write(self, session: Session, turn: Turn, rest: str) -> None:
        await self._write(session, rest, shell=True)

    async def _write(self, session: Session, rest: str, *, shell: bool) -> None:
        arg, _, text = rest.partition(" ")
        path = self._path(session, arg)
        call_id = self._call_id(session)
        kind: ToolKind = "execute" if shell else "edit"
        title = f"echo > {arg}" if shell else f"Write {arg}"
        diff: ToolContent = [tool_diff_content(path, text, _read_or_none(path))]
        where = [ToolCallLocation(path=path)]
        await self._update(
            session,
            start_tool_call(
                call_id,
                title,
                kind=kind,
                status="pending",
                content=diff,
                locations=where,
                raw_input={"path": path, "content": text},
            ),
        )
        call = ToolCallUpdate(
            tool_call_id=call_id,
            title=title,
            kind=kind,
            status="pending",
            content=diff,
            locations=where,
        )
        try:
            choice = await self._ask(session, call)
        except RequestError as exc:
            await self._fail_call(session, call_id, str(exc))
            return
        if choice not in ALLOW_IDS:
            await self._fail_call(session, call_id, "rejected")
            return
        await self._update(session, update_tool_call(call_id, status="in_progress"))
        error = self._own_write(path, text) if shell else await self._fs_write(session, path, text)
        if error is not None:
            await self._fail_call(session, call_id, error)
            return
        await self._update(session, update_tool_call(call_id, status="completed"))

    async def _fs_write(self, session: Session, path: str, text: str) -> str | None:
        fs = self._client_caps.fs
        if fs is None or not fs.write_text_file:
            return self._own_write(path, text)
        try:
            await self._conn.write_text_file(session_id=session.id, path=path, content=text)
        except RequestError as exc:
            return str(exc)
        return None

    def _own_write(self, path: str, text: str) -> str | None:
        """The agent's own open(): what a sandbox refuses shows up as the OSError's text."""
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            return str(exc)
        return None

    async def _do_read(self, session: Session, turn: Turn, rest: str) -> None:
        arg = rest.strip()
        path = self._path(session, arg)
        call_id = self._call_id(session)
        await self._update(
            session,
            start_tool_call(
                call_id,
                f"Read {arg}",
                kind="read",
                status="pending",
                locations=[ToolCallLocation(path=path)],
                raw_input={"path": path},
            ),
        )
        content, error = await self._read(session, path)
        if error is not None:
            await self._fail_call(session, call_id, error)
            await self._say(session, turn, f"read failed: {error}")
            return
        await self._update(
            session,
            update_tool_call(
                call_id, status="completed", content=[tool_content(text_block(content))]
            ),
        )
        await self._say(session, turn, f"read: {content}")

    async def _read(self, session: Session, path: str) -> tuple[str, str | None]:
        fs = self._client_caps.fs
        if fs is not None and fs.read_text_file:
            try:
                answer = await self._conn.read_text_file(session_id=session.id, path=path)
            except RequestError as exc:
                return "", str(exc)
            return answer.content, None
        try:
            with open(path, encoding="utf-8") as f:
                return f.read(), None
        except (OSError, UnicodeDecodeError) as exc:
            return "", str(exc)

    async def _do_run(self, session: Session, turn: Turn, rest: str) -> None:
        command = rest.strip()
        call_id = self._call_id(session)
        await self._update(
            session,
            start_tool_call(
                call_id,
                f"Run {command}",
                kind="execute",
                status="pending",
                raw_input={"command": command},
            ),
        )
        if not self._client_caps.terminal:
            message = "the client offers no terminal"
            await self._fail_call(session, call_id, message)
            await self._say(session, turn, f"run failed: {message}")
            return
        try:
            await self._run_in_terminal(session, turn, call_id, command)
        except RequestError as exc:
            await self._fail_call(session, call_id, str(exc))
            await self._say(session, turn, f"run failed: {exc}")

    async def _run_in_terminal(
        self, session: Session, turn: Turn, call_id: str, command: str
    ) -> None:
        conn = self._conn
        created = await conn.create_terminal(
            session_id=session.id, command="bash", args=["-c", command], cwd=session.cwd
        )
        terminal_id = created.terminal_id
        await self._update(
            session,
            update_tool_call(
                call_id, status="in_progress", content=[tool_terminal_ref(terminal_id)]
            ),
        )
        finished, exit_info = await self._until_cancel(
            turn, conn.wait_for_terminal_exit(session_id=session.id, terminal_id=terminal_id)
        )
        if not finished:
            await conn.kill_terminal(session_id=session.id, terminal_id=terminal_id)
            await conn.release_terminal(session_id=session.id, terminal_id=terminal_id)
            await self._fail_call(session, call_id, "cancelled")
            return
        output = await conn.terminal_output(session_id=session.id, terminal_id=terminal_id)
        await conn.release_terminal(session_id=session.id, terminal_id=terminal_id)
        exit_code = exit_info.exit_code if exit_info is not None else None
        await self._update(
            session,
            update_tool_call(
                call_id,
                status="completed" if exit_code == 0 else "failed",
                content=[tool_content(text_block(output.output))],
                raw_output={"exitCode": exit_code, "signal": getattr(exit_info, "signal", None)},
            ),
        )
        await self._say(session, turn, f"ran: {output.output}")

    # -- directives: timing and faults ---------------------------------------------------

    async def _do_sleep(self, session: Session, turn: Turn, rest: str) -> None:
        await self._until_cancel(turn, asyncio.sleep(float(rest.strip() or "1")))

    async def _do_wait_cancel(self, session: Session, turn: Turn, rest: str) -> None:
        await turn.cancelled.wait()

    async def _do_ignore_cancel(self, session: Session, turn: Turn, rest: str) -> None:
        """This session's turn goes on after its cancel (the loop, and every other
        session on this process, do not wait for it)."""
        await asyncio.sleep(float(rest.strip() or "30"))

    async def _do_block(self, session: Session, turn: Turn, rest: str) -> None:
        """An agent that ignores session/cancel (and everything else): the loop blocks."""
        time.sleep(float(rest.strip() or "30"))

    async def _do_crash(self, session: Session, turn: Turn, rest: str) -> None:
        _die("scripted agent: crashing mid-turn", 7)

    async def _do_garbage(self, session: Session, turn: Turn, rest: str) -> None:
        # The SDK's sender writes each frame with one write() on this same writer, on this
        # same loop, so these lines land whole, between two frames.
        self._writer.write(b"this is not json\n[1,2,3]\n")
        await self._writer.drain()

    async def _do_bigline(self, session: Session, turn: Turn, rest: str) -> None:
        await self._say(session, turn, "x" * 1_000_000)

    async def _do_unknown_request(self, session: Session, turn: Turn, rest: str) -> None:
        # A method outside ACP and without the `_` extension prefix: the SDK offers no
        # public call for that, so this goes through the connection it wraps.
        try:
            result = await self._conn._conn.send_request(
                "craft/drainMidTurnQueue", {"sessionId": session.id}
            )
        except RequestError as exc:
            await self._say(session, turn, f"unknown-request: {exc.code}")
            return
        await self._say(session, turn, f"unknown-request: ok {json.dumps(result)}")

    async def _do_other_session(self, session: Session, turn: Turn, rest: str) -> None:
        await self._conn.session_update("not-this-session", update_agent_message_text("leak"))

    async def _do_read_as(self, session: Session, turn: Turn, rest: str) -> None:
        """fs/read_text_file naming another session id (`read-as SESSION_ID PATH`)."""
        other, _, arg = rest.strip().partition(" ")
        path = self._path(session, arg)
        try:
            answer = await self._conn.read_text_file(session_id=other, path=path)
        except RequestError as exc:
            await self._say(session, turn, f"read-as failed: {exc.code} {exc}")
            return
        await self._say(session, turn, f"read-as: {answer.content}")

    async def _do_unannounced_permission(self, session: Session, turn: Turn, rest: str) -> None:
        call = ToolCallUpdate(tool_call_id="never-announced", title="Unannounced", kind="other")
        try:
            choice = await self._ask(session, call)
        except RequestError as exc:
            await self._say(session, turn, f"unannounced-permission: error {exc.code} {exc}")
            return
        outcome = f"selected {choice}" if choice is not None else "cancelled"
        await self._say(session, turn, f"unannounced-permission: {outcome}")

    async def _do_daemon(self, session: Session, turn: Turn, rest: str) -> None:
        pidfile = self._path(session, rest.strip())
        # An intermediate process starts `sleep 1000` in a new session (the setsid(2) that
        # `setsid sleep` does), writes its pid and exits: the sleep is nobody's child here.
        code = (
            "import subprocess, sys\n"
            "p = subprocess.Popen(['sleep', '1000'], stdin=subprocess.DEVNULL,"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)\n"
            "open(sys.argv[1], 'w').write(str(p.pid))\n"
        )
        starter = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            pidfile,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        await starter.wait()

    async def _do_exit_after_reply(self, session: Session, turn: Turn, rest: str) -> None:
        self._exit_after_reply.add(session.id)


async def _main() -> None:
    reader, writer = await stdio_streams(limit=50 * 1024 * 1024)
    log = Log(os.environ.get("SCRIPTED_AGENT_LOG"))
    agent = ScriptedAgent(writer, log, Store(os.environ.get("SCRIPTED_AGENT_STATE")))
    await run_agent(agent, writer, reader, use_unstable_protocol=True, observers=[agent.observe])
    if os.environ.get("SCRIPTED_AGENT_IGNORE_EOF") == "1":
        _stderr("scripted agent: stdin closed, staying alive")
        await _forever()
    _stderr("scripted agent: stdin closed, exiting")


def main() -> None:
    if os.environ.get("SCRIPTED_AGENT_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _stderr(f"scripted agent {os.getpid()} started")
    asyncio.run(_main())


if __name__ == "__main__":
    main()
