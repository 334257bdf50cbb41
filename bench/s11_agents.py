"""Scenario 11: an external ACP agent (our scripted one) through the sidecar beside the same
agent driven directly -- what the host adds to a session's start (`session/new`, which
answers once the agent's own `initialize` and `session/new` have), to a plain turn, with
`--prewarm` (an initialized agent process kept ready), in memory per session with one
process per session, and with sessions sharing one process (`shared_process`).

One sidecar over stdio (`--no-checkpoints`, the agent from an agents.toml, run in
bubblewrap, as `scripted` and as `scripted-shared`) and, in the same shuffled rounds, the
agent spawned here and driven by the acp SDK's client (`connect_to_agent`) and by the
bench's pipe client (bench/s11_direct.py); a second sidecar with `--prewarm scripted`
where the sidecar accepts it. Tables, targets and plot: bench/s11_report.py.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from bench.core import ScenarioResult, Settings, python
from bench.pipes import PipeClient, floor_argv, initialize, prompt_params, sidecar_argv
from bench.s11_direct import (
    NAME,
    SHARED_NAME,
    PipeAgent,
    SdkAgent,
    agent_env,
    agents_toml,
    marked,
    new_marker,
    rss_kib,
)
from bench.s11_report import (
    BUILTIN,
    DIRECT,
    FLOOR,
    KEY,
    PIPE,
    PREWARM_SETTLE,
    SIDECAR,
    TITLE,
    Measured,
    Memory,
    Shared,
    describe,
)
from sidecar.agent.sandbox import probe

SAY = "say hi"  # the scripted agent answers agent text "hi"
SETTLE = 10.0  # s a closed session's agent processes may take to be gone


def run(settings: Settings) -> ScenarioResult:
    status = probe()
    if not status.available:
        reason = f"bubblewrap is unavailable: {status.reason}"
        return ScenarioResult(KEY, TITLE, summary=f"skipped: {reason}", skipped=reason)
    work = settings.work / "s11"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    measured = asyncio.run(_measure(settings, work, settings.rng(KEY)))
    return describe(settings, measured)


def prewarm_accepted() -> bool:
    """Whether this sidecar has `--prewarm` (being built beside this scenario)."""
    done = subprocess.run(
        [python(), "-m", "sidecar", "--help"], capture_output=True, text=True, timeout=120
    )
    return "--prewarm" in done.stdout


class Sides:
    """Every side of the scenario's first sidecar run, and how each is driven."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.marker = new_marker()  # the sidecar's agents, one process per session
        self.shared_marker = new_marker()  # the sidecar's agent declared shared_process
        self.direct_marker = new_marker()  # the agents spawned here
        self.direct_env = agent_env(work / "direct", self.direct_marker)
        toml = agents_toml(work, self.marker, self.shared_marker)
        self.cwd = work / "cwd"
        self.cwd.mkdir()
        argv = sidecar_argv(work / "data", "sqlite", "--no-checkpoints", "--agents-file", str(toml))
        self.sidecar = PipeClient(argv, work / "sidecar.log")
        self.floor = PipeClient(floor_argv(evented=True), work / "floor.log")
        self.direct_log: IO[bytes] = open(work / "direct-agents.log", "ab")  # noqa: SIM115
        self.problems: list[str] = []

    def close(self) -> None:
        self.sidecar.close()
        self.floor.close()
        self.direct_log.close()

    def new_session(self, cwd: Path, agent: str | None = NAME) -> tuple[float, str]:
        """ms from the `session/new` write to its answer, and the session id."""
        meta = {"agent": agent} if agent else {}
        params = {"cwd": str(cwd), "mcpServers": [], "_meta": meta}
        took, result = self.sidecar.timed("session/new", params)
        if agent and (result.get("_meta") or {}).get("agent") != agent:
            self.problems.append(f"session/new did not run agent {agent}: {result.get('_meta')}")
        return took / 1000.0, str(result["sessionId"])

    def close_session(self, session_id: str) -> float:
        took, _ = self.sidecar.timed("session/close", {"sessionId": session_id})
        return took / 1000.0

    def turn(self, session_id: str, text: str, expect: str) -> float:
        """ms from the `session/prompt` write to its answer; checks the agent's text."""
        said: list[str] = []

        def note(message: dict[str, Any]) -> None:
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") == "agent_message_chunk":
                said.append(str((update.get("content") or {}).get("text")))

        started = time.perf_counter_ns()
        answer = self.sidecar.call("session/prompt", prompt_params(session_id, text), note)
        took = (time.perf_counter_ns() - started) / 1e6
        if answer.get("stopReason") != "end_turn" or "".join(said) != expect:
            self.problems.append(f"{text!r} answered {answer.get('stopReason')} {said!r}")
        return took

    def settle(self) -> None:
        """Wait (untimed) until no agent of a closed session is left running."""
        deadline = time.monotonic() + SETTLE
        while marked(self.marker) or marked(self.shared_marker):
            if time.monotonic() > deadline:
                self.problems.append(f"agent processes left {SETTLE:g} s after session/close")
                return
            time.sleep(0.02)


