"""Sessions sharing one external agent process, end to end: the real sidecar over its
pipes, our scripted ACP agent (tests/agents/scripted_agent.py) declared `shared_process`
in an agents.toml, in bubblewrap. Sessions of that agent in the same sandbox (same cwd,
same mode) run on one process, each with its own agent session; every update and request
reaches only the session it names; a close, a cancel, a stubborn turn or a crash of one
session is handled without taking the others' work down silently.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from harness import Sidecar

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

SHARED = "shared"


async def start(data_dir: Path, setup: AgentSetup, *args: str) -> Sidecar:
    return await Sidecar.start(data_dir, *setup.args(), "--interrupt-grace", "1", *args)


async def settled(check: Any, seconds: float = 10.0) -> bool:
    """Wait until `check()` holds (processes stopping, a log line written)."""
    for _ in range(int(seconds / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())


def texts(sidecar: Sidecar, sid: str) -> str:
    return "".join(u["content"]["text"] for u in sidecar.updates(sid, "agent_message_chunk"))


@pytest.fixture
def setup(tmp_path: Path) -> AgentSetup:
    return AgentSetup(tmp_path / "agents").add(SHARED, shared=True)


async def test_two_sessions_share_one_process_and_each_hears_only_its_own(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup)
    try:
        first = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        second = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        methods = setup.methods(SHARED)
        assert methods.count("initialize") == 1 and methods.count("session/new") == 2
        assert len(setup.agents()) == 1
        ends = await asyncio.gather(
            sidecar.prompt(first, "say alpha"), sidecar.prompt(second, "say beta")
        )
        assert [end["stopReason"] for end in ends] == ["end_turn", "end_turn"]
        assert texts(sidecar, first) == "alpha" and texts(sidecar, second) == "beta"
        assert [m["type"] for m in (await sidecar.messages(second))["messages"]] == [
            "user",
            "assistant",
        ]
        # Closing one ends its agent session; the process stays for the other.
        agent_first = setup.agent_session(SHARED, "say alpha")
        await sidecar.call("session/close", {"sessionId": first})
        closed = [e for e in setup.received(SHARED) if e.get("method") == "session/close"]
        assert [e["params"]["sessionId"] for e in closed] == [agent_first]
        assert len(setup.agents()) == 1
        assert (await sidecar.prompt(second, "say still"))["stopReason"] == "end_turn"
        assert texts(sidecar, second) == "betastill"
        # The last one out stops it.
        await sidecar.call("session/close", {"sessionId": second})
        assert await settled(lambda: setup.alive() == [])
    finally:
        await sidecar.close()
    assert setup.alive() == []


async def test_what_the_agent_sends_before_it_answers_session_new_is_that_sessions(
    tmp_path: Path, workspace: Path
) -> None:
    setup = AgentSetup(tmp_path / "agents").add(SHARED, shared=True, commands_on_new="1")
    sidecar = await start(tmp_path / "data", setup)
    try:
        first = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        second = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        assert setup.methods(SHARED).count("initialize") == 1
        for sid in (first, second):
            (commands,) = sidecar.updates(sid, "available_commands_update")
            assert [c["name"] for c in commands["availableCommands"]] == ["hello", "bye"]
    finally:
        await sidecar.close()


async def test_ten_sessions_run_their_turns_at_once_on_one_process(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup)
    try:
        sids = [
            (await sidecar.new_session(workspace, agent=SHARED))["sessionId"] for _ in range(10)
        ]
        assert setup.methods(SHARED).count("initialize") == 1
        assert len(setup.agents()) == 1
        ends = await asyncio.gather(
            *(sidecar.prompt(sid, f"say turn-{n}\nsay .") for n, sid in enumerate(sids))
        )
        assert {end["stopReason"] for end in ends} == {"end_turn"}
        for n, sid in enumerate(sids):
            assert texts(sidecar, sid) == f"turn-{n}."
        ids = {setup.agent_session(SHARED, f"say turn-{n}\nsay .") for n in range(10)}
        assert len(ids) == 10  # each session its own agent session
    finally:
        assert await sidecar.close() == 0
    assert await settled(lambda: setup.alive() == [])


async def test_each_sessions_requests_go_through_its_own_consent_and_rules(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup)

    def answer(params: dict[str, Any]) -> Any:
        option = "allow_always" if params["sessionId"] == second else "allow_once"
        return {"outcome": {"outcome": "selected", "optionId": option}}

    sidecar.answer_permission = answer
    try:
        first = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        second = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        auto = (await sidecar.new_session(workspace, agent=SHARED, approval="auto"))["sessionId"]
        assert len(setup.agents()) == 1
        # The same request from each: asked of the session it came from.
        await sidecar.prompt(second, "write a.txt from second")
        await sidecar.prompt(first, "write a.txt from first")
        assert [p["sessionId"] for p in sidecar.asked] == [second, first]
        assert (workspace / "a.txt").read_text() == "from first"
        # The second's "always" is the second's rule: it binds only the second.
        await sidecar.prompt(second, "write a.txt again second")
        await sidecar.prompt(first, "write a.txt again first")
        assert [p["sessionId"] for p in sidecar.asked] == [second, first, first]
        assert (await sidecar.call("_session/permissions", {"sessionId": second}))["rules"]
        assert not (await sidecar.call("_session/permissions", {"sessionId": first}))["rules"]
        # A session whose approval is auto is never asked, its neighbours still are.
        await sidecar.prompt(auto, "write b.txt from auto")
        assert (workspace / "b.txt").read_text() == "from auto"
        assert len(sidecar.asked) == 3
    finally:
        await sidecar.close()


async def test_a_request_naming_a_session_the_process_does_not_serve_is_refused(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("the other process's session")
    (workspace / "mine.txt").write_text("mine")
    sidecar = await start(tmp_path / "data", setup)
    try:
        here = (await sidecar.new_session(workspace, agent=SHARED, approval="auto"))["sessionId"]
        there = (await sidecar.new_session(elsewhere, agent=SHARED, approval="auto"))["sessionId"]
        assert setup.methods(SHARED).count("initialize") == 2  # another cwd, another process
        await sidecar.prompt(there, "say over there")
        foreign = setup.agent_session(SHARED, "say over there")
        await sidecar.prompt(here, "say over here")
        own = setup.agent_session(SHARED, "say over here")
        await sidecar.prompt(
            here,
            f"read-as {foreign} {elsewhere / 'secret.txt'}\n"
            "read-as nobody mine.txt\n"
            f"read-as {own} mine.txt",
        )
        said = texts(sidecar, here)
        assert said.count("read-as failed: -32602") == 2, said
        assert "the other process's session" not in said
        assert said.endswith("read-as: mine")
    finally:
        await sidecar.close()


async def test_a_cancel_reaches_only_the_session_it_names(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    gate = workspace / "go"
    sidecar = await start(tmp_path / "data", setup)
    try:
        first = (await sidecar.new_session(workspace, agent=SHARED, approval="auto"))["sessionId"]
        second = (await sidecar.new_session(workspace, agent=SHARED, approval="auto"))["sessionId"]
        waiting = sidecar.prompt_task(first, "say a\nwait-cancel")
        # The second's turn runs until the test opens the gate (a command of its own).
        working = sidecar.prompt_task(
            second, f"say b\nrun while [ ! -e {gate} ]; do sleep 0.05; done; echo through"
        )
        assert await settled(lambda: "a" in texts(sidecar, first) and "b" in texts(sidecar, second))
        await sidecar.call("session/cancel", {"sessionId": first})
        assert (await asyncio.wait_for(waiting, 20))["stopReason"] == "cancelled"
        assert not working.done()
        gate.touch()
        assert (await asyncio.wait_for(working, 20))["stopReason"] == "end_turn"
        assert "ran: through" in texts(sidecar, second)
        cancels = [e for e in setup.received(SHARED) if e.get("method") == "session/cancel"]
        assert [e["params"]["sessionId"] for e in cancels] == [
            setup.agent_session(SHARED, "say a\nwait-cancel")
        ]
    finally:
        await sidecar.close()


async def test_a_crash_of_the_shared_process_fails_the_turns_and_every_session_recovers(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup)
    try:
        first = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        second = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        idle = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        working = sidecar.prompt_task(first, "say working\nwait-cancel")
        assert await settled(lambda: "working" in texts(sidecar, first))
        with pytest.raises(RpcError) as crashed:
            await sidecar.prompt(second, "crash")
        with pytest.raises(RpcError) as lost:
            await asyncio.wait_for(working, 20)
        for caught in (crashed, lost):
            assert caught.value.code == -32050
        # Every session on it is in error, the agent named: the two whose turns failed,
        # and the idle one (told at once, not at its next prompt).
        await sidecar.wait_state(idle, "error")
        for sid in (first, second, idle):
            status = await sidecar.status(sid)
            assert status["status"] == "error"
            assert (
                f"{SHARED!r}" in status["lastError"] and "crashing mid-turn" in status["lastError"]
            )
        # Each recovers on its next prompt, and they share a new process again.
        ends = await asyncio.gather(
            sidecar.prompt(first, "say back one"),
            sidecar.prompt(second, "say back two"),
            sidecar.prompt(idle, "say back three"),
        )
        assert [end["stopReason"] for end in ends] == ["end_turn"] * 3
        assert texts(sidecar, idle) == "back three"
        assert setup.methods(SHARED).count("initialize") == 2
        assert len(setup.agents()) == 1
    finally:
        await sidecar.close()
    assert await settled(lambda: setup.alive() == [])


async def test_a_turn_that_ignores_its_cancel_detaches_its_session_not_the_others(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup)  # --interrupt-grace 1
    try:
        stubborn = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        other = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        turn = sidecar.prompt_task(stubborn, "say working\nignore-cancel 600")
        assert await settled(lambda: "working" in texts(sidecar, stubborn))
        await sidecar.call("session/cancel", {"sessionId": stubborn})
        assert (await asyncio.wait_for(turn, 20))["stopReason"] == "cancelled"
        # The process was not stopped: the other session's work goes on.
        assert len(setup.agents()) == 1
        assert (await sidecar.prompt(other, "say unharmed"))["stopReason"] == "end_turn"
        # The detached session says so, then starts on a process of its own: the old
        # one, still running that turn, takes no new session.
        await sidecar.wait_state(stubborn, "error")
        assert "left the agent process" in (await sidecar.status(stubborn))["lastError"]
        assert (await sidecar.prompt(stubborn, "say anew"))["stopReason"] == "end_turn"
        assert setup.methods(SHARED).count("initialize") == 2
        late = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        assert setup.methods(SHARED).count("initialize") == 2  # joined the new one
        assert len(setup.agents()) == 2
        # The old process goes when the last session on it leaves.
        await sidecar.call("session/close", {"sessionId": other})
        assert await settled(lambda: len(setup.agents()) == 1)
        assert (await sidecar.prompt(late, "say fine"))["stopReason"] == "end_turn"
    finally:
        await sidecar.close()
    assert await settled(lambda: setup.alive() == [])


async def test_other_places_and_unshared_agents_get_processes_of_their_own(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    setup.add("solo")
    other = tmp_path / "other"
    other.mkdir()
    sidecar = await start(tmp_path / "data", setup)
    try:
        await sidecar.new_session(workspace, agent=SHARED)
        await sidecar.new_session(other, agent=SHARED)  # another cwd
        await sidecar.new_session(workspace, agent=SHARED, sandbox="off")  # another mode
        await sidecar.new_session(workspace, agent=SHARED)  # joins the first
        assert setup.methods(SHARED).count("initialize") == 3
        for _ in range(2):
            await sidecar.new_session(workspace, agent="solo")  # not declared shareable
        assert setup.methods("solo").count("initialize") == 2
        assert len(setup.agents()) == 5
    finally:
        assert await sidecar.close() == 0
    assert await settled(lambda: setup.alive() == [])


async def test_a_warm_process_becomes_the_first_of_a_shared_group(
    tmp_path: Path, workspace: Path, setup: AgentSetup
) -> None:
    sidecar = await start(tmp_path / "data", setup, "--prewarm", SHARED)

    def initialized() -> int:
        return setup.methods(SHARED).count("initialize")

    try:
        assert await settled(lambda: initialized() == 1, 20)  # warm, in the sidecar's cwd
        first = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        assert await settled(lambda: initialized() == 3, 20)  # cold here; the warm one moved
        await sidecar.call("session/close", {"sessionId": first})
        second = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        third = (await sidecar.new_session(workspace, agent=SHARED))["sessionId"]
        log = "\n".join(sidecar.client.stderr_tail)
        assert f"session {second} takes a warm process" in log
        assert f"session {third} shares a process with 1 other session" in log
        assert await settled(lambda: initialized() == 4, 20)  # the warm one's replacement
        ends = await asyncio.gather(
            sidecar.prompt(second, "say warm two"), sidecar.prompt(third, "say warm three")
        )
        assert [end["stopReason"] for end in ends] == ["end_turn", "end_turn"]
        assert texts(sidecar, third) == "warm three"
    finally:
        assert await sidecar.close() == 0
    assert await settled(lambda: setup.alive() == [])
