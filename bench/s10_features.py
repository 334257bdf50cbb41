"""Scenario 10: the new features beside their floors and peers -- what asking the client
(`session/request_permission`) adds to a tool call, what the command sandbox (bubblewrap)
costs a command's start, and what an MCP tool call costs through a turn against the MCP
SDK's own client calling the same server.

Turns over stdio to one real sidecar (bench/s10_turns.py); command starts and the MCP
peer in this process (bench/s10_direct.py); tables, targets and plot: bench/s10_report.py.
Checkpoints are scenario 7's (its `git status` floor included).
"""

from __future__ import annotations

import asyncio
import shutil

from bench import s10_direct, s10_turns
from bench.core import ScenarioResult, Settings, interleaved
from bench.s10_report import KEY, TITLE, Measured, describe
from sidecar.agent.sandbox import probe


def run(settings: Settings) -> ScenarioResult:
    status = probe()
    if not status.available or status.bwrap is None:
        reason = f"bubblewrap is unavailable: {status.reason}"
        return ScenarioResult(KEY, TITLE, summary=f"skipped: {reason}", skipped=reason)
    rounds = settings.pick(3, 60, 200)
    spawns = settings.pick(3, 40, 120)
    work = settings.work / "s10"
    shutil.rmtree(work, ignore_errors=True)
    rng = settings.rng(KEY)
    cwd = settings.scratch("s10/spawn")
    problems: list[str] = []
    argv = s10_direct.ladder(cwd, status.bwrap)
    probes = {name: s10_direct.spawn_probe(argv[name], cwd, problems) for name in argv}
    for one in probes.values():  # warm-up: page cache, bwrap's first start
        one()
    spawn = interleaved(rng, probes, spawns, batch=10)
    turns = asyncio.run(s10_turns.measure(work / "turns", rounds, settings.pick(1, 3, 5), rng))
    return describe(settings, Measured(turns, spawn, problems))
