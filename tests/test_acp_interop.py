"""Interop: the official ACP Python SDK (`acp`, 0.12) as the client of a real sidecar.

`acp.spawn_agent_process` starts `python -m sidecar` and wraps its pipes in the SDK's
`ClientSideConnection`; a recording `Client` keeps every `session/update` (as the SDK
parsed it) and every extension notification (`_session/state`).

Besides what each test asserts, the `acp_run` fixture checks the whole wire log at
teardown: every reply answers exactly one request we sent, every reply and
`session/update` survives the SDK's models unchanged (the SDK silently drops or
nulls fields it cannot parse, so "no exception" alone proves little), the SDK
logged and warned nothing, and the sidecar exited 0 on stdin EOF.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from acp import (
    PROTOCOL_VERSION,
    RequestError,
    embedded_text_resource,
    resource_block,
    resource_link_block,
    spawn_agent_process,
    text_block,
)
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CloseSessionResponse,
    CurrentModeUpdate,
    DeleteSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ResumeSessionResponse,
    SessionNotification,
    SetSessionModeResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from pydantic import BaseModel

from protocol.errors import ErrorCode
from protocol.framing import MAX_MESSAGE_BYTES

REPO = Path(__file__).resolve().parent.parent
WAIT = 8.0  # per call; every test stays well under 10 s

T = TypeVar("T")

# What the SDK parses each of our replies into (by the request's method).
RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "initialize": InitializeResponse,
    "session/new": NewSessionResponse,
    "session/load": LoadSessionResponse,
    "session/resume": ResumeSessionResponse,
    "session/close": CloseSessionResponse,
    "session/delete": DeleteSessionResponse,
    "session/list": ListSessionsResponse,
    "session/prompt": PromptResponse,
    "session/set_mode": SetSessionModeResponse,
}


# --------------------------------------------------------------------------- helpers


class RecordingClient:
    """An ACP `Client` that records what the agent sends it, and allows every tool call
    it is asked about once (as a user clicking "Allow once" would). The sidecar asks
    nothing else (no fs/terminal requests): those stay unimplemented, and the SDK router
    answers them with method-not-found."""

    def __init__(self) -> None:
        self.permissions: list[tuple[str, Any]] = []
        self.updates: list[tuple[str, Any, dict[str, Any]]] = []
        self.ext_notifications: list[tuple[str, dict[str, Any]]] = []
        self.ext_requests: list[tuple[str, dict[str, Any]]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update, kwargs))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((session_id, tool_call))
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.ext_notifications.append((method, params))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ext_requests.append((method, params))
        raise RequestError.method_not_found(f"_{method}")

    def of(self, session_id: str, kind: type[T], since: int = 0) -> list[T]:
        return [
            u for sid, u, _ in self.updates[since:] if sid == session_id and isinstance(u, kind)
        ]

    def text(self, session_id: str, kind: type[Any], since: int = 0) -> str:
        return "".join(u.content.text for u in self.of(session_id, kind, since))

    def states(self, session_id: str) -> list[str]:
        return [
            p["status"]
            for m, p in self.ext_notifications
            if m == "session/state" and p.get("sessionId") == session_id
        ]


@dataclass
class AcpRun:
    conn: ClientSideConnection
    client: RecordingClient
    process: asyncio.subprocess.Process
    wire: list[StreamEvent] = field(default_factory=list)

    async def call(self, awaitable: Any) -> Any:
        return await asyncio.wait_for(awaitable, WAIT)

    async def new_session(self, cwd: Path, **meta: Any) -> NewSessionResponse:
        response: NewSessionResponse = await self.call(
            self.conn.new_session(cwd=str(cwd), mcp_servers=[], **meta)
        )
        return response

    async def prompt(self, session_id: str, text: str) -> PromptResponse:
        response: PromptResponse = await self.call(
            self.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        )
        return response

    async def until(self, check: Callable[[], T], what: str, timeout: float = WAIT) -> T:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.01)

    async def wait_state(self, session_id: str, status: str) -> None:
        await self.until(
            lambda: status in self.client.states(session_id),
            f"_session/state {status!r} for {session_id}",
        )

    def outgoing(self, method: str) -> list[dict[str, Any]]:
        return [
            e.message
            for e in self.wire
            if e.direction is StreamDirection.OUTGOING and e.message.get("method") == method
        ]


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def sdk_round_trip(model: type[BaseModel], payload: Any) -> Any:
    """What survives the SDK's parsing of `payload`, back in wire form."""
    parsed = model.model_validate(payload)
    return _strip_none(parsed.model_dump(mode="json", by_alias=True, exclude_unset=True))


