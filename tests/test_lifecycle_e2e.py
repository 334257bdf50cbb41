"""The session lifecycle contract, end to end through a real `python -m sidecar` over stdio."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import aiohttp
import pytest
from harness import Sidecar, eventually, has_line, host_pid, marker, pid_alive

from desktop.client import RpcError
from protocol.errors import ErrorCode


async def http_status(url: str, token: str) -> int:
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{url}/agent/status", headers={"Authorization": f"Bearer {token}"}
        ) as response:
            return response.status


async def port_refuses(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/agent/status"):
                return False
    except aiohttp.ClientConnectorError:
        return True


async def test_create_separates_record_from_runtime(
    sidecar: Sidecar, workspace: Path, data_dir: Path
):
    summary = await sidecar.new_session(workspace, mode="plan", backend="pty", title="First")
    sid = summary["sessionId"]
    assert summary["status"] == "idle"
    assert summary["generation"] == 1 and summary["live"] is True
    assert (summary["mode"], summary["backend"], summary["title"]) == ("plan", "pty", "First")
    # The summary names the listener; its token comes from `_session/http` alone.
    url, token = await sidecar.endpoint(sid)
    assert summary["http"] == {"url": url}
    assert url.startswith("http://127.0.0.1:") and token
    assert token not in json.dumps(summary)
    assert sidecar.states(sid)[:2] == ["creating", "idle"]
    assert await http_status(url, token) == 200
    # The durable record knows nothing of ports or tokens.
    port = summary["http"]["url"].rsplit(":", 1)[1]
    with sqlite3.connect(data_dir / "sessions.db") as db:
        rows = db.execute("SELECT * FROM sessions").fetchall()
    dumped = repr(rows)
    assert sid in dumped
    assert token not in dumped and f":{port}" not in dumped


async def test_turn_goes_running_then_idle(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    task = sidecar.prompt_task(sid, "/sleep 0.5 done")
    await sidecar.wait_state(sid, "running")
    assert (await sidecar.status(sid))["status"] == "running"
    result = await asyncio.wait_for(task, 10)
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "Slept 0.5 s. done"
    await sidecar.wait_state(sid, "idle")
    assert sidecar.states(sid)[-2:] == ["running", "idle"]
    chunks = "".join(u["content"]["text"] for u in sidecar.updates(sid, "agent_message_chunk"))
    assert chunks == "Slept 0.5 s. done"


async def test_second_prompt_while_running_is_refused(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    first = sidecar.prompt_task(sid, "/sleep 1")
    await sidecar.wait_state(sid, "running")
    with pytest.raises(RpcError) as refused:
        await sidecar.prompt(sid, "second")
    assert refused.value.code == ErrorCode.SESSION_BUSY
    assert "busy" in refused.value.message
    assert (await asyncio.wait_for(first, 10))["stopReason"] == "end_turn"
    texts = [m["text"] for m in (await sidecar.messages(sid))["messages"] if m["type"] == "user"]
    assert texts == ["/sleep 1"]  # the refused prompt was not queued


async def test_transcript_survives_close_and_resume(sidecar: Sidecar, workspace: Path):
    first = await sidecar.new_session(workspace)
    sid = first["sessionId"]
    _, first_token = await sidecar.endpoint(sid)
    await sidecar.prompt(sid, "hello there")
    before = await sidecar.messages(sid)
    assert before["total"] == 2

    closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed" and closed["live"] is False and closed["http"] is None
    assert await port_refuses(first["http"]["url"])
    assert (await sidecar.messages(sid)) == before

    resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
    summary = resumed["_meta"]
    assert summary["sessionId"] == sid and summary["generation"] == 2
    assert summary["status"] == "idle" and summary["live"] is True
    assert summary["http"]["url"] != first["http"]["url"]
    url, token = await sidecar.endpoint(sid)
    assert summary["http"] == {"url": url}
    assert token != first_token
    assert (summary["cwd"], summary["mode"], summary["backend"]) == (
        first["cwd"],
        first["mode"],
        first["backend"],
    )
    assert (await sidecar.messages(sid)) == before
    result = await sidecar.prompt(sid, "again")
    assert result["_meta"]["response"] == "Echo: again"
    assert (await sidecar.messages(sid))["total"] == 4


async def test_another_sidecar_resumes_after_the_first_exits(data_dir: Path, workspace: Path):
    first = await Sidecar.start(data_dir)
    sid = (await first.new_session(workspace, title="durable"))["sessionId"]
    await first.prompt(sid, "remember me")
    assert await first.close() == 0

    second = await Sidecar.start(data_dir)
    try:
        status = await second.status(sid)
        assert status["status"] == "closed" and status["live"] is False
        assert status["interrupted"] is False
        summary = (await second.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
            "_meta"
        ]
        assert summary["generation"] == 2 and summary["title"] == "durable"
        messages = (await second.messages(sid))["messages"]
        assert [m["text"] for m in messages] == ["remember me", "Echo: remember me"]
    finally:
        await second.close()


async def test_resume_of_live_session_is_refused(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    with pytest.raises(RpcError) as refused:
        await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
    assert refused.value.code == ErrorCode.RUNTIME_LIVE
    assert "live runtime" in refused.value.message
    assert (await sidecar.status(sid))["generation"] == 1


async def test_close_is_idempotent_and_delete_is_explicit(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, "keep this")
    with pytest.raises(RpcError) as refused:
        await sidecar.call("session/delete", {"sessionId": sid})
    assert (
        refused.value.code == ErrorCode.RUNTIME_LIVE and "close it first" in refused.value.message
    )

    once = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
    states_after_first_close = sidecar.states(sid)
    twice = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
    assert once == twice  # nothing changed, not even updatedAt
    assert sidecar.states(sid) == states_after_first_close
    assert (await sidecar.messages(sid))["total"] == 2

    await sidecar.call("session/delete", {"sessionId": sid})
    with pytest.raises(RpcError) as gone:
        await sidecar.status(sid)
    assert gone.value.code == ErrorCode.SESSION_NOT_FOUND
    listed = await sidecar.call("session/list", {})
    assert sid not in [s["sessionId"] for s in listed["sessions"]]


@pytest.mark.parametrize(
    ("cwd", "meta", "field"),
    [
        ("relative/path", {}, "cwd"),
        ("/definitely/not/here", {}, "cwd"),
        (None, {"mode": "yolo"}, "_meta.mode"),
        (None, {"backend": "ssh"}, "_meta.backend"),
        (None, {"title": 7}, "_meta.title"),
    ],
)
async def test_invalid_new_session_is_rejected(sidecar: Sidecar, workspace: Path, cwd, meta, field):
    params = {"cwd": cwd or str(workspace), "mcpServers": [], "_meta": meta}
    with pytest.raises(RpcError) as rejected:
        await sidecar.call("session/new", params)
    assert rejected.value.code == ErrorCode.INVALID_PARAMS
    assert rejected.value.data["field"] == field
    assert (await sidecar.call("session/list", {}))["sessions"] == []


async def test_cwd_that_is_a_file_is_rejected(sidecar: Sidecar, workspace: Path):
    file = workspace / "file.txt"
    file.write_text("x")
    with pytest.raises(RpcError) as rejected:
        await sidecar.new_session(file)
    assert rejected.value.data["field"] == "cwd"


async def test_provider_failure_then_close_and_resume_recovers(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    with pytest.raises(RpcError) as failed:
        await sidecar.prompt(sid, "/fail the model is down")
    assert failed.value.code == ErrorCode.PROVIDER_ERROR
    status = await sidecar.status(sid)
    assert status["status"] == "error" and "the model is down" in status["lastError"]
    # The next prompt recovers the session first (ACP has no error state; no client knows
    # it must close and resume): a new generation, lastError cleared, then the turn.
    assert (await sidecar.prompt(sid, "hello"))["stopReason"] == "end_turn"
    recovered = await sidecar.status(sid)
    assert recovered["status"] == "idle" and recovered["lastError"] is None
    assert recovered["generation"] == 2

    # Close + resume keeps working after a failure, too.
    with pytest.raises(RpcError):
        await sidecar.prompt(sid, "/fail again")
    await sidecar.call("session/close", {"sessionId": sid})
    summary = (await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
        "_meta"
    ]
    assert summary["status"] == "idle" and summary["lastError"] is None
    assert summary["generation"] == 3
    assert (await sidecar.prompt(sid, "hello"))["stopReason"] == "end_turn"


async def test_late_provider_answer_after_close_changes_nothing(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    turn = sidecar.prompt_task(sid, "/sleep 1.5 late answer")
    await sidecar.wait_state(sid, "running")
    closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed"
    result = await asyncio.wait_for(turn, 10)
    assert result["stopReason"] == "cancelled"
    await asyncio.sleep(2.0)  # past the moment the provider would have answered
    after = await sidecar.status(sid)
    assert after == closed
    contents = [m["text"] for m in (await sidecar.messages(sid))["messages"]]
    assert "Slept 1.5 s. late answer" not in contents


async def test_cancel_ends_turn_and_kills_the_tool_process_group(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    mark, marked = marker()
    command = (
        f"{marked}echo $$ > leader.pid; (sleep 1000 & echo $! > grandchild.pid; wait) & sleep 1000"
    )
    turn = sidecar.prompt_task(sid, f"$ {command}")
    assert await eventually(
        lambda: has_line(workspace / "leader.pid") and has_line(workspace / "grandchild.pid")
    )
    await asyncio.sleep(0.1)
    leader = host_pid(mark, int((workspace / "leader.pid").read_text()))
    grandchild = host_pid(mark, int((workspace / "grandchild.pid").read_text()))
    assert pid_alive(leader) and pid_alive(grandchild)

    await sidecar.client.notify("session/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 15)
    assert result["stopReason"] == "cancelled"
    assert await eventually(lambda: not pid_alive(leader) and not pid_alive(grandchild))
    status = await sidecar.status(sid)
    assert status["status"] == "idle" and status["live"] is True
    messages = (await sidecar.messages(sid))["messages"]
    assert messages[0]["text"] == f"$ {command}"
    assert messages[-2]["type"] == "tool_result" and "Cancelled" in messages[-2]["text"]
    assert messages[-1]["type"] == "marker" and messages[-1]["kind"] == "cancelled"
    # The session is usable again, and the next turn's context is well formed.
    assert (await sidecar.prompt(sid, "still here?"))["_meta"]["response"] == "Echo: still here?"


async def test_tool_call_streams_updates(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    result = await sidecar.prompt(sid, "$ printf 'one\\ntwo\\n'; exit 3")
    assert result["stopReason"] == "end_turn"
    assert "exited with status 3" in result["_meta"]["response"]
    starts = sidecar.updates(sid, "tool_call")
    assert starts and starts[0]["kind"] == "execute" and starts[0]["status"] == "pending"
    finals = [u for u in sidecar.updates(sid, "tool_call_update") if u.get("status") == "failed"]
    assert finals and finals[-1]["rawOutput"]["exitCode"] == 3
    assert "one\ntwo" in finals[-1]["content"][0]["content"]["text"]


async def test_ask_mode_has_no_tools(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, mode="ask"))["sessionId"]
    result = await sidecar.prompt(sid, "$ touch should-not-exist")
    assert "not available" in result["_meta"]["response"]
    assert not (workspace / "should-not-exist").exists()


async def test_set_mode_only_while_idle(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    assert (await sidecar.status(sid))["mode"] == "ask"
    assert sidecar.updates(sid, "current_mode_update")[-1]["currentModeId"] == "ask"
    turn = sidecar.prompt_task(sid, "/sleep 1")
    await sidecar.wait_state(sid, "running")
    with pytest.raises(RpcError) as refused:
        await sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "craft"})
    assert refused.value.code == ErrorCode.INVALID_STATE
    await asyncio.wait_for(turn, 10)
    with pytest.raises(RpcError) as bad:
        await sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
    assert bad.value.code == ErrorCode.INVALID_PARAMS
    assert (await sidecar.status(sid))["mode"] == "ask"


async def test_sigkill_mid_turn_is_reconciled_on_next_start(data_dir: Path, workspace: Path):
    first = await Sidecar.start(data_dir)
    sid = (await first.new_session(workspace))["sessionId"]
    await first.prompt(sid, "before the crash")
    first.seen.clear()
    turn = first.prompt_task(sid, "/sleep 60 never finishes")
    await first.wait_state(sid, "running")
    first.sigkill()
    await first.wait_exit()
    with pytest.raises(ConnectionError):
        await turn

    second = await Sidecar.start(data_dir)
    try:
        status = await second.status(sid)
        assert status["status"] == "closed" and status["live"] is False
        assert status["interrupted"] is True
        messages = (await second.messages(sid))["messages"]
        assert messages[2]["text"] == "/sleep 60 never finishes"  # the user message stays
        assert (messages[-1]["type"], messages[-1]["kind"]) == ("marker", "interrupted")
        summary = (await second.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
            "_meta"
        ]
        assert summary["status"] == "idle" and summary["generation"] == 2
        await second.prompt(sid, "after")
        assert (await second.status(sid))["interrupted"] is False
    finally:
        await second.close()


async def test_stdin_eof_closes_sessions_and_leaves_no_child(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir)
    sid = (await sidecar.new_session(workspace))["sessionId"]
    idle_sid = (await sidecar.new_session(workspace))["sessionId"]
    mark, marked = marker()
    sidecar.prompt_task(sid, f"$ {marked}echo $$ > tool.pid; sleep 1000")
    assert await eventually(lambda: has_line(workspace / "tool.pid"))
    await asyncio.sleep(0.1)
    tool = host_pid(mark, int((workspace / "tool.pid").read_text()))
    assert await sidecar.close() == 0
    assert not pid_alive(tool)

    again = await Sidecar.start(data_dir)
    try:
        for session_id in (sid, idle_sid):
            status = await again.status(session_id)
            assert status["status"] == "closed"
            assert status["interrupted"] is False  # closed cleanly, not reconciled
    finally:
        await again.close()


async def test_shutdown_method_stops_the_sidecar(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir)
    sid = (await sidecar.new_session(workspace))["sessionId"]
    assert await sidecar.call("_sidecar/shutdown", {}) == {}
    assert await asyncio.wait_for(sidecar.client.process.wait(), 15) == 0
    await sidecar.close()
    again = await Sidecar.start(data_dir)
    try:
        assert (await again.status(sid))["status"] == "closed"
    finally:
        await again.close()


async def test_load_replays_transcript(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, "$ echo replayed")
    await sidecar.call("session/close", {"sessionId": sid})
    sidecar.seen.clear()
    loaded = await sidecar.call("session/load", {"sessionId": sid, "cwd": str(workspace)})
    assert loaded["_meta"]["generation"] == 2
    assert [u["content"]["text"] for u in sidecar.updates(sid, "user_message_chunk")] == [
        "$ echo replayed"
    ]
    assert len(sidecar.updates(sid, "tool_call")) == 1
    # On a live session, load only replays: no new generation.
    sidecar.seen.clear()
    again = await sidecar.call("session/load", {"sessionId": sid, "cwd": str(workspace)})
    assert again["_meta"]["generation"] == 2
    assert len(sidecar.updates(sid, "user_message_chunk")) == 1


async def test_list_filters_by_cwd_and_pages(sidecar: Sidecar, workspace: Path, tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    ids = [(await sidecar.new_session(workspace))["sessionId"] for _ in range(101)]
    elsewhere = (await sidecar.new_session(other))["sessionId"]
    first = await sidecar.call("session/list", {"cwd": str(workspace)})
    assert len(first["sessions"]) == 100 and "nextCursor" in first
    second = await sidecar.call(
        "session/list", {"cwd": str(workspace), "cursor": first["nextCursor"]}
    )
    assert "nextCursor" not in second
    listed = [s["sessionId"] for s in first["sessions"] + second["sessions"]]
    assert sorted(listed) == sorted(ids) and elsewhere not in listed
    entry = first["sessions"][0]
    assert entry["_meta"]["sessionId"] == entry["sessionId"] and "generation" in entry["_meta"]
    with pytest.raises(RpcError) as bad:
        await sidecar.call("session/list", {"cursor": "garbage"})
    assert bad.value.data["field"] == "cursor"
    await asyncio.gather(*(sidecar.call("session/close", {"sessionId": i}) for i in ids))


async def test_unknown_session_errors(sidecar: Sidecar):
    for method, params in [
        ("_session/status", {"sessionId": "sess_missing"}),
        ("session/close", {"sessionId": "sess_missing"}),
        ("session/resume", {"sessionId": "sess_missing", "cwd": "/"}),
        ("session/delete", {"sessionId": "sess_missing"}),
        (
            "session/prompt",
            {"sessionId": "sess_missing", "prompt": [{"type": "text", "text": "x"}]},
        ),
    ]:
        with pytest.raises(RpcError) as missing:
            await sidecar.call(method, params)
        assert missing.value.code == ErrorCode.SESSION_NOT_FOUND, method
