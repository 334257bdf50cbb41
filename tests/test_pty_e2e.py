"""The PTY backend through a real sidecar: a terminal, its size, colours, Ctrl-C, no orphans."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import pytest
from harness import Sidecar, eventually, has_line, host_pid, marker, pid_alive

from desktop.client import RpcError
from protocol.errors import ErrorCode


def last_tool_message(messages: list[dict]) -> dict:
    return [m for m in messages if m["type"] == "tool_result"][-1]


def streamed_output(sidecar: Sidecar, sid: str) -> str:
    return "".join(
        (u.get("_meta") or {}).get("output", "") for u in sidecar.updates(sid, "tool_call_update")
    )


async def test_commands_run_in_a_real_terminal(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, backend="pty"))["sessionId"]
    command = "tty; echo TERM=$TERM; python3 -c 'import sys; print(sys.stdin.isatty(), sys.stdout.isatty())'"
    await sidecar.prompt(sid, f"$ {command}")
    tool = last_tool_message((await sidecar.messages(sid))["messages"])
    # Inside bubblewrap's private /dev the PTY's name reads as /dev/console; what makes it
    # a real terminal is isatty() and the window size, checked here and below.
    assert re.search(r"/dev/(pts/\d+|console)", tool["text"]), tool["text"]
    assert "TERM=xterm-256color" in tool["text"]
    assert "True True" in tool["text"]
    assert "\r" not in tool["text"]  # CRLF folded for the model


async def test_pipe_session_has_no_terminal(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, backend="pipe"))["sessionId"]
    await sidecar.prompt(sid, "$ tty")
    tool = last_tool_message((await sidecar.messages(sid))["messages"])
    assert "not a tty" in tool["text"]


async def test_stty_size_follows_resize_before_and_during_a_command(
    sidecar: Sidecar, workspace: Path
):
    summary = await sidecar.new_session(workspace, backend="pty")
    sid = summary["sessionId"]
    assert await sidecar.call("_session/resize", {"sessionId": sid, "rows": 33, "cols": 111}) == {
        "rows": 33,
        "cols": 111,
    }
    await sidecar.prompt(sid, "$ stty size")
    assert "33 111" in last_tool_message((await sidecar.messages(sid))["messages"])["text"]

    # A running command sees a resize (SIGWINCH) made over HTTP.
    command = "trap 'stty size > winch.txt' WINCH; echo ready; while [ ! -s winch.txt ]; do sleep 0.05; done"
    turn = sidecar.prompt_task(sid, f"$ {command}")
    assert await eventually(lambda: "ready" in streamed_output(sidecar, sid))
    url, token = await sidecar.endpoint(sid)
    assert summary["http"] == {"url": url}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{url}/agent/resize",
            json={"rows": 50, "cols": 160},
            headers={"Authorization": f"Bearer {token}"},
        ) as response:
            assert response.status == 200 and await response.json() == {"rows": 50, "cols": 160}
        async with http.post(
            f"{url}/agent/resize",
            json={"rows": 0, "cols": "wide"},
            headers={"Authorization": f"Bearer {token}"},
        ) as response:
            assert response.status == 400
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "end_turn"
    assert (workspace / "winch.txt").read_text().strip() == "50 160"

    with pytest.raises(RpcError) as bad:
        await sidecar.call("_session/resize", {"sessionId": sid, "rows": 0, "cols": 80})
    assert bad.value.code == ErrorCode.INVALID_PARAMS and bad.value.data["field"] == "rows"


async def test_ansi_colour_is_kept_in_events_and_stripped_for_the_model(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace, backend="pty"))["sessionId"]
    await sidecar.prompt(sid, "$ printf '\\033[31mred\\033[0m plain\\n'")
    assert "\x1b[31mred\x1b[0m plain" in streamed_output(sidecar, sid)
    tool = last_tool_message((await sidecar.messages(sid))["messages"])
    assert "red plain" in tool["text"] and "\x1b" not in tool["text"]


async def test_cancel_sends_sigint_first_like_ctrl_c(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, backend="pty"))["sessionId"]
    mark, marked = marker()
    command = (
        f"{marked}trap 'echo interrupted > int.txt; exit 130' INT; echo $$ > leader.pid; "
        "sleep 1000 & wait"
    )
    turn = sidecar.prompt_task(sid, f"$ {command}")
    assert await eventually(lambda: has_line(workspace / "leader.pid"))
    leader = host_pid(mark, int((workspace / "leader.pid").read_text()))
    await asyncio.sleep(0.2)
    await sidecar.client.notify("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "cancelled"
    assert (workspace / "int.txt").read_text().strip() == "interrupted"
    assert await eventually(lambda: not pid_alive(leader))


async def test_no_orphans_from_a_pty_command_on_close(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, backend="pty"))["sessionId"]
    mark, marked = marker()
    command = (
        f"{marked}trap '' TERM INT; (sleep 1000 & echo $! > grandchild.pid; wait) & "
        "echo $$ > leader.pid; sleep 1000"
    )
    sidecar.prompt_task(sid, f"$ {command}")
    assert await eventually(
        lambda: has_line(workspace / "leader.pid") and has_line(workspace / "grandchild.pid")
    )
    await asyncio.sleep(0.2)
    pids = [
        host_pid(mark, int((workspace / name).read_text()))
        for name in ("leader.pid", "grandchild.pid")
    ]
    await sidecar.call("session/close", {"sessionId": sid})
    assert all(not pid_alive(pid) for pid in pids)


async def test_a_resumed_pty_session_gets_a_fresh_terminal(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace, backend="pty"))["sessionId"]
    await sidecar.call("_session/resize", {"sessionId": sid, "rows": 40, "cols": 100})
    await sidecar.call("session/close", {"sessionId": sid})
    resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
    assert resumed["_meta"]["backend"] == "pty" and resumed["_meta"]["generation"] == 2
    await sidecar.prompt(sid, "$ tty; stty size")
    content = last_tool_message((await sidecar.messages(sid))["messages"])["text"]
    assert re.search(r"/dev/(pts/\d+|console)", content) and "24 80" in content  # per runtime