async def _measure(settings: Settings, work: Path, rng: random.Random) -> Measured:
    m = Measured()
    sides = Sides(work)
    try:
        initialize(sides.sidecar)
        await _creations(sides, m, rng, settings.pick(1, 2, 3), settings.pick(3, 15, 40))
        await _turns(sides, m, rng, settings.pick(2, 10, 20), settings.pick(5, 100, 300))
        await _memory(sides, m, settings.pick(3, 10, 10))
        await _shared(sides, m, settings.pick(3, 10, 10))
    finally:
        sides.close()
    if left := marked(sides.marker) + marked(sides.shared_marker) + marked(sides.direct_marker):
        sides.problems.append(f"{len(left)} agent processes outlived their sidecar or client")
    m.problems += sides.problems
    if prewarm_accepted():
        _prewarm(work / "prewarm", m, settings.pick(1, 2, 3), settings.pick(3, 10, 30))
    else:
        m.prewarm_state = (
            "this sidecar does not accept `--prewarm` yet (`python -m sidecar --help`)"
        )
    return m


async def _creations(sides: Sides, m: Measured, rng: random.Random, warmup: int, reps: int) -> None:
    """Start, answer, close: every side once per round, in a shuffled order."""
    kinds = [SIDECAR, DIRECT, PIPE, BUILTIN]
    m.new_ms = {k: [] for k in kinds}
    m.close_ms = {k: [] for k in kinds}
    builtin_cwd = sides.work / "cwd-builtin"
    builtin_cwd.mkdir()
    for n in range(warmup + reps):
        rng.shuffle(kinds)
        for kind in kinds:
            if kind == SIDECAR:
                sides.settle()
                took, sid = sides.new_session(sides.cwd)
                closed = sides.close_session(sid)
            elif kind == BUILTIN:
                took, sid = sides.new_session(builtin_cwd, agent=None)
                closed = sides.close_session(sid)
            elif kind == DIRECT:
                sdk = SdkAgent(sides.cwd, sides.direct_log, sides.direct_env)
                took = await sdk.start()
                closed = await sdk.close()
            else:
                pipe = PipeAgent(sides.cwd, sides.work / "pipe-agents.log", sides.direct_env)
                took = pipe.start()
                closed = pipe.close()
            if n >= warmup:
                m.new_ms[kind].append(took)
                m.close_ms[kind].append(closed)


async def _turns(sides: Sides, m: Measured, rng: random.Random, warmup: int, rounds: int) -> None:
    """`say hi` to one session of each side per round, shuffled; the builtin engine's
    "hi" and the floor's round trip in the same rounds."""
    sides.settle()
    _, external = sides.new_session(sides.cwd)
    _, builtin = sides.new_session(sides.work / "cwd-builtin", agent=None)
    sdk = SdkAgent(sides.cwd, sides.direct_log, sides.direct_env)
    await sdk.start()
    pipe = PipeAgent(sides.cwd, sides.work / "pipe-agents.log", sides.direct_env)
    pipe.start()
    kinds = [SIDECAR, BUILTIN, DIRECT, PIPE, FLOOR]
    m.turn_ms = {k: [] for k in kinds}
    try:
        for n in range(warmup + rounds):
            rng.shuffle(kinds)
            for kind in kinds:
                if kind == SIDECAR:
                    took = sides.turn(external, SAY, "hi")
                elif kind == BUILTIN:
                    took = sides.turn(builtin, "hi", "Echo: hi")
                elif kind == DIRECT:
                    took, stop = await sdk.turn(SAY)
                    _stopped(sides, kind, stop)
                elif kind == PIPE:
                    took, stop = pipe.turn(SAY)
                    _stopped(sides, kind, stop)
                else:
                    us, _ = sides.floor.timed("session/prompt", prompt_params("s", SAY))
                    took = us / 1000.0
                if n >= warmup:
                    m.turn_ms[kind].append(took)
        await asyncio.sleep(0)  # the SDK may route the last chunk after the answer
        if sdk.client.texts.count("hi") != warmup + rounds:
            sides.problems.append(f"the SDK client heard {len(sdk.client.texts)} texts")
    finally:
        await sdk.close()
        pipe.close()
        sides.close_session(external)
        sides.close_session(builtin)


