"""The `openai` provider end to end: `python -m sidecar --provider openai` as a child,
talking HTTP to the fake Chat Completions server running as a separate process.

Nothing is mocked: the sidecar uses the real OpenAI SDK over loopback sockets, and the
test steers the fake server through its control endpoints (/_script, /_requests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode

MODEL = "test-model"


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def agent(data_dir: Path, fake: FakeServerProcess) -> AsyncIterator[Sidecar]:
    running = await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},  # --base-url wins over any OPENAI_BASE_URL
    )
    try:
        yield running
    finally:
        await running.close()


def agent_text(sidecar: Sidecar, session_id: str) -> list[str]:
    return [u["content"]["text"] for u in sidecar.updates(session_id, "agent_message_chunk")]


async def test_plain_prompt_streams_the_scripted_text(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script({"type": "text", "text": "Hello from the fake model, streamed."})
    result = await agent.prompt(sid, "say hello")
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "Hello from the fake model, streamed."
    chunks = agent_text(agent, sid)
    assert len(chunks) > 1, f"expected several streamed chunks, got {chunks!r}"
    assert "".join(chunks) == "Hello from the fake model, streamed."

    (request,) = await fake.requests()
    body = request["body"]
    assert body["model"] == MODEL and body["stream"] is True
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    assert "coding agent" in messages[0]["content"] and str(workspace) in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "say hello"}
    assert [t["function"]["name"] for t in body["tools"]] == [
        "bash",
        "read_file",
        "list_files",
        "edit_file",
        "write_file",
        "update_plan",
    ]
    assert request["completed"] and not request["abandoned"]

    page = await agent.messages(sid)
    assert [(m["type"], m["text"]) for m in page["messages"]] == [
        ("user", "say hello"),
        ("assistant", "Hello from the fake model, streamed."),
    ]
    assert (await agent.status(sid))["status"] == "idle"


async def test_tool_call_runs_and_its_result_goes_back(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {
            "type": "tool_call",
            "name": "bash",
            "arguments": {"command": "echo from-tool"},
            "id": "call_e2e_1",
        },
        {"type": "text", "text": "The command printed from-tool."},
    )
    result = await agent.prompt(sid, "run echo please")
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "The command printed from-tool."

    first, second = await fake.wait_requests(2)
    assert first["body"]["messages"][-1] == {"role": "user", "content": "run echo please"}
    sent = second["body"]["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant" and m.get("tool_calls"))
    (call,) = assistant["tool_calls"]
    assert call["id"] == "call_e2e_1" and call["function"]["name"] == "bash"
    tool_messages = [m for m in sent if m["role"] == "tool"]
    assert len(tool_messages) == 1, sent
    assert tool_messages[0]["tool_call_id"] == "call_e2e_1"
    assert "from-tool" in tool_messages[0]["content"]
    assert sent.index(assistant) < sent.index(tool_messages[0])
    # Transcript-only keys never reach the provider.
    assert all("createdAt" not in m and "exitCode" not in m for m in sent)

    starts = agent.updates(sid, "tool_call")
    assert starts and starts[0]["toolCallId"] == "call_e2e_1"
    assert starts[0]["rawInput"] == {"command": "echo from-tool"}
    finals = [u for u in agent.updates(sid, "tool_call_update") if u.get("status") == "completed"]
    assert finals and finals[-1]["rawOutput"]["exitCode"] == 0
    assert "".join(agent_text(agent, sid)).endswith("The command printed from-tool.")
    types = [m["type"] for m in (await agent.messages(sid))["messages"]]
    assert types == ["user", "assistant", "tool_result", "assistant"]


async def test_http_500_exhausts_retries_then_close_and_resume_recovers(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    boom = {"type": "error", "status": 500, "message": "upstream exploded (boom-42)"}
    await fake.script(boom, boom, boom)
    with pytest.raises(RpcError) as failed:
        await agent.prompt(sid, "this will fail")
    assert failed.value.code == ErrorCode.PROVIDER_ERROR
    assert "boom-42" in failed.value.message and "500" in failed.value.message
    assert len(await fake.requests()) == 3  # the first try and two SDK retries

    status = await agent.status(sid)
    assert status["status"] == "error", status
    assert "boom-42" in status["lastError"] and "HTTP 500" in status["lastError"]
    # The next prompt recovers the session (new generation, lastError cleared) and runs.
    await fake.script({"type": "text", "text": "recovered"})
    recovered = await agent.prompt(sid, "still broken?")
    assert recovered["_meta"]["response"] == "recovered"
    status = await agent.status(sid)
    assert (status["status"], status["lastError"], status["generation"]) == ("idle", None, 2)

    closed = (await agent.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed"
    resumed = await agent.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
    summary = resumed["_meta"]
    assert summary["status"] == "idle" and summary["lastError"] is None
    assert summary["generation"] == 3

    await fake.script({"type": "text", "text": "back online"})
    result = await agent.prompt(sid, "are you back?")
    assert result["stopReason"] == "end_turn" and result["_meta"]["response"] == "back online"
    last = (await fake.requests())[-1]["body"]["messages"]
    assert last[-1] == {"role": "user", "content": "are you back?"}
    # The failed turn's user message is part of the history the model sees.
    assert {"role": "user", "content": "this will fail"} in last
    assert (await agent.status(sid))["lastError"] is None


async def test_http_400_is_not_retried(agent: Sidecar, fake: FakeServerProcess, workspace: Path):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {
            "type": "error",
            "status": 400,
            "message": "model test-model does not exist",
            "error_type": "invalid_request_error",
        }
    )
    started = time.monotonic()
    with pytest.raises(RpcError) as failed:
        await agent.prompt(sid, "hello")
    assert failed.value.code == ErrorCode.PROVIDER_ERROR
    assert time.monotonic() - started < 3
    assert len(await fake.requests()) == 1
    status = await agent.status(sid)
    assert status["status"] == "error"
    assert "HTTP 400" in status["lastError"] and "does not exist" in status["lastError"]


async def test_refusals_and_unreachable_servers_say_what_to_do(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path, data_dir: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script({"type": "error", "status": 401, "message": "bad key"})
    with pytest.raises(RpcError) as refused:
        await agent.prompt(sid, "hello")
    assert "HTTP 401: bad key — check the API key (OPENAI_API_KEY)" in str(refused.value)

    nobody = await Sidecar.start(
        data_dir.parent / "other",
        "--provider",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        other = (await nobody.new_session(workspace))["sessionId"]
        with pytest.raises(RpcError) as unreachable:
            await nobody.prompt(other, "hello")
        message = str(unreachable.value)
        assert "connection failed" in message
        assert "is the server at http://127.0.0.1:9/v1" in message and "running" in message
        assert message.count("connection failed") == 1  # said once
    finally:
        await nobody.close()


async def test_close_during_a_slow_reply_abandons_it_and_changes_nothing_later(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script({"type": "text", "text": "too late to matter", "delay": 5})
    turn = agent.prompt_task(sid, "take your time")
    await fake.wait_requests(1)
    await agent.wait_state(sid, "running")
    started = time.monotonic()
    closed = (await agent.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed" and closed["live"] is False
    result = await asyncio.wait_for(turn, 10)
    assert result["stopReason"] == "cancelled"
    abandoned = await fake.wait_abandoned()
    assert abandoned["body"]["messages"][-1]["content"] == "take your time"
    assert not abandoned["completed"]

    await asyncio.sleep(max(0.0, 5.5 - (time.monotonic() - started)))  # past the delay
    after = await agent.status(sid)
    assert after == closed
    assert (after["status"], after["messageCount"], after["updatedAt"]) == (
        "closed",
        closed["messageCount"],
        closed["updatedAt"],
    )
    contents = [m["text"] for m in (await agent.messages(sid))["messages"]]
    assert "too late to matter" not in contents
    assert "too late to matter" not in "".join(agent_text(agent, sid))
    assert len(await fake.requests()) == 1  # nothing retried the abandoned request


async def test_cancel_during_a_slow_reply(agent: Sidecar, fake: FakeServerProcess, workspace: Path):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script({"type": "text", "text": "never shown", "delay": 5})
    turn = agent.prompt_task(sid, "slow one")
    await fake.wait_requests(1)
    await agent.wait_state(sid, "running")
    started = time.monotonic()
    assert await agent.call("session/cancel", {"sessionId": sid}) == {"cancelled": True}
    result = await asyncio.wait_for(turn, 10)
    assert result["stopReason"] == "cancelled"
    assert time.monotonic() - started < 3, "cancel waited for the slow reply"
    await fake.wait_abandoned()
    status = await agent.status(sid)
    assert status["status"] == "idle" and status["live"] is True and status["lastError"] is None

    # The next turn works and the cancelled one left a well-formed history.
    await fake.script({"type": "text", "text": "quick now"})
    assert (await agent.prompt(sid, "again"))["_meta"]["response"] == "quick now"
    requests = await fake.requests()
    assert len(requests) == 2
    sent = requests[-1]["body"]["messages"]
    assert sent[-1] == {"role": "user", "content": "again"}
    assert "never shown" not in str(sent)
