"""The bash tool through a real sidecar: cwd, output cap, timeout, leftovers stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness import Sidecar, eventually, has_line, host_pid, marker, pid_alive


async def start(data_dir: Path, *args: str) -> Sidecar:
    return await Sidecar.start(data_dir, *args)


async def test_command_runs_in_the_session_cwd(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    result = await sidecar.prompt(sid, "$ pwd")
    assert str(workspace) in result["_meta"]["response"]


async def test_output_cap_and_timeout(data_dir: Path, workspace: Path):
    sidecar = await start(data_dir, "--tool-output-cap", "100", "--tool-timeout", "1")
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        await sidecar.prompt(sid, "$ head -c 100000 /dev/zero | tr '\\0' 'x'")
        messages = (await sidecar.messages(sid))["messages"]
        tool = [m for m in messages if m["type"] == "tool_result"][-1]
        assert tool["truncated"] is True
        assert "x" * 100 in tool["text"] and "x" * 101 not in tool["text"]
        assert "[output truncated at 100 bytes; 100000 bytes in all" in tool["text"]

        mark, marked = marker()
        turn = sidecar.prompt_task(sid, f"$ {marked}echo $$ > slow.pid; sleep 30")
        assert await eventually(lambda: has_line(workspace / "slow.pid"))
        slow = host_pid(mark, int((workspace / "slow.pid").read_text()))
        result = await asyncio.wait_for(turn, 20)
        assert result["stopReason"] == "end_turn"
        messages = (await sidecar.messages(sid))["messages"]
        tool = [m for m in messages if m["type"] == "tool_result"][-1]
        assert "Killed after the 1 s timeout" in tool["text"] and tool["exitCode"] is None
        assert not pid_alive(slow)
    finally:
        await sidecar.close()


async def test_background_leftovers_are_stopped_when_the_command_ends(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    mark, marked = marker()
    turn = sidecar.prompt_task(
        sid, f"$ {marked}sleep 1000 & echo $! > bg.pid; sleep 0.5; echo started"
    )
    assert await eventually(lambda: has_line(workspace / "bg.pid"))
    leftover = host_pid(mark, int((workspace / "bg.pid").read_text()))
    result = await asyncio.wait_for(turn, 20)
    assert "exited with status 0" in result["_meta"]["response"]
    assert await eventually(lambda: not pid_alive(leftover))


async def test_a_child_that_ignores_sigterm_is_killed_on_cancel(data_dir: Path, workspace: Path):
    sidecar = await start(data_dir, "--kill-grace", "0.5")
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        mark, marked = marker()
        turn = sidecar.prompt_task(
            sid, f"$ {marked}trap '' TERM; echo $$ > stubborn.pid; sleep 1000"
        )
        assert await eventually(lambda: has_line(workspace / "stubborn.pid"))
        await asyncio.sleep(0.1)
        stubborn = host_pid(mark, int((workspace / "stubborn.pid").read_text()))
        await sidecar.call("session/cancel", {"sessionId": sid})
        assert (await asyncio.wait_for(turn, 10))["stopReason"] == "cancelled"
        assert await eventually(lambda: not pid_alive(stubborn))
    finally:
        await sidecar.close()


async def test_events_stream_more_than_the_model_keeps_but_are_capped_too(
    data_dir: Path, workspace: Path
):
    sidecar = await start(data_dir, "--tool-output-cap", "100", "--tool-stream-cap", "1000")
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        await sidecar.prompt(sid, "$ head -c 5000 /dev/zero | tr '\\0' 'y'")
        streamed = "".join(
            (u.get("_meta") or {}).get("output", "")
            for u in sidecar.updates(sid, "tool_call_update")
        )
        body, notice, _ = streamed.partition("\n[output stream truncated at 1000 bytes]")
        assert notice and body == "y" * 1000
        messages = (await sidecar.messages(sid))["messages"]
        tool = [m for m in messages if m["type"] == "tool_result"][-1]
        assert "y" * 100 + "\n[output truncated at 100 bytes; 5000 bytes in all" in tool["text"]
        assert "y" * 101 not in tool["text"] and tool["truncated"] is True
    finally:
        await sidecar.close()
