"""Compaction: older turns become a summary in what the provider is sent; the stored
transcript stays whole. Driven through a real sidecar against the fake Chat Completions
server, whose request log shows exactly what the provider received."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode


async def start_agent(data_dir: Path, fake: FakeServerProcess, *extra: str) -> Sidecar:
    return await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        fake.base_url,
        *extra,
        env={"OPENAI_API_KEY": "test"},
    )


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


def sent_text(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["body"]["messages"])


async def test_manual_compaction_shrinks_the_context_and_keeps_the_transcript(
    data_dir: Path, workspace: Path, fake: FakeServerProcess
):
    agent = await start_agent(data_dir, fake)
    try:
        sid = (await agent.new_session(workspace))["sessionId"]
        for word in ("alpha", "bravo", "charlie"):
            await agent.prompt(sid, f"turn {word}")
        await fake.script({"type": "text", "text": "SUMMARY: alpha and bravo were discussed"})
        result = await agent.call("_session/compact", {"sessionId": sid, "keepTurns": 1})
        assert result["compacted"] is True and result["contextFrom"] == 4

        # The summary request itself saw the older turns, not the kept one.
        summary_request = (await fake.requests())[-1]
        assert "turn alpha" in sent_text(summary_request)
        assert "turn charlie" not in sent_text(summary_request)

        await agent.prompt(sid, "turn delta")
        after = (await fake.requests())[-1]
        text = sent_text(after)
        assert "SUMMARY: alpha and bravo were discussed" in text
        assert "turn alpha" not in text and "turn bravo" not in text
        assert "turn charlie" in text and "turn delta" in text
        assert (
            len(after["body"]["messages"]) < len((await fake.requests())[2]["body"]["messages"]) + 3
        )

        # The stored transcript is whole: every message, plus the compaction marker.
        messages = (await agent.messages(sid))["messages"]
        users = [m["text"] for m in messages if m["type"] == "user"]
        assert users == ["turn alpha", "turn bravo", "turn charlie", "turn delta"]
        markers = [m for m in messages if m.get("kind") == "compaction"]
        assert len(markers) == 1 and markers[0]["text"].startswith("SUMMARY")

        # A new runtime generation rebuilds the same compacted context from the record.
        await agent.call("session/close", {"sessionId": sid})
        await agent.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        await agent.prompt(sid, "turn echo")
        resumed = sent_text((await fake.requests())[-1])
        assert "SUMMARY: alpha and bravo" in resumed and "turn alpha" not in resumed
        assert "turn charlie" in resumed and "turn echo" in resumed
    finally:
        await agent.close()


async def test_automatic_compaction_keeps_the_context_under_the_budget(
    data_dir: Path, workspace: Path, fake: FakeServerProcess
):
    agent = await start_agent(data_dir, fake, "--context-budget", "600")
    try:
        sid = (await agent.new_session(workspace))["sessionId"]
        for n in range(8):
            await agent.prompt(sid, f"message {n} " + "x" * 150)
        requests = await fake.requests()
        last_turn = [r for r in requests if "message 7" in sent_text(r)][-1]
        users = [m["content"] for m in last_turn["body"]["messages"] if m["role"] == "user"]
        # Older turns are gone from the context (the fake's summary merely echoes them).
        assert not any(u.startswith("message 0") for u in users)
        assert users[-1].startswith("message 7") and len(users) < 8
        assert any(r["body"]["messages"][0]["content"].startswith("You compact") for r in requests)
        messages = (await agent.messages(sid, limit=1000))["messages"]
        assert [m["text"].split()[1] for m in messages if m["type"] == "user"] == [
            str(n) for n in range(8)
        ]
        assert any(m.get("kind") == "compaction" for m in messages)
    finally:
        await agent.close()


async def test_keeping_no_turns_summarizes_everything(
    data_dir: Path, workspace: Path, fake: FakeServerProcess
):
    agent = await start_agent(data_dir, fake)
    try:
        sid = (await agent.new_session(workspace))["sessionId"]
        for word in ("alpha", "bravo"):
            await agent.prompt(sid, f"turn {word}")
        await fake.script({"type": "text", "text": "SUMMARY: all of it"})
        result = await agent.call("_session/compact", {"sessionId": sid, "keepTurns": 0})
        assert result["compacted"] is True and result["contextFrom"] == 4
        assert "turn bravo" in sent_text((await fake.requests())[-1])
        await agent.prompt(sid, "turn charlie")
        users = [
            m["content"]
            for m in (await fake.requests())[-1]["body"]["messages"]
            if m["role"] == "user"
        ]
        assert users == ["turn charlie"]
        assert "SUMMARY: all of it" in sent_text((await fake.requests())[-1])
    finally:
        await agent.close()


async def test_compaction_refusals(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    nothing = await sidecar.call("_session/compact", {"sessionId": sid})
    assert nothing["compacted"] is False
    turn = sidecar.prompt_task(sid, "/sleep 1")
    await sidecar.wait_state(sid, "running")
    with pytest.raises(RpcError) as busy:
        await sidecar.call("_session/compact", {"sessionId": sid})
    assert busy.value.code == ErrorCode.SESSION_BUSY
    await asyncio.wait_for(turn, 10)
    with pytest.raises(RpcError) as bad:
        await sidecar.call("_session/compact", {"sessionId": sid, "keepTurns": -1})
    assert bad.value.code == ErrorCode.INVALID_PARAMS and bad.value.data["field"] == "keepTurns"


async def test_offline_compaction_and_fork_keep_the_summary(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    for word in ("one", "two", "three"):
        await sidecar.prompt(sid, word)
    result = await sidecar.call("_session/compact", {"sessionId": sid, "keepTurns": 1})
    assert result["compacted"] is True
    marker = (await sidecar.messages(sid))["messages"][result["summaryIndex"]]
    assert marker["kind"] == "compaction" and "one; two" in marker["text"]
    forked = (await sidecar.call("session/fork", {"sessionId": sid, "cwd": str(workspace)}))[
        "_meta"
    ]
    assert forked["messageCount"] == 7
    assert (await sidecar.prompt(forked["sessionId"], "four"))["_meta"]["response"] == "Echo: four"
