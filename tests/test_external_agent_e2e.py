"""An external ACP agent as a session's engine, end to end: the real sidecar over its
pipes runs our scripted ACP agent (tests/agents/scripted_agent.py, the acp SDK's agent
side) inside bubblewrap, and everything the host adds around an agent is checked from
the client's side: the agent picked at session/new and kept, its updates relayed and
stored, its permission requests through our consent, its fs/* and terminal/* served
contained, checkpoints and rewind of what it changed, staged stop with nothing left
running, resume of its own session, and every fault the issue lists.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from external_agents import AgentSetup
from harness import Sidecar, allow_once

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)


async def start(data_dir: Path, setup: AgentSetup, *args: str) -> Sidecar:
    return await Sidecar.start(data_dir, *setup.args(), "--interrupt-grace", "1", *args)


async def gone(setup: AgentSetup, seconds: float = 10.0) -> list[int]:
    """Wait until no process of the setup's agents is left; the ones left if not."""
    for _ in range(int(seconds / 0.05)):
        alive = setup.alive()
        if not alive:
            return []
        await asyncio.sleep(0.05)
    return setup.alive()


def texts(sidecar: Sidecar, sid: str, kind: str) -> str:
    return "".join(u["content"]["text"] for u in sidecar.updates(sid, kind))


@pytest.fixture
def setup(tmp_path: Path) -> AgentSetup:
    return AgentSetup(tmp_path / "agents")


async def test_a_turn_of_an_external_agent_is_relayed_consented_stored_and_rewound(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        listed = {a["name"]: a for a in (await sidecar.call("_session/agents", {}))["agents"]}
        assert listed["scripted"]["available"] is True
        assert listed["builtin"]["available"] is True
        summary = await sidecar.new_session(workspace, agent="scripted")
        sid = summary["sessionId"]
        assert summary["agent"] == "scripted" and summary["status"] == "idle"
        # The agent was told what a client offers and where the session works.
        received = setup.received("scripted")
        init = next(e for e in received if e.get("method") == "initialize")["params"]
        assert init["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True}
        assert init["clientCapabilities"]["terminal"] is True
        new = next(e for e in received if e.get("method") == "session/new")["params"]
        assert new["cwd"] == str(workspace)
        # What it advertised is shown with the agent.
        listed = {a["name"]: a for a in (await sidecar.call("_session/agents", {}))["agents"]}
        assert listed["scripted"]["capabilities"]["loadSession"] is True

        asked: list[dict[str, Any]] = []

        def answer(params: dict[str, Any]) -> Any:
            asked.append(params)
            return allow_once(params)

        sidecar.answer_permission = answer
        script = (
            "say hello there\nthink let me see\nplan read | write\nwrite notes.txt hi from agent"
        )
        result = await sidecar.prompt(sid, script)
        assert result["stopReason"] == "end_turn"
        assert (workspace / "notes.txt").read_text() == "hi from agent"
        # Its permission request reached our client, with our own option ids.
        assert len(asked) == 1 and asked[0]["toolCall"]["title"] == "Write notes.txt"
        assert {o["optionId"] for o in asked[0]["options"]} >= {"allow_once", "reject_once"}
        # ...and the agent got its own option id back.
        answers = [e for e in setup.received("scripted") if e.get("response_to")]
        assert any("yes-once" in str(e.get("result")) for e in answers), answers
        # Relayed as our own engine's events.
        assert texts(sidecar, sid, "agent_message_chunk") == "hello there"
        assert texts(sidecar, sid, "agent_thought_chunk") == "let me see"
        plans = sidecar.updates(sid, "plan")
        assert [e["content"] for e in plans[-1]["entries"]] == ["read", "write"]
        started = sidecar.updates(sid, "tool_call")
        assert started[0]["title"] == "Write notes.txt" and started[0]["kind"] == "edit"
        ended = [
            u for u in sidecar.updates(sid, "tool_call_update") if u.get("status") == "completed"
        ]
        assert ended and ended[-1]["toolCallId"] == started[0]["toolCallId"]
        # Stored: user, the text and the call, its result, the end.
        page = await sidecar.messages(sid)
        types = [m["type"] for m in page["messages"]]
        assert types == ["user", "assistant", "tool_result"], types
        assert page["messages"][0]["text"] == script
        assert page["messages"][2]["ok"] is True
        # What it changed is the turn's change, and a code rewind undoes it.
        changes = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 1})
        assert [f["path"] for f in changes["files"]] == ["notes.txt"], changes
        await sidecar.call("_session/rewind", {"sessionId": sid, "turn": 1, "scope": "code"})
        assert not (workspace / "notes.txt").exists()
        # Close stops it, and nothing of it is left.
        await sidecar.call("session/close", {"sessionId": sid})
        assert await gone(setup) == []
        # Resume: a new process, the agent's own session loaded (not replayed to us).
        before = (await sidecar.messages(sid))["total"]
        resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert resumed["_meta"]["agent"] == "scripted"
        methods = setup.methods("scripted")
        assert methods.count("initialize") == 2
        assert "session/resume" in methods or "session/load" in methods, methods
        assert (await sidecar.messages(sid))["total"] == before
        result = await sidecar.prompt(sid, "say again")
        assert result["stopReason"] == "end_turn"
    finally:
        await sidecar.close()
    assert await gone(setup) == []


