"""The `anthropic` provider end to end: `python -m sidecar --provider anthropic` as a child,
talking HTTP to the fake Messages API server running as a separate process.

Nothing is mocked: the sidecar uses the real Anthropic SDK over loopback sockets, and the
test steers the fake server through its control endpoints (/_script, /_requests). The fake
refuses (400) any request that breaks the Messages API's rules, so every turn here also
checks that the sidecar's real transcripts convert into requests the API accepts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode

MODEL = "test-model"


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    # The server root: the Anthropic SDK appends /v1/messages itself.
    server = await FakeServerProcess.start(
        "fake_anthropic_server.py", tmp_path / "fake.port", base_path=""
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
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        fake.base_url,
        env={"ANTHROPIC_API_KEY": "test"},  # --base-url wins over any ANTHROPIC_BASE_URL
    )
    try:
        yield running
    finally:
        await running.close()


def agent_text(sidecar: Sidecar, session_id: str) -> list[str]:
    return [u["content"]["text"] for u in sidecar.updates(session_id, "agent_message_chunk")]


def user_text(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def accepted(request: dict[str, Any]) -> bool:
    """The fake found the request well-formed for the real API (else `rejected` says why)."""
    return request["rejected"] is None


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
    assert accepted(request), request["rejected"]
    body = request["body"]
    assert body["model"] == MODEL and body["stream"] is True
    assert body["max_tokens"] == 4096
    assert "coding agent" in body["system"] and str(workspace) in body["system"]
    assert body["messages"] == [user_text("say hello")]
    tools = {tool["name"]: tool for tool in body["tools"]}
    assert sorted(tools) == [
        "bash",
        "edit_file",
        "list_files",
        "read_file",
        "update_plan",
        "write_file",
    ]
    assert tools["bash"]["input_schema"]["required"] == ["command"]
    assert tools["edit_file"]["input_schema"]["required"] == ["path", "old_text", "new_text"]
    assert request["completed"] and not request["abandoned"]

    page = await agent.messages(sid)
    assert [(m["type"], m["text"]) for m in page["messages"]] == [
        ("user", "say hello"),
        ("assistant", "Hello from the fake model, streamed."),
    ]
    assert (await agent.status(sid))["status"] == "idle"


async def test_tool_use_runs_and_its_result_goes_back(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {
            "type": "tool_use",
            "name": "bash",
            "input": {"command": "echo from-tool"},
            "id": "toolu_e2e_1",
        },
        {"type": "text", "text": "The command printed from-tool."},
    )
    result = await agent.prompt(sid, "run echo please")
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "The command printed from-tool."

    first, second = await fake.wait_requests(2)
    assert accepted(first) and accepted(second), (first["rejected"], second["rejected"])
    assert first["body"]["messages"] == [user_text("run echo please")]
    user, assistant, results = second["body"]["messages"]
    assert user == user_text("run echo please")
    assert assistant == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_e2e_1",
                "name": "bash",
                "input": {"command": "echo from-tool"},
            }
        ],
    }
    (tool_result,) = results["content"]
    assert results["role"] == "user"
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_e2e_1"
    assert "from-tool" in tool_result["content"]

    starts = agent.updates(sid, "tool_call")
    assert starts and starts[0]["toolCallId"] == "toolu_e2e_1"
    assert starts[0]["rawInput"] == {"command": "echo from-tool"}
    finals = [u for u in agent.updates(sid, "tool_call_update") if u.get("status") == "completed"]
    assert finals and finals[-1]["rawOutput"]["exitCode"] == 0
    assert "".join(agent_text(agent, sid)).endswith("The command printed from-tool.")
    types = [m["type"] for m in (await agent.messages(sid))["messages"]]
    assert types == ["user", "assistant", "tool_result", "assistant"]

    # The next turn sends the whole history, tool use included, and the API accepts it.
    await fake.script({"type": "text", "text": "you're welcome"})
    assert (await agent.prompt(sid, "thanks"))["_meta"]["response"] == "you're welcome"
    third = (await fake.requests())[-1]
    assert accepted(third), third["rejected"]
    assert [m["role"] for m in third["body"]["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


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
    assert "api_error" in status["lastError"] and MODEL in status["lastError"]
    # The next prompt recovers the session first (new generation, lastError cleared).
    await fake.script({"type": "text", "text": "back online"})
    result = await agent.prompt(sid, "are you back?")
    assert result["stopReason"] == "end_turn" and result["_meta"]["response"] == "back online"
    assert (await agent.status(sid))["generation"] == 2
    last = (await fake.requests())[-1]
    assert accepted(last), last["rejected"]
    # The failed turn's user message is part of the history the model sees: with no reply
    # between them, the two user messages are merged so that roles still alternate.
    assert last["body"]["messages"] == [user_text("this will fail", "are you back?")]

    closed = (await agent.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed"
    resumed = await agent.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
    summary = resumed["_meta"]
    assert summary["status"] == "idle" and summary["lastError"] is None
    assert summary["generation"] == 3
    assert (await agent.status(sid))["lastError"] is None


async def test_http_400_is_not_retried(agent: Sidecar, fake: FakeServerProcess, workspace: Path):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {
            "type": "error",
            "status": 400,
            "message": "model: test-model does not exist",
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
    assert "invalid_request_error" in status["lastError"]


async def test_overloaded_529_fails_the_prompt_after_retries(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    overloaded = {"type": "error", "status": 529, "message": "Overloaded"}
    await fake.script(overloaded, overloaded, overloaded)
    with pytest.raises(RpcError) as failed:
        await agent.prompt(sid, "busy?")
    assert failed.value.code == ErrorCode.PROVIDER_ERROR
    assert "HTTP 529: overloaded_error: Overloaded" in failed.value.message
    assert len(await fake.requests()) == 3
    assert (await agent.status(sid))["status"] == "error"


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
    assert abandoned["body"]["messages"] == [user_text("take your time")]
    assert not abandoned["completed"]

    await asyncio.sleep(max(0.0, 5.5 - (time.monotonic() - started)))  # past the delay
    after = await agent.status(sid)
    assert after == closed
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

    # The next turn works and the cancelled one left a history the API accepts.
    await fake.script({"type": "text", "text": "quick now"})
    assert (await agent.prompt(sid, "again"))["_meta"]["response"] == "quick now"
    requests = await fake.requests()
    assert len(requests) == 2
    assert accepted(requests[-1]), requests[-1]["rejected"]
    sent = requests[-1]["body"]["messages"]
    assert sent == [user_text("slow one", "again")]
    assert "never shown" not in str(sent)


async def test_cancel_during_a_running_tool_leaves_a_history_the_api_accepts(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {"type": "tool_use", "name": "bash", "input": {"command": "sleep 30"}, "id": "toolu_s"}
    )
    turn = agent.prompt_task(sid, "sleep a while")
    # Running: approved (the harness allows once) and started, not still being asked about.
    await agent.wait_for(
        lambda m, p: (
            m == "session/update"
            and p["update"].get("sessionUpdate") == "tool_call_update"
            and p["update"].get("toolCallId") == "toolu_s"
            and p["update"].get("status") == "in_progress"
        )
    )
    assert await agent.call("session/cancel", {"sessionId": sid}) == {"cancelled": True}
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "cancelled"

    await fake.script({"type": "text", "text": "ok, stopped"})
    assert (await agent.prompt(sid, "never mind"))["_meta"]["response"] == "ok, stopped"
    last = (await fake.requests())[-1]
    assert accepted(last), last["rejected"]
    user, assistant, results = last["body"]["messages"]
    assert user == user_text("sleep a while")
    assert assistant["content"][0]["id"] == "toolu_s"
    # The cancelled command's result and the new prompt share one user message, result first.
    first, second = results["content"]
    assert first["type"] == "tool_result" and first["tool_use_id"] == "toolu_s"
    assert "Cancelled" in first["content"]
    assert second == {"type": "text", "text": "never mind"}