def wire_problems(wire: list[StreamEvent]) -> list[str]:
    """Everything on the wire the SDK would mis-handle or silently lose."""
    problems: list[str] = []
    sent: dict[Any, str] = {}
    answered: set[Any] = set()
    for event in wire:
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                sent[message["id"]] = message["method"]
            continue
        method = message.get("method")
        if method is not None:
            if "id" in message:
                if method == "session/request_permission":
                    params = message.get("params")
                    if sdk_round_trip(RequestPermissionRequest, params) != _strip_none(params):
                        problems.append(f"permission request not preserved by the SDK: {params}")
                else:
                    problems.append(f"unexpected agent->client request {method}: {message}")
            elif method == "session/update":
                params = message.get("params")
                if sdk_round_trip(SessionNotification, params) != _strip_none(params):
                    problems.append(f"session/update not preserved by the SDK: {params}")
            elif not method.startswith("_"):
                problems.append(f"unexpected agent->client notification {method}: {message}")
            continue
        request_id = message.get("id")
        if request_id not in sent:
            problems.append(f"reply to nothing we sent (a reply to a notification?): {message}")
            continue
        if request_id in answered:
            problems.append(f"second reply to request {request_id}: {message}")
        answered.add(request_id)
        if ("result" in message) == ("error" in message):
            problems.append(f"reply needs exactly one of result/error: {message}")
            continue
        model = RESPONSE_MODELS.get(sent[request_id])
        if model is not None and "result" in message:
            result = message["result"]
            if sdk_round_trip(model, result) != _strip_none(result):
                problems.append(f"{sent[request_id]} result not preserved by the SDK: {result}")
    return problems


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
async def acp_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, recwarn: pytest.WarningsRecorder
) -> AsyncIterator[AcpRun]:
    client = RecordingClient()
    wire: list[StreamEvent] = []
    log_path = tmp_path / "sidecar.log"
    with log_path.open("wb") as sidecar_log:
        async with spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "sidecar",
            "--data-dir",
            str(tmp_path / "data"),
            "--log-level",
            "DEBUG",
            cwd=REPO,
            # The sidecar's messages can be as large as its own framing limit; its log
            # goes to a file (an unread stderr pipe would fill up and block it).
            transport_kwargs={"limit": MAX_MESSAGE_BYTES, "stderr": sidecar_log.fileno()},
            observers=[wire.append],
        ) as (conn, process):
            run = AcpRun(conn, client, process, wire)
            # Asks for our extension notifications (_session/state), as our own clients do.
            init = await run.call(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_info=Implementation(name="acp-interop-test", version="0"),
                    client_capabilities=ClientCapabilities(
                        field_meta={"acp-session-host": {"notifications": True}}
                    ),
                )
            )
            assert init.protocol_version == PROTOCOL_VERSION
            yield run
        returncode = await asyncio.wait_for(process.wait(), 10)
    # The SDK reports trouble only through logging and warnings (never to the caller).
    acp_warnings = [str(w.message) for w in recwarn if not issubclass(w.category, ResourceWarning)]
    records = [*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.records]
    sdk_errors = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    log_tail = log_path.read_text(errors="replace")[-3000:]
    problems = wire_problems(wire)
    assert problems == [], "ACP conformance problems on the wire:\n" + "\n".join(problems)
    assert sdk_errors == [], f"the ACP SDK logged problems; sidecar log tail:\n{log_tail}"
    assert acp_warnings == [], "the ACP SDK warned"
    assert returncode == 0, f"sidecar exited {returncode} on stdin EOF; log tail:\n{log_tail}"


