"""session/fork through a real sidecar: a new id with the transcript so far."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode


async def fork(sidecar: Sidecar, sid: str, cwd: Path) -> dict:
    result = await sidecar.call("session/fork", {"sessionId": sid, "cwd": str(cwd)})
    assert result["sessionId"] == result["_meta"]["sessionId"]
    return result["_meta"]


async def test_fork_is_advertised(sidecar: Sidecar):
    result = await sidecar.call("initialize", {"protocolVersion": 1})
    assert result["agentCapabilities"]["sessionCapabilities"]["fork"] == {}


async def test_fork_of_an_idle_session_copies_the_transcript(sidecar: Sidecar, workspace: Path):
    source = await sidecar.new_session(workspace, mode="plan", backend="pty", title="origin")
    sid = source["sessionId"]
    await sidecar.prompt(sid, "first")
    await sidecar.prompt(sid, "$ echo tool")
    before = await sidecar.messages(sid)

    child = await fork(sidecar, sid, workspace)
    assert child["sessionId"] != sid and child["forkedFrom"] == sid
    assert child["generation"] == 1 and child["status"] == "idle" and child["live"] is True
    assert (child["mode"], child["backend"], child["title"]) == ("plan", "pty", "origin (fork)")
    assert child["http"]["url"] != source["http"]["url"]
    assert await sidecar.messages(child["sessionId"]) == before

    # Independent from now on, both ways; the fork's context includes the copied history.
    await sidecar.prompt(child["sessionId"], "only in the fork")
    assert await sidecar.messages(sid) == before
    await sidecar.prompt(sid, "only in the source")
    forked = [m["text"] for m in (await sidecar.messages(child["sessionId"]))["messages"]]
    assert "only in the source" not in forked and forked[-1] == "Echo: only in the fork"
    assert (await sidecar.status(sid))["forkedFrom"] is None


async def test_fork_of_a_running_session_snapshots_the_last_completed_turn(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, "completed turn")
    sidecar.seen.clear()
    turn = sidecar.prompt_task(sid, "/sleep 1 still running")
    await sidecar.wait_state(sid, "running")
    child = await fork(sidecar, sid, workspace)
    contents = [m["text"] for m in (await sidecar.messages(child["sessionId"]))["messages"]]
    assert contents == ["completed turn", "Echo: completed turn"]
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "end_turn"
    assert (await sidecar.messages(sid))["total"] == 4


async def test_fork_of_a_closed_session_works_and_bad_input_is_refused(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, "kept")
    await sidecar.call("session/close", {"sessionId": sid})
    child = await fork(sidecar, sid, workspace)
    assert child["messageCount"] == 2 and child["live"] is True
    assert (await sidecar.status(sid))["status"] == "closed"  # the source stays closed

    with pytest.raises(RpcError) as missing:
        await sidecar.call("session/fork", {"sessionId": "sess_nope", "cwd": str(workspace)})
    assert missing.value.code == ErrorCode.SESSION_NOT_FOUND
    with pytest.raises(RpcError) as bad:
        await sidecar.call("session/fork", {"sessionId": sid, "cwd": "relative"})
    assert bad.value.code == ErrorCode.INVALID_PARAMS and bad.value.data["field"] == "cwd"


async def test_a_fork_survives_a_restart(data_dir: Path, workspace: Path):
    first = await Sidecar.start(data_dir)
    sid = (await first.new_session(workspace))["sessionId"]
    await first.prompt(sid, "durable")
    child = (await fork(first, sid, workspace))["sessionId"]
    await first.close()
    second = await Sidecar.start(data_dir)
    try:
        status = await second.status(child)
        assert status["forkedFrom"] == sid and status["messageCount"] == 2
        await second.call("session/resume", {"sessionId": child, "cwd": str(workspace)})
        assert (await second.prompt(child, "again"))["_meta"]["response"] == "Echo: again"
    finally:
        await second.close()
