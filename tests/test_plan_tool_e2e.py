"""The builtin engine's `update_plan` tool end to end: the real sidecar (`--provider
openai`) against the loopback Chat Completions server scripting the model's calls.

Clients get ACP `plan` session/updates; the call is in the transcript and `session/load`
replays the plan; a plan too long is cut and the model told; a bad one is a tool error
and the turn goes on. An external agent's plan (the scripted ACP agent) is bounded the
same way, the cut marked for the user.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from fake_process import FakeServerProcess
from harness import Sidecar

PLAN = [
    {"content": "Read the failing test", "status": "completed", "priority": "high"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"content": "Update the docs", "status": "pending", "priority": "low"},
]


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
        "test-model",
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        yield running
    finally:
        await running.close()


def plan_call(entries: Any, call_id: str = "call_plan_1", **extra: Any) -> dict[str, Any]:
    arguments = json.dumps({"entries": entries}, separators=(",", ":"))
    return {
        "type": "tool_call",
        "name": "update_plan",
        "arguments": arguments,
        "id": call_id,
        **extra,
    }


async def tool_message(fake: FakeServerProcess, call_id: str) -> str:
    """What the model was told of a call (the tool message of the request after it)."""
    for request in reversed(await fake.requests()):
        for message in request["body"]["messages"]:
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                return str(message["content"])
    raise AssertionError(f"no tool result for {call_id} was sent to the model")


@pytest.mark.parametrize("mode", ["craft", "plan", "ask"])
async def test_update_plan_sends_an_acp_plan_and_load_replays_it(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path, mode: str
):
    sid = (await agent.new_session(workspace, mode=mode))["sessionId"]
    await fake.script(plan_call(PLAN), {"type": "text", "text": "Planned."})
    result = await agent.prompt(sid, "fix the parser")
    assert result["stopReason"] == "end_turn" and result["_meta"]["response"] == "Planned."
    (plan,) = agent.updates(sid, "plan")
    assert plan["entries"] == PLAN
    assert not agent.asked  # no consent: it changes nothing
    first = (await fake.requests())[0]["body"]
    assert "update_plan" in [t["function"]["name"] for t in first["tools"]]
    assert "update_plan" in first["messages"][0]["content"]  # the system prompt says to use it
    told = await tool_message(fake, "call_plan_1")
    assert told == "Plan updated: 3 entries (1 completed, 1 in progress, 1 pending)."
    (finished,) = [
        u for u in agent.updates(sid, "tool_call_update") if u.get("status") == "completed"
    ]
    assert finished["toolCallId"] == "call_plan_1"

    page = (await agent.messages(sid))["messages"]
    (call,) = [c for m in page if m["type"] == "assistant" for c in m["toolCalls"]]
    assert (call["tool"], call["title"], call["input"]) == (
        "update_plan",
        "Update plan",
        {"entries": PLAN},
    )

    await agent.call("session/close", {"sessionId": sid})
    before = len(agent.seen)
    await agent.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = [
        p["update"]
        for m, p in agent.seen[before:]
        if m == "session/update" and p["update"].get("sessionUpdate") == "plan"
    ]
    assert [u["entries"] for u in replayed] == [PLAN]


async def test_ten_thousand_entries_are_cut_to_a_thousand_and_the_model_is_told(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
):
    sid = (await agent.new_session(workspace))["sessionId"]
    entries = [
        {"content": f"step {n}", "status": "pending", "priority": "low"} for n in range(10_000)
    ]
    entries[0]["content"] = "long " * 1000  # 5,000 characters: cut too
    await fake.script(
        plan_call(entries, argument_chunk=4096), {"type": "text", "text": "A long plan."}
    )
    result = await agent.prompt(sid, "plan everything")
    assert result["stopReason"] == "end_turn"
    (plan,) = agent.updates(sid, "plan")
    assert len(plan["entries"]) == 1000
    assert plan["entries"][-1]["content"] == "step 999"
    assert len(plan["entries"][0]["content"]) == 2000 and plan["entries"][0]["content"].endswith(
        "…"
    )
    told = await tool_message(fake, "call_plan_1")
    assert "10000 entries were given, only the first 1000 are kept" in told
    assert "1 entries' content was cut at 2000 characters" in told


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            json.dumps({"entries": [{"content": "x", "status": "done", "priority": "low"}]}),
            "entries[0].status: Input should be 'pending', 'in_progress' or 'completed'",
        ),
        (json.dumps({"entries": [{"content": "  ", "status": "pending"}]}), "entries[0].content"),
        (json.dumps({"entries": [{"status": "pending"}]}), "entries[0].content: Field required"),
        (json.dumps({"entries": "all of it"}), "'entries' must be a list"),
        (json.dumps({"entries": [{"content": 3, "status": "pending"}]}), "entries[0].content"),
        ("{not json", "arguments are not JSON"),
    ],
)
async def test_an_invalid_plan_is_a_tool_error_and_the_turn_goes_on(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path, arguments: str, reason: str
):
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {"type": "tool_call", "name": "update_plan", "arguments": arguments, "id": "call_bad"},
        {"type": "text", "text": "I will fix my plan."},
    )
    result = await agent.prompt(sid, "plan")
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "I will fix my plan."
    told = await tool_message(fake, "call_bad")
    assert told.startswith("Invalid update_plan call: ") and reason in told, told
    assert told.endswith("The plan is unchanged.")
    assert agent.updates(sid, "plan") == []
    (failed,) = [u for u in agent.updates(sid, "tool_call_update") if u.get("status") == "failed"]
    assert failed["toolCallId"] == "call_bad"
    assert (await agent.status(sid))["status"] == "idle"


async def test_an_external_agents_plan_of_ten_thousand_entries_is_cut_and_marked(
    tmp_path: Path, workspace: Path
) -> None:
    setup = AgentSetup(tmp_path / "agents").add("scripted")
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args())
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        result = await sidecar.prompt(sid, "plan-many 10000 5000\nsay planned")
        assert result["stopReason"] == "end_turn"
        (plan,) = sidecar.updates(sid, "plan")
        entries = plan["entries"]
        assert len(entries) == 1000 and entries[998]["content"] == "step 998"
        assert entries[-1]["content"] == (
            "… and 9,001 more entries the agent sent (a plan shows at most 1,000)"
        )
        assert len(entries[0]["content"]) == 2000 and entries[0]["content"].endswith("…")
        # A plan within the bound goes through as it was sent.
        await sidecar.prompt(sid, "plan-many 3")
        assert [e["content"] for e in sidecar.updates(sid, "plan")[-1]["entries"]] == [
            "step 0",
            "step 1",
            "step 2",
        ]
    finally:
        await sidecar.close()