async def test_a_refusal_is_the_agents_answer_and_nothing_is_written(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        sidecar.answer_permission = lambda params: {
            "outcome": {"outcome": "selected", "optionId": "reject_once"}
        }
        await sidecar.prompt(sid, "write notes.txt nope")
        assert not (workspace / "notes.txt").exists()
        failed = [
            u for u in sidecar.updates(sid, "tool_call_update") if u.get("status") == "failed"
        ]
        assert failed, sidecar.updates(sid, "tool_call_update")
        answers = [e for e in setup.received("scripted") if e.get("response_to")]
        assert any("no-once" in str(e.get("result")) for e in answers), answers
    finally:
        await sidecar.close()


async def test_fs_requests_are_confined_to_the_cwd(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted", approval="auto"))["sessionId"]
        (workspace / "in.txt").write_text("inside text")
        await sidecar.prompt(sid, f"read in.txt\nread {outside}\nread missing.txt")
        said = texts(sidecar, sid, "agent_message_chunk")
        assert "read: inside text" in said
        assert "secret" not in said and "read failed" in said and "outside" in said
        assert "read: " in said.split("read failed")[-1]  # the missing file read as empty
        # A write through fs/* outside the cwd is refused; the file outside is untouched.
        await sidecar.prompt(sid, f"write {outside} overwritten")
        assert outside.read_text() == "secret"
    finally:
        await sidecar.close()


async def test_the_agents_own_writes_are_contained_by_the_sandbox(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    # Not under /tmp: the sandbox has its own empty /tmp, where a write would land unseen.
    outside = Path(tempfile.mkdtemp(dir="/var/tmp"))
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted", approval="auto"))["sessionId"]
        await sidecar.prompt(sid, f"shell-write mine.txt ok\nshell-write {outside}/x.txt escaped")
        assert (workspace / "mine.txt").read_text() == "ok"
        assert not (outside / "x.txt").exists()
        failed = [
            u for u in sidecar.updates(sid, "tool_call_update") if u.get("status") == "failed"
        ]
        assert any("Read-only file system" in str(u.get("content")) for u in failed), failed
        # The data dir is hidden from it (an empty read-only mount), as from any command.
        await sidecar.prompt(sid, f"shell-write {tmp_path / 'data'}/planted.txt x")
        assert not (tmp_path / "data" / "planted.txt").exists()
    finally:
        await sidecar.close()
        shutil.rmtree(outside)


async def test_terminal_requests_run_contained_on_our_backend(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted", approval="auto"))["sessionId"]
        await sidecar.prompt(sid, "run echo from-terminal; touch made-by-terminal")
        assert "ran: from-terminal" in texts(sidecar, sid, "agent_message_chunk")
        assert (workspace / "made-by-terminal").exists()
    finally:
        await sidecar.close()


async def test_an_unknown_agent_is_refused_naming_the_field(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        with pytest.raises(RpcError) as caught:
            await sidecar.new_session(workspace, agent="nobody")
        assert caught.value.code == -32602 and "_meta.agent" in str(caught.value)
        listed = (await sidecar.call("session/list", {}))["sessions"]
        assert listed == []
    finally:
        await sidecar.close()


async def test_a_missing_command_says_how_to_install_it(tmp_path: Path, workspace: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", "--agent", "ghost=no-such-agent-program --acp")
    try:
        with pytest.raises(RpcError) as caught:
            await sidecar.new_session(workspace, agent="ghost")
        assert "no-such-agent-program" in str(caught.value)
        sid = caught.value.data["sessionId"]
        status = await sidecar.status(sid)
        assert status["status"] == "error" and "not installed" in status["lastError"]
        listed = {a["name"]: a for a in (await sidecar.call("_session/agents", {}))["agents"]}
        assert listed["ghost"]["available"] is False
        assert listed["claude"]["install"].startswith("npm install")
    finally:
        await sidecar.close()


async def test_an_unset_environment_variable_is_named_never_its_neighbours(
    tmp_path: Path, workspace: Path
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.keyed]\ncommand = ["true"]\nenv = { KEY = "${UNSET_AGENT_KEY_FOR_TEST}" }\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "UNSET_AGENT_KEY_FOR_TEST"}
    sidecar = await Sidecar.start(tmp_path / "data", "--agents-file", str(agents), env=env)
    try:
        with pytest.raises(RpcError) as caught:
            await sidecar.new_session(workspace, agent="keyed")
        status = await sidecar.status(caught.value.data["sessionId"])
        assert "UNSET_AGENT_KEY_FOR_TEST is not set" in status["lastError"]
    finally:
        await sidecar.close()


async def test_an_agent_that_crashes_mid_turn_errors_the_session_then_recovers(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted", approval="auto"))["sessionId"]
        with pytest.raises(RpcError) as caught:
            await sidecar.prompt(sid, "say before\nwrite a.txt x\ncrash")
        assert caught.value.code == -32050
        status = await sidecar.status(sid)
        assert status["status"] == "error"
        assert "'scripted'" in status["lastError"] and "crashing mid-turn" in status["lastError"]
        # The transcript stays well formed: every call has its result.
        page = (await sidecar.messages(sid))["messages"]
        calls = [c["toolCallId"] for m in page for c in m.get("toolCalls", [])]
        results = [m["toolCallId"] for m in page if m["type"] == "tool_result"]
        assert calls == results
        # The next prompt starts a new process.
        result = await sidecar.prompt(sid, "say back again")
        assert result["stopReason"] == "end_turn"
        assert setup.methods("scripted").count("initialize") == 2
    finally:
        await sidecar.close()
    assert await gone(setup) == []


@pytest.mark.parametrize("fail", ["initialize-exit", "new-exit", "new-hang", "initialize-hang"])
async def test_an_agent_that_fails_to_start_is_given_up_with_a_clear_error(
    tmp_path: Path, workspace: Path, setup: AgentSetup, fail: str
) -> None:
    setup.add("bad", fail=fail)
    sidecar = await start(tmp_path / "data", setup, "--agent-start-timeout", "3")
    try:
        with pytest.raises(RpcError) as caught:
            await sidecar.new_session(workspace, agent="bad")
        assert caught.value.code == -32049
        status = await sidecar.status(caught.value.data["sessionId"])
        assert status["status"] == "error" and "'bad'" in status["lastError"]
        if fail.endswith("hang"):
            assert "did not start within 3 s" in status["lastError"]
        else:
            assert "failing at" in status["lastError"]
    finally:
        await sidecar.close()
    assert await gone(setup) == []


async def test_garbage_big_lines_unknown_requests_and_strays_do_not_break_a_turn(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted", approval="auto"))["sessionId"]
        script = (
            "garbage\nbigline\nunknown-request\nother-session\nunannounced-permission\nsay done"
        )
        result = await sidecar.prompt(sid, script)
        assert result["stopReason"] == "end_turn"
        said = texts(sidecar, sid, "agent_message_chunk")
        assert said.endswith("done") and "unknown-request: -32601" in said
        assert "x" * 1000 in said  # the 1 MB chunk came through
        assert "leak" not in said  # the update for another session id was dropped
        assert "unannounced-permission: selected allow" in said or "selected" in said
        # The unannounced call was shown and recorded like any other.
        assert any(u["toolCallId"] == "never-announced" for u in sidecar.updates(sid, "tool_call"))
        again = await sidecar.prompt(sid, "say still here")
        assert again["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


async def test_cancel_is_sent_to_the_agent_and_a_stubborn_agent_is_stopped(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    setup.add("stubborn", ignore_eof="1", ignore_term="1")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        turn = sidecar.prompt_task(sid, "say working\nwait-cancel")
        await sidecar.wait_for(lambda m, p: "working" in str(p))
        await sidecar.call("session/cancel", {"sessionId": sid})
        result = await asyncio.wait_for(turn, 20)
        assert result["stopReason"] == "cancelled"
        assert "session/cancel" in setup.methods("scripted")
        await sidecar.call("session/close", {"sessionId": sid})
        assert await gone(setup) == []
        # An agent that ignores stdin EOF and SIGTERM, with a daemon of its own: close
        # still leaves nothing (SIGKILL to its group, its PID namespace with it).
        other = (await sidecar.new_session(workspace, agent="stubborn"))["sessionId"]
        agent_only = len(setup.alive())  # bwrap, its init, the agent
        pidfile = tmp_path / "agents" / "agent-state" / "daemon.pid"
        await sidecar.prompt(other, f"daemon {pidfile}")
        assert pidfile.read_text().strip().isdigit()  # a pid in the agent's own namespace
        assert len(setup.alive()) == agent_only + 1  # the daemon, outside the agent's group
        await sidecar.call("session/close", {"sessionId": other})
        assert await gone(setup) == []
    finally:
        await sidecar.close()
    assert await gone(setup) == []


async def test_sidecar_exit_stops_every_agent(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("stubborn", ignore_eof="1", ignore_term="1")
    sidecar = await start(tmp_path / "data", setup)
    try:
        for _ in range(2):
            await sidecar.new_session(workspace, agent="stubborn")
        assert len(setup.alive()) >= 2
    finally:
        assert await sidecar.close() == 0
    assert await gone(setup) == []


async def test_resume_of_an_agent_that_cannot_load_says_the_context_is_new(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("forgetful", caps="")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="forgetful"))["sessionId"]
        await sidecar.prompt(sid, "say one")
        await sidecar.call("session/close", {"sessionId": sid})
        await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        page = (await sidecar.messages(sid))["messages"]
        notes = [m for m in page if m["type"] == "marker" and m["kind"] == "agent"]
        assert notes and "does not know the conversation" in notes[-1]["text"]
        assert setup.methods("forgetful").count("session/new") == 2
    finally:
        await sidecar.close()


async def test_the_agents_own_settings_are_the_sessions_options_and_are_forwarded(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        opened = await sidecar.call(
            "session/new",
            {"cwd": str(workspace), "mcpServers": [], "_meta": {"agent": "scripted"}},
        )
        sid = opened["sessionId"]
        options = {o["id"]: o for o in opened["configOptions"]}
        assert "model" not in options  # the provider model is not this session's
        assert options["agent.model"]["currentValue"] == "fast"
        assert {c["value"] for c in options["agent.model"]["options"]} == {"fast", "smart"}
        assert options["agent.mode"]["currentValue"] == "default"
        assert {"mode", "approval", "sandbox"} <= set(options)  # ours stay
        changed = await sidecar.call(
            "session/set_config_option",
            {"sessionId": sid, "configId": "agent.model", "value": "smart"},
        )
        now = {o["id"]: o for o in changed["configOptions"]}
        assert now["agent.model"]["currentValue"] == "smart"
        sent = [
            e for e in setup.received("scripted") if e.get("method") == "session/set_config_option"
        ]
        assert sent and sent[-1]["params"]["value"] == "smart"
        await sidecar.call(
            "session/set_config_option",
            {"sessionId": sid, "configId": "agent.mode", "value": "plan"},
        )
        assert "session/set_mode" in setup.methods("scripted")
        with pytest.raises(RpcError) as caught:
            await sidecar.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": "agent.model", "value": "huge"},
            )
        assert caught.value.code == -32602 and "fast, smart" in str(caught.value)
        # The agent's own update of its settings (it sends one after each change) reaches
        # the client as ours would: more updates than our two answers sent.
        updates = sidecar.updates(sid, "config_option_update")
        assert len(updates) >= 3, updates
        assert "Traceback" not in "\n".join(sidecar.client.stderr_tail)
    finally:
        await sidecar.close()


async def test_usage_commands_and_a_conversation_rewind_for_an_external_agent(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        await sidecar.prompt(sid, "usage 120 30\ncommands\nsay ok")
        status = await sidecar.status(sid)
        assert status["usage"] == {"inputTokens": 120, "outputTokens": 30}
        commands = sidecar.updates(sid, "available_commands_update")
        assert [c["name"] for c in commands[-1]["availableCommands"]] == ["hello", "bye"]
        assert sidecar.updates(sid, "usage_update")[-1]["used"] == 150
        with pytest.raises(RpcError) as caught:
            await sidecar.call(
                "_session/rewind", {"sessionId": sid, "turn": 1, "scope": "conversation"}
            )
        assert caught.value.code == -32602 and "only scope 'code'" in str(caught.value)
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/compact", {"sessionId": sid, "keepTurns": 0})
        assert caught.value.code == -32602 and "keeps its own context" in str(caught.value)
    finally:
        await sidecar.close()


async def test_a_fork_keeps_the_agent_and_forks_its_session(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted", caps="load,resume,fork,close")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        await sidecar.prompt(sid, "say first")
        forked = await sidecar.call("session/fork", {"sessionId": sid, "cwd": str(workspace)})
        assert forked["_meta"]["agent"] == "scripted"
        forks = [e for e in setup.received("scripted") if e.get("method") == "session/fork"]
        assert len(forks) == 1
        result = await sidecar.prompt(forked["sessionId"], "say in the fork")
        assert result["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


async def test_prewarm_hands_a_ready_process_to_the_next_session_in_the_same_place(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup, "--prewarm", "scripted")

    async def initialized(count: int) -> None:
        for _ in range(400):
            if setup.methods("scripted").count("initialize") >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not {count} initializes: {setup.methods('scripted')}")

    try:
        await initialized(1)  # warm at start, for the sidecar's own directory
        first = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        # Elsewhere than the warm one: started cold; the warm one moves here.
        await initialized(3)
        news_before = setup.methods("scripted").count("session/new")
        second = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        # Taken warm: no new initialize was needed for it, only its session/new...
        assert setup.methods("scripted").count("session/new") == news_before + 1
        log = "\n".join(sidecar.client.stderr_tail)
        assert f"session {second} takes a warm process" in log
        assert f"session {first} takes a warm process" not in log
        result = await sidecar.prompt(second, "say warm hello")
        assert result["stopReason"] == "end_turn"
        assert "warm hello" in texts(sidecar, second, "agent_message_chunk")
        # ...and a replacement is made ready in the background.
        await initialized(4)
        for sid in (first, second):
            await sidecar.call("session/close", {"sessionId": sid})
    finally:
        assert await sidecar.close() == 0
    assert await gone(setup) == []  # the warm process too


async def test_the_sessions_mcp_servers_are_given_to_the_agent(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    servers = [{"name": "time", "command": "mcp-server-time", "args": [], "env": []}]
    try:
        opened = await sidecar.call(
            "session/new",
            {"cwd": str(workspace), "mcpServers": servers, "_meta": {"agent": "scripted"}},
        )
        new = [e for e in setup.received("scripted") if e.get("method") == "session/new"]
        assert new[-1]["params"]["mcpServers"] == servers
        await sidecar.call("session/close", {"sessionId": opened["sessionId"]})
        await sidecar.call(
            "session/resume", {"sessionId": opened["sessionId"], "cwd": str(workspace)}
        )
        again = [
            e
            for e in setup.received("scripted")
            if e.get("method") in ("session/resume", "session/load")
        ]
        assert again[-1]["params"]["mcpServers"] == servers
    finally:
        await sidecar.close()


async def test_a_killed_sidecar_leaves_no_agent_behind(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("stubborn", ignore_eof="1", ignore_term="1")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="stubborn"))["sessionId"]
        pidfile = tmp_path / "agents" / "agent-state" / "daemon.pid"
        await sidecar.prompt(sid, f"daemon {pidfile}")
        assert setup.alive()
    finally:
        sidecar.sigkill()
        await sidecar.wait_exit()
    # No code of the sidecar ran: bwrap's --die-with-parent and the watchdog did it.
    assert await gone(setup) == []


async def test_an_agents_permission_request_is_answered_over_http_and_always_becomes_a_rule(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def silent(params: dict[str, Any]) -> Any:
        return await never  # the stdio client never answers: the HTTP one does

    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        url, token = await sidecar.endpoint(sid)
        sidecar.answer_permission = silent
        turn = sidecar.prompt_task(sid, "write a.txt one")
        for _ in range(400):
            if sidecar.asked:
                break
            await asyncio.sleep(0.05)
        call_id = sidecar.asked[0]["toolCall"]["toolCallId"]
        waiting = (await sidecar.status(sid))["awaitingPermission"]
        assert waiting["toolCallId"] == call_id and waiting["title"] == "Write a.txt"
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{url}/agent/permissions",
                json={"toolCallId": call_id, "optionId": "allow_always"},
                headers={"Authorization": f"Bearer {token}"},
            ) as response:
                assert response.status == 200, await response.text()
        assert (await asyncio.wait_for(turn, 20))["stopReason"] == "end_turn"
        assert (workspace / "a.txt").read_text() == "one"
        assert (await sidecar.status(sid))["awaitingPermission"] is None
        # The "always" became one of OUR rules; the agent is told "once" (were it to keep
        # an "always" of its own, a rule the user later removes here would not bind it).
        answers = [e for e in setup.received("scripted") if e.get("response_to")]
        assert any("yes-once" in str(e.get("result")) for e in answers), answers
        assert not any("yes-always" in str(e.get("result")) for e in answers), answers
        rules = (await sidecar.call("_session/permissions", {"sessionId": sid}))["rules"]
        assert rules, "an always answer is a durable rule"
        # The same request again: the rule answers, nobody is asked.
        asked_before = len(sidecar.asked)
        await asyncio.wait_for(sidecar.prompt(sid, "write a.txt two"), 20)
        assert (workspace / "a.txt").read_text() == "two"
        assert len(sidecar.asked) == asked_before
    finally:
        never.cancel()
        await sidecar.close()


async def test_an_agent_that_can_only_load_is_loaded_and_its_replay_not_stored_twice(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("loader", caps="load")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="loader"))["sessionId"]
        await sidecar.prompt(sid, "say remembered")
        before = (await sidecar.messages(sid))["total"]
        shown_before = len(sidecar.updates(sid, "agent_message_chunk"))
    finally:
        await sidecar.close()
    # Restarted: the record keeps the agent and the agent's session id.
    sidecar = await start(tmp_path / "data", setup)
    try:
        status = await sidecar.status(sid)
        assert status["agent"] == "loader"
        await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert "session/load" in setup.methods("loader")
        # The agent replayed its history (user and agent chunks): not relayed, not stored.
        assert (await sidecar.messages(sid))["total"] == before
        assert len(sidecar.updates(sid, "agent_message_chunk")) == 0 <= shown_before
        result = await sidecar.prompt(sid, "say after load")
        assert result["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


async def test_an_isolated_home_is_the_agents_own_and_writable(
    tmp_path: Path, workspace: Path
) -> None:
    agents = tmp_path / "agents.toml"
    script = Path(__file__).resolve().parent / "agents" / "scripted_agent.py"
    agents.write_text(
        "[agents.homed]\n"
        f"command = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n"
        "isolated_home = true\n"
    )
    sidecar = await Sidecar.start(tmp_path / "data", "--agents-file", str(agents))
    try:
        sid = (await sidecar.new_session(workspace, agent="homed", approval="auto"))["sessionId"]
        home = tmp_path / "data" / "agent-homes" / sid
        await sidecar.prompt(sid, f"shell-write {home}/state.txt kept")
        assert (home / "state.txt").read_text() == "kept"
        # Its home is its own: the rest of the data dir stays hidden from it.
        await sidecar.prompt(sid, f"shell-write {tmp_path / 'data'}/planted.txt x")
        assert not (tmp_path / "data" / "planted.txt").exists()
    finally:
        await sidecar.close()


async def test_an_agent_installed_under_tmp_starts_in_the_sandbox_private_tmp(
    tmp_path: Path, workspace: Path
) -> None:
    # The sandbox's /tmp is its own: a program there (a clone, a venv, node_modules under
    # /tmp) is bound in read-only, or the agent could not even start.
    assert str(tmp_path).startswith("/tmp/")
    install = tmp_path / "install" / "node_modules" / "agent"
    install.mkdir(parents=True)
    script = install / "agent.py"
    shutil.copy(Path(__file__).resolve().parent / "agents" / "scripted_agent.py", script)
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f"[agents.tmp]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]\n"
    )
    sidecar = await Sidecar.start(tmp_path / "data", "--agents-file", str(agents))
    try:
        sid = (await sidecar.new_session(workspace, agent="tmp", approval="auto"))["sessionId"]
        await sidecar.prompt(sid, f"say started\nshell-write {install}/planted.txt x")
        assert "started" in texts(sidecar, sid, "agent_message_chunk")
        assert not (install / "planted.txt").exists()  # read-only, as everything else
    finally:
        await sidecar.close()


async def test_an_agent_that_ignores_cancel_is_stopped_after_the_grace(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("deaf")
    sidecar = await start(tmp_path / "data", setup)  # --interrupt-grace 1
    try:
        sid = (await sidecar.new_session(workspace, agent="deaf"))["sessionId"]
        turn = sidecar.prompt_task(sid, "say working\nblock 60")
        for _ in range(400):  # the agent's own words: it runs the turn (and then blocks)
            if "working" in texts(sidecar, sid, "agent_message_chunk"):
                break
            await asyncio.sleep(0.05)
        await sidecar.call("session/cancel", {"sessionId": sid})
        result = await asyncio.wait_for(turn, 20)  # not the 60 s the agent blocks for
        assert result["stopReason"] == "cancelled"
        assert await gone(setup) == []  # stopped in stages: nothing of it is left
        # That generation's agent is gone: the session says so, naming it, and the next
        # prompt runs on a new process.
        await sidecar.wait_state(sid, "error")
        last_error = (await sidecar.status(sid))["lastError"]
        assert "'deaf' did not end a cancelled turn within 1 s" in last_error
        assert (await sidecar.prompt(sid, "say back"))["stopReason"] == "end_turn"
        assert "back" in texts(sidecar, sid, "agent_message_chunk")
    finally:
        await sidecar.close()
    assert await gone(setup) == []


async def test_an_agent_that_exits_between_turns_puts_the_session_in_error_and_the_next_prompt_runs(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("scripted")
    sidecar = await start(tmp_path / "data", setup)
    try:
        sid = (await sidecar.new_session(workspace, agent="scripted"))["sessionId"]
        assert (await sidecar.prompt(sid, "say bye\nexit-after-reply"))["stopReason"] == "end_turn"
        await sidecar.wait_state(sid, "error")
        status = await sidecar.status(sid)
        assert "'scripted' exited with status 0" in status["lastError"]
        assert "exiting after reply" in status["lastError"]
        # Not a failed prompt first: the next one starts a new generation at once.
        assert (await sidecar.prompt(sid, "say back"))["stopReason"] == "end_turn"
        assert setup.methods("scripted").count("initialize") == 2
        assert (await sidecar.status(sid))["lastError"] is None
    finally:
        await sidecar.close()
    assert await gone(setup) == []