# --------------------------------------------------------------------------- tests


async def test_initialize_advertises_sessions_capabilities(acp_run: AcpRun):
    again = await acp_run.call(acp_run.conn.initialize(protocol_version=PROTOCOL_VERSION))
    assert again.protocol_version == PROTOCOL_VERSION == 1
    caps = again.agent_capabilities
    assert caps is not None and caps.load_session is True
    sessions = caps.session_capabilities
    assert sessions is not None
    assert sessions.list is not None
    assert sessions.delete is not None
    assert sessions.resume is not None
    assert sessions.close is not None
    assert caps.prompt_capabilities is not None and caps.prompt_capabilities.embedded_context
    assert again.auth_methods == []
    assert again.agent_info is not None and again.agent_info.name == "acp-session-host"
    # A client newer than us gets our version back (ACP version negotiation).
    newer = await acp_run.call(acp_run.conn.initialize(protocol_version=PROTOCOL_VERSION + 1))
    assert newer.protocol_version == PROTOCOL_VERSION


async def test_new_session_meta_and_streamed_prompt(acp_run: AcpRun, workspace: Path):
    created = await acp_run.new_session(workspace, mode="plan", backend="pipe", title="Interop")
    # The SDK turns extra kwargs into the request's `_meta`.
    sent = acp_run.outgoing("session/new")[-1]["params"]
    assert sent["_meta"] == {"mode": "plan", "backend": "pipe", "title": "Interop"}
    assert sent["mcpServers"] == [] and sent["cwd"] == str(workspace)

    sid = created.session_id
    summary = created.field_meta
    assert summary is not None, "session/new result lost its _meta summary"
    assert summary["sessionId"] == sid
    assert (summary["mode"], summary["backend"], summary["title"]) == ("plan", "pipe", "Interop")
    assert (summary["status"], summary["generation"], summary["live"]) == ("idle", 1, True)
    assert created.modes is not None and created.modes.current_mode_id == "plan"
    assert [m.id for m in created.modes.available_modes] == ["craft", "plan", "ask"]
    assert acp_run.client.states(sid)[:2] == ["creating", "idle"]

    mark = len(acp_run.client.updates)
    text = "hello from the official ACP client"
    result = await acp_run.prompt(sid, text)
    assert result.stop_reason == "end_turn"
    assert result.field_meta is not None and result.field_meta["response"] == f"Echo: {text}"
    chunks = acp_run.client.of(sid, AgentMessageChunk, mark)
    assert len(chunks) > 1, "the reply should stream in several agent_message_chunk updates"
    assert all(isinstance(c.content, TextContentBlock) for c in chunks)
    assert acp_run.client.text(sid, AgentMessageChunk, mark) == f"Echo: {text}"
    assert acp_run.client.states(sid)[-2:] == ["running", "idle"]