def _stopped(sides: Sides, kind: str, stop: str) -> None:
    if stop not in ("end_turn", "StopReason.end_turn"):
        sides.problems.append(f"{kind}: a turn ended {stop}")


async def _memory(sides: Sides, m: Measured, count: int) -> None:
    """RSS with `count` sessions open (each after one turn), one agent process each: the
    agent processes (found by the marker in their env) and the sidecar's growth over its
    RSS with none; then as many agents spawned here (after those sessions closed)."""
    sides.settle()
    memory = Memory(sessions=count, sidecar_before_kib=rss_kib(sides.sidecar.pid))
    opened = []
    for _ in range(count):
        _, sid = sides.new_session(sides.cwd)
        sides.turn(sid, SAY, "hi")
        opened.append(sid)
    agents = marked(sides.marker)
    memory.agent_processes = len(agents)
    memory.agent_kib = sum(rss_kib(pid) for pid in agents)
    memory.sidecar_after_kib = rss_kib(sides.sidecar.pid)
    for sid in opened:
        sides.close_session(sid)
    direct = [SdkAgent(sides.cwd, sides.direct_log, sides.direct_env) for _ in range(count)]
    try:
        for agent in direct:
            await agent.start()
            await agent.turn(SAY)
        mine = marked(sides.direct_marker)
        memory.direct_processes = len(mine)
        memory.direct_kib = sum(rss_kib(pid) for pid in mine)
    finally:
        for agent in direct:
            await agent.close()
    m.memory = memory


async def _shared(sides: Sides, m: Measured, count: int) -> None:
    """`count` sessions of the agent declared `shared_process`, in one place, opened one
    after another (each after one turn): the RSS of its process tree (bwrap and the
    agent, found by their marker) and of the sidecar after each, and `session/new` of
    each session that joins the live process. Beside it, the agent spawned here with the
    SDK client opening as many sessions on its one connection."""
    sides.settle()
    shared = Shared(sessions=count)
    opened = []
    try:
        for n in range(count):
            took, sid = sides.new_session(sides.cwd, agent=SHARED_NAME)
            sides.turn(sid, SAY, "hi")
            opened.append(sid)
            if n:
                shared.join_ms.append(took)
            tree = marked(sides.shared_marker)
            shared.processes = max(shared.processes, len(tree))
            shared.tree_kib.append(sum(rss_kib(pid) for pid in tree))
            shared.sidecar_kib.append(rss_kib(sides.sidecar.pid))
    finally:
        for sid in opened:
            sides.close_session(sid)
    agent = SdkAgent(sides.cwd, sides.direct_log, sides.direct_env)
    try:
        await agent.start()
        await agent.turn(SAY)
        assert agent.process is not None
        shared.direct_kib.append(rss_kib(agent.process.pid))
        for _ in range(count - 1):
            took, sid = await agent.open()
            _, stop = await agent.turn(SAY, sid)
            _stopped(sides, "direct, one connection", stop)
            shared.direct_join_ms.append(took)
            shared.direct_kib.append(rss_kib(agent.process.pid))
    finally:
        await agent.close()
    m.shared = shared


def _prewarm(work: Path, m: Measured, warmup: int, reps: int) -> None:
    """`session/new` in the directory of the agent's last session, with `--prewarm scripted`:
    one session first sets the directory; each later one is made PREWARM_SETTLE s after the
    last was closed, so the warm process taken has been replaced."""
    work.mkdir(parents=True)
    marker = new_marker()
    toml = agents_toml(work, marker)
    cwd = work / "cwd"
    cwd.mkdir()
    argv = sidecar_argv(work / "data", "sqlite", "--no-checkpoints", "--agents-file", str(toml))
    client = PipeClient([*argv, "--prewarm", NAME], work / "sidecar.log")
    params = {"cwd": str(cwd), "mcpServers": [], "_meta": {"agent": NAME}}
    try:
        initialize(client)
        for n in range(1 + warmup + reps):
            if n:
                time.sleep(PREWARM_SETTLE)
            took, result = client.timed("session/new", params)
            client.call("session/close", {"sessionId": result["sessionId"]})
            m.prewarm_processes = max(m.prewarm_processes, len(marked(marker)))
            if n > warmup:
                m.prewarm_ms.append(took / 1000.0)
    finally:
        client.close()
    if left := marked(marker):
        m.problems.append(f"{len(left)} agent processes outlived the prewarmed sidecar")
