"""Scenario 4: transcript growth -- append cost, resume and list with long transcripts,
`session/load` replay throughput, and the first page of a long transcript.

The long transcript is grown through the real store in this process (bench/s4_append.py,
timing each append), then copied into a data dir beside shorter forks of it; a second
data dir holds as many sessions with two messages each (the empty case). Two sidecars,
one per data dir, are then probed in one interleaved run.
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from bench import s4_append, transcripts
from bench.core import ScenarioResult, Settings, Stats
from bench.core import interleaved as run_interleaved
from bench.pipes import PipeClient, initialize, prompt_params, sidecar_argv
from bench.s4_report import Measured, describe

KEY = "4"
# The sidecar's default --context-budget, passed explicitly so the two stay in step.
BUDGET = 400_000
# The long-session turn is measured this far below the budget: the context is largest
# there, and the turns the benchmark adds must not push it over into a compaction.
BELOW_BUDGET = 0.9


def _data_dirs(
    settings: Settings, run: s4_append.AppendRun, checkpoints: list[int]
) -> tuple[Path, Path, dict[str, str]]:
    """(empty dir, big dir, names -> session ids). In the big dir: the long transcript
    ("big"), a copy of it, forks at the shorter checkpoints, a 2-message "short" one and
    fillers up to 10 sessions; the empty dir holds as many 2-message sessions, the first
    of which is "small"."""
    rng = settings.rng(KEY + "/dirs")
    cwd = settings.scratch("s4/ws")
    big, empty = settings.scratch("s4/big"), settings.scratch("s4/empty")
    shutil.copy(run.db_path, big / "sessions.db")
    ids = {"big": run.session_id}
    store, close = transcripts.open_store(big / "sessions.db")
    try:
        ids["big copy"] = transcripts.fork_closed(
            store, run.session_id, cwd, "Copy", checkpoints[-1]
        )
        if run.fits_budget is not None:
            at = int(run.fits_budget * BELOW_BUDGET)
            ids[f"{at} below budget"] = transcripts.fork_closed(
                store, run.session_id, cwd, "Fork", at
            )
        for checkpoint in checkpoints[:-1]:
            ids[str(checkpoint)] = transcripts.fork_closed(
                store, run.session_id, cwd, "Fork", checkpoint
            )
        ids["short"] = transcripts.add_session(store, rng, cwd, "Short", 2)
        while len(ids) < 10:
            ids[f"filler {len(ids)}"] = transcripts.add_session(store, rng, cwd, "Short", 2)
    finally:
        close()
    store, close = transcripts.open_store(empty / "sessions.db")
    try:
        made = [transcripts.add_session(store, rng, cwd, "Short", 2) for _ in ids]
    finally:
        close()
    return empty, big, ids | {"small": made[0]}  # fmt: skip


def _resume_probe(client: PipeClient, session_id: str, cwd: str) -> Callable[[], float]:
    def probe() -> float:
        took, _ = client.timed("session/resume", {"sessionId": session_id, "cwd": cwd})
        client.call("session/close", {"sessionId": session_id})
        return took

    return probe


def _timed(client: PipeClient, method: str, params: dict[str, object]) -> Callable[[], float]:
    return lambda: client.timed(method, dict(params))[0]


def run(settings: Settings) -> ScenarioResult:
    checkpoints = settings.pick([100, 1000], [1000, 10000], [1000, 10000, 100000])
    window = settings.pick(50, 300, 500)
    reps = settings.pick(5, 40, 60)
    turns = settings.pick(5, 50, 100)
    rng = settings.rng(KEY)
    appended = s4_append.measure(settings.scratch("s4/append"), rng, checkpoints, window, BUDGET)
    read_floor = s4_append.read_all_per_s(appended.db_path, appended.session_id)
    empty_dir, big_dir, ids = _data_dirs(settings, appended, checkpoints)
    cwd = str(settings.scratch("s4/ws"))
    logs = settings.scratch("s4")
    budget = ("--context-budget", str(BUDGET))
    empty = PipeClient(sidecar_argv(empty_dir, "sqlite", *budget), logs / "empty.log")
    big = PipeClient(sidecar_argv(big_dir, "sqlite", *budget), logs / "big.log")
    measured = Measured(checkpoints, appended, read_floor)
    try:
        initialize(empty)
        initialize(big)
        small = ids["small"]
        longest = ids["big"]
        shorter = ids[str(checkpoints[0])]  # a fork: the same first messages, fewer after
        pages = {
            f"first page, {checkpoints[0]:,} messages": (shorter, 0),
            f"first page, {checkpoints[-1]:,} messages": (longest, 0),
            f"newest page, {checkpoints[0]:,} messages": (shorter, checkpoints[0] - 100),
            f"newest page, {checkpoints[-1]:,} messages": (longest, checkpoints[-1] - 100),
        }
        probes: dict[str, Callable[[], float]] = {
            "list, empty case": _timed(empty, "session/list", {}),
            "list, long transcripts": _timed(big, "session/list", {}),
            "resume, empty case": _resume_probe(empty, small, cwd),
            "resume, longest transcript": _resume_probe(big, longest, cwd),
        }
        for name, (session_id, offset) in pages.items():
            params = {"sessionId": session_id, "offset": max(0, offset), "limit": 100}
            probes[name] = _timed(big, "_session/messages", params)
        for probe in probes.values():
            probe()  # warm-up
        measured.probes = {
            k: Stats.of(v) for k, v in run_interleaved(rng, probes, reps, batch=5).items()
        }
        lengths = {2: ids["short"]} | {c: ids[str(c)] for c in checkpoints[:-1]}
        lengths[checkpoints[-1]] = longest
        for name, session_id in ids.items():
            if name.endswith(" below budget"):
                measured.below_budget = int(name.split()[0])
                lengths[measured.below_budget] = session_id
        lengths = dict(sorted(lengths.items()))
        measured.turns, measured.first_turn = _turns(big, lengths, cwd, turns, rng)
        measured.replay = _replay(big, ids["big copy"], cwd, settings.pick(1, 2, 2))
    finally:
        empty.close()
        big.close(timeout=180)
    return describe(settings, measured)


def _turns(
    client: PipeClient, lengths: dict[int, str], cwd: str, n: int, rng: random.Random
) -> tuple[dict[int, Stats], dict[int, float]]:
    """End-to-end: "hi" prompts into live sessions of each length, interleaved; µs per
    turn (two messages appended), and the first turn after resume on its own."""
    first: dict[int, float] = {}
    for length, session_id in lengths.items():
        client.call("session/resume", {"sessionId": session_id, "cwd": cwd})
        first[length] = client.timed("session/prompt", prompt_params(session_id, "hi"))[0]

    def probe(session_id: str) -> Callable[[], float]:
        return lambda: client.timed("session/prompt", prompt_params(session_id, "hi"))[0]

    samples = run_interleaved(rng, {str(k): probe(v) for k, v in lengths.items()}, n, batch=10)
    for session_id in lengths.values():
        client.call("session/close", {"sessionId": session_id})
    return {int(k): Stats.of(v) for k, v in samples.items()}, first


def _replay(
    client: PipeClient, session_id: str, cwd: str, reps: int
) -> list[tuple[float, int, int]]:
    """(seconds, notifications, messageCount) per `session/load` of a closed long session."""
    runs = []
    for _ in range(reps):
        before = client.notifications
        started = time.perf_counter()
        result = client.call(
            "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        )
        seconds = time.perf_counter() - started
        runs.append((seconds, client.notifications - before, int(result["_meta"]["messageCount"])))
        client.call("session/close", {"sessionId": session_id})
    return runs