async def test_tool_call_streams_tool_call_and_updates(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    result = await acp_run.prompt(sid, "$ echo hi")
    assert result.stop_reason == "end_turn"

    kinds = [type(u).__name__ for s, u, _ in acp_run.client.updates if s == sid]
    first_chunk = kinds.index("AgentMessageChunk")
    assert kinds.index("ToolCallStart") < kinds.index("ToolCallProgress") < first_chunk

    (start,) = acp_run.client.of(sid, ToolCallStart)
    assert start.kind == "execute" and start.status == "pending"
    assert start.raw_input == {"command": "echo hi"} and start.title
    progress = acp_run.client.of(sid, ToolCallProgress)
    assert progress and all(p.tool_call_id == start.tool_call_id for p in progress)
    final = progress[-1]
    assert final.status == "completed"
    assert final.raw_output is not None and final.raw_output["exitCode"] == 0
    assert final.content is not None
    (content,) = final.content
    assert content.type == "content" and "hi" in content.content.text
    # Streamed output rides in `_meta.output` of intermediate updates.
    streamed = "".join((p.field_meta or {}).get("output", "") for p in progress)
    assert streamed == "hi\n"

    reply = acp_run.client.text(sid, AgentMessageChunk)
    assert result.field_meta is not None and reply == result.field_meta["response"]
    assert reply.startswith("`echo hi` exited with status 0")


async def test_cancel_of_a_slow_prompt(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    turn = asyncio.ensure_future(
        acp_run.conn.prompt(session_id=sid, prompt=[text_block("/sleep 30 never")])
    )
    await acp_run.wait_state(sid, "running")
    started = time.monotonic()
    await acp_run.conn.cancel(session_id=sid)  # a notification: no reply expected
    result = await asyncio.wait_for(turn, 5)
    assert result.stop_reason == "cancelled"
    assert time.monotonic() - started < 5
    assert "Slept" not in acp_run.client.text(sid, AgentMessageChunk)
    await acp_run.wait_state(sid, "idle")
    again = await acp_run.prompt(sid, "still here")
    assert again.stop_reason == "end_turn"
    assert again.field_meta is not None and again.field_meta["response"] == "Echo: still here"


async def test_cancel_during_a_tool_call(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    turn = asyncio.ensure_future(
        acp_run.conn.prompt(session_id=sid, prompt=[text_block("$ sleep 30")])
    )
    start = await acp_run.until(lambda: acp_run.client.of(sid, ToolCallStart), "tool_call")
    await acp_run.until(
        lambda: any(p.status == "in_progress" for p in acp_run.client.of(sid, ToolCallProgress)),
        "tool_call_update in_progress",
    )
    await acp_run.conn.cancel(session_id=sid)
    result = await asyncio.wait_for(turn, 8)
    assert result.stop_reason == "cancelled"
    final = acp_run.client.of(sid, ToolCallProgress)[-1]
    assert final.tool_call_id == start[0].tool_call_id
    # ACP's ToolCallStatus has no "cancelled": a killed command ends as "failed".
    assert final.status == "failed"
    assert final.raw_output is not None and final.raw_output["cancelled"] is True


async def test_close_then_resume_is_generation_2(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace, title="resumable")).session_id
    await acp_run.prompt(sid, "before close")

    with pytest.raises(RequestError) as live:
        await acp_run.call(acp_run.conn.resume_session(session_id=sid, cwd=str(workspace)))
    assert live.value.code == ErrorCode.RUNTIME_LIVE

    closed = await acp_run.call(acp_run.conn.close_session(session_id=sid))
    assert isinstance(closed, CloseSessionResponse) and closed.field_meta is not None
    assert closed.field_meta["status"] == "closed" and closed.field_meta["live"] is False
    assert acp_run.client.states(sid)[-1] == "closed"

    resumed = await acp_run.call(acp_run.conn.resume_session(session_id=sid, cwd=str(workspace)))
    summary = resumed.field_meta
    assert summary is not None, "session/resume result lost its _meta summary"
    assert summary["sessionId"] == sid and summary["generation"] == 2
    assert summary["status"] == "idle" and summary["live"] is True
    assert summary["title"] == "resumable" and summary["messageCount"] == 2
    assert resumed.modes is not None and resumed.modes.current_mode_id == "craft"
    after = await acp_run.prompt(sid, "after resume")
    assert after.field_meta is not None and after.field_meta["response"] == "Echo: after resume"


async def test_load_of_a_closed_session_replays_the_transcript(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    await acp_run.prompt(sid, "first message")
    await acp_run.prompt(sid, "$ echo hi")
    await acp_run.call(acp_run.conn.close_session(session_id=sid))

    mark = len(acp_run.client.updates)
    loaded = await acp_run.call(
        acp_run.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    )
    assert loaded.field_meta is not None
    assert loaded.field_meta["generation"] == 2 and loaded.field_meta["live"] is True
    assert loaded.modes is not None and loaded.modes.current_mode_id == "craft"

    users = [u.content.text for u in acp_run.client.of(sid, UserMessageChunk, mark)]
    assert users == ["first message", "$ echo hi"]
    replayed_text = acp_run.client.text(sid, AgentMessageChunk, mark)
    assert replayed_text.startswith("Echo: first message")
    assert "`echo hi` exited with status 0" in replayed_text
    (start,) = acp_run.client.of(sid, ToolCallStart, mark)
    assert start.raw_input == {"command": "echo hi"}
    (done,) = acp_run.client.of(sid, ToolCallProgress, mark)
    assert done.tool_call_id == start.tool_call_id and done.status == "completed"

    # ACP: the agent replays the whole conversation, then answers session/load.
    load_id = acp_run.outgoing("session/load")[-1]["id"]
    incoming = [e.message for e in acp_run.wire if e.direction is StreamDirection.INCOMING]
    answer_at = next(i for i, m in enumerate(incoming) if m.get("id") == load_id)
    replay_at = [
        i
        for i, m in enumerate(incoming)
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid
        # announced after the answer, by design (ACP: the session's commands follow it)
        and m["params"]["update"]["sessionUpdate"] != "available_commands_update"
    ]
    assert len([i for i in replay_at if i > answer_at]) == 0, "updates after the load reply"

    after = await acp_run.prompt(sid, "after load")
    assert after.field_meta is not None and after.field_meta["response"] == "Echo: after load"


async def test_load_of_a_live_session_replays_without_a_new_generation(
    acp_run: AcpRun, workspace: Path
):
    sid = (await acp_run.new_session(workspace)).session_id
    await acp_run.prompt(sid, "only message")
    mark = len(acp_run.client.updates)
    loaded = await acp_run.call(acp_run.conn.load_session(cwd=str(workspace), session_id=sid))
    assert loaded.field_meta is not None and loaded.field_meta["generation"] == 1
    assert [u.content.text for u in acp_run.client.of(sid, UserMessageChunk, mark)] == [
        "only message"
    ]
    assert acp_run.client.text(sid, AgentMessageChunk, mark) == "Echo: only message"


async def test_list_sessions_carries_summaries_in_meta(acp_run: AcpRun, tmp_path: Path):
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    first = (await acp_run.new_session(first_dir, title="first")).session_id
    second = (await acp_run.new_session(second_dir, title="second")).session_id
    await acp_run.call(acp_run.conn.close_session(session_id=second))

    listed = await acp_run.call(acp_run.conn.list_sessions())
    assert listed.next_cursor is None
    by_id = {s.session_id: s for s in listed.sessions}
    assert set(by_id) == {first, second}
    for sid, cwd, title, status in (
        (first, first_dir, "first", "idle"),
        (second, second_dir, "second", "closed"),
    ):
        info = by_id[sid]
        assert (info.cwd, info.title) == (str(cwd), title)
        assert info.updated_at, "updatedAt lost (the SDK nulls values it cannot parse)"
        meta = info.field_meta
        assert meta is not None, "session/list entry lost its _meta summary"
        assert meta["sessionId"] == sid and meta["status"] == status
        assert meta["generation"] == 1 and meta["updatedAt"] == info.updated_at

    only_first = await acp_run.call(acp_run.conn.list_sessions(cwd=str(first_dir)))
    assert [s.session_id for s in only_first.sessions] == [first]


async def test_delete_through_the_raw_connection(acp_run: AcpRun, workspace: Path):
    # ClientSideConnection 0.12 has no delete method; its JSON-RPC Connection does.
    raw = acp_run.conn._conn
    sid = (await acp_run.new_session(workspace)).session_id
    keep = (await acp_run.new_session(workspace, title="keep")).session_id

    with pytest.raises(RequestError) as live:
        await acp_run.call(raw.send_request("session/delete", {"sessionId": sid}))
    assert live.value.code == ErrorCode.RUNTIME_LIVE
    assert "close it first" in str(live.value)

    await acp_run.call(acp_run.conn.close_session(session_id=sid))
    deleted = await acp_run.call(raw.send_request("session/delete", {"sessionId": sid}))
    assert DeleteSessionResponse.model_validate(deleted) == DeleteSessionResponse()

    listed = await acp_run.call(acp_run.conn.list_sessions())
    assert [s.session_id for s in listed.sessions] == [keep]
    with pytest.raises(RequestError) as gone:
        await acp_run.call(acp_run.conn.ext_method("session/status", {"sessionId": sid}))
    assert gone.value.code == ErrorCode.SESSION_NOT_FOUND
    with pytest.raises(RequestError) as again:
        await acp_run.call(raw.send_request("session/delete", {"sessionId": sid}))
    assert again.value.code == ErrorCode.SESSION_NOT_FOUND


async def test_sidecar_errors_surface_as_request_error(acp_run: AcpRun, workspace: Path):
    with pytest.raises(RequestError) as unknown:
        await acp_run.prompt("sess_does_not_exist", "hello?")
    assert unknown.value.code == -32002  # ErrorCode.SESSION_NOT_FOUND, as the SDK saw it
    assert unknown.value.data == {"sessionId": "sess_does_not_exist"}
    assert "session not found" in str(unknown.value)

    with pytest.raises(RequestError) as relative:
        await acp_run.call(acp_run.conn.new_session(cwd="relative/dir", mcp_servers=[]))
    assert relative.value.code == ErrorCode.INVALID_PARAMS
    assert relative.value.data is not None and relative.value.data["field"] == "cwd"

    with pytest.raises(RequestError) as bad_mode:
        await acp_run.new_session(workspace, mode="yolo")
    assert bad_mode.value.code == ErrorCode.INVALID_PARAMS
    assert bad_mode.value.data is not None and bad_mode.value.data["field"] == "_meta.mode"

    with pytest.raises(RequestError) as unknown_fork:
        await acp_run.call(acp_run.conn.fork_session(session_id="sess_x", cwd=str(workspace)))
    assert unknown_fork.value.code == ErrorCode.SESSION_NOT_FOUND

    sid = (await acp_run.new_session(workspace)).session_id
    forked = await acp_run.call(acp_run.conn.fork_session(session_id=sid, cwd=str(workspace)))
    assert forked.session_id != sid and forked.field_meta["forkedFrom"] == sid
    with pytest.raises(RequestError) as failed:
        await acp_run.prompt(sid, "/fail the model is down")
    assert failed.value.code == ErrorCode.PROVIDER_ERROR
    assert "the model is down" in str(failed.value)


async def test_extension_methods_and_state_notifications(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    await acp_run.prompt(sid, "note this")
    status = await acp_run.call(acp_run.conn.ext_method("session/status", {"sessionId": sid}))
    assert status["sessionId"] == sid and status["messageCount"] == 2
    page = await acp_run.call(acp_run.conn.ext_method("session/messages", {"sessionId": sid}))
    assert [m["text"] for m in page["messages"]] == ["note this", "Echo: note this"]
    # `_session/state` arrives through Client.ext_notification, without the leading "_".
    states = [p for m, p in acp_run.client.ext_notifications if m == "session/state"]
    assert [p["status"] for p in states] == ["creating", "idle", "running", "idle"]
    assert all(p["sessionId"] == sid and p["generation"] == 1 for p in states)
    assert acp_run.client.ext_requests == []


async def test_set_session_mode_sends_current_mode_update(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    await acp_run.call(acp_run.conn.set_session_mode(session_id=sid, mode_id="ask"))
    update = await acp_run.until(
        lambda: acp_run.client.of(sid, CurrentModeUpdate), "current_mode_update"
    )
    assert update[-1].current_mode_id == "ask"
    reply = await acp_run.prompt(sid, "$ echo hi")
    assert reply.field_meta is not None
    assert reply.field_meta["response"].startswith("Tools are not available in this mode")
    assert acp_run.client.of(sid, ToolCallStart) == []


async def test_large_messages_cross_both_ways(acp_run: AcpRun, workspace: Path):
    sid = (await acp_run.new_session(workspace)).session_id
    word = "big-" + "x" * (2 * 1024 * 1024)  # one 2 MiB word: one 2 MiB chunk each way
    result = await acp_run.prompt(sid, word)
    assert result.field_meta is not None and result.field_meta["response"] == f"Echo: {word}"
    assert acp_run.client.text(sid, AgentMessageChunk) == f"Echo: {word}"
    page = await acp_run.call(acp_run.conn.ext_method("session/messages", {"sessionId": sid}))
    assert page["messages"][0]["text"] == word


async def test_embedded_text_resource_reaches_the_model(acp_run: AcpRun, workspace: Path):
    # We advertise promptCapabilities.embeddedContext, so a client may embed file contents.
    sid = (await acp_run.new_session(workspace)).session_id
    blocks: list[Any] = [
        text_block("summarise"),
        resource_block(embedded_text_resource(f"file://{workspace}/notes.txt", "NOTES BODY")),
    ]
    result = await acp_run.call(acp_run.conn.prompt(session_id=sid, prompt=blocks))
    assert result.field_meta is not None
    assert "NOTES BODY" in result.field_meta["response"]


async def test_resource_link_prompt_is_supported(acp_run: AcpRun, workspace: Path):
    """ACP v1 (PromptRequest.prompt): "As a baseline, the Agent MUST support
    ContentBlock::Text and ContentBlock::ResourceLink". A client may send a prompt made
    of a resource link alone (e.g. an @-mentioned file without embedded context)."""
    sid = (await acp_run.new_session(workspace)).session_id
    (workspace / "spec.md").write_text("SPEC BODY\n")
    uri = f"file://{workspace}/spec.md"
    try:
        result = await acp_run.call(
            acp_run.conn.prompt(session_id=sid, prompt=[resource_link_block("spec.md", uri)])
        )
    except RequestError as exc:
        raise AssertionError(
            "SIDECAR BUG (ACP conformance): a prompt holding only a resource_link block is "
            f"rejected with {exc.code} {exc} (data={exc.data}); ACP requires every agent to "
            "support resource_link prompt blocks (sidecar/handlers.py prompt_text() reads "
            "only text and embedded resources)"
        ) from None
    assert result.field_meta is not None
    # A link to a file in the cwd reaches the builtin engine's model as the file's text.
    assert "[file spec.md]\nSPEC BODY\n" in result.field_meta["response"], (
        "SIDECAR BUG (ACP conformance): the resource link never reached the model"
    )


async def test_initialize_with_an_unsupported_older_version(acp_run: AcpRun):
    """ACP: InitializeResponse.protocolVersion is "the protocol version the client
    specified if supported by the agent, or the latest protocol version supported by the
    agent". The sidecar only speaks version 1, so a version-0 client must hear 1 (and then
    disconnect), not an echo of 0 followed by version-1 traffic."""
    answer = await acp_run.call(acp_run.conn.initialize(protocol_version=0))
    assert answer.protocol_version == PROTOCOL_VERSION, (
        "SIDECAR BUG (ACP conformance): initialize answered protocolVersion "
        f"{answer.protocol_version} to a version-0 client; it supports only "
        f"{PROTOCOL_VERSION} (handlers.py uses min(requested, PROTOCOL_VERSION))"
    )
