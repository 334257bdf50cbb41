"""Scenario 2: create, close, resume, delete latency, SQLite store vs memory store.

Two sidecars run side by side (`--store sqlite` and `--store memory`); each cycle is
`session/new` -> `session/close` -> `session/resume` -> `session/close` ->
`session/delete`, with the stores taking turns in a shuffled order. The bare baseline,
timed in this process in the same rounds, is what a create cannot avoid: bind a
loopback socket on port 0 and listen, then one INSERT into a WAL SQLite file with the
store's settings; plus one round trip of the floor echo process for the pipe.
"""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

from bench import plots
from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, fmt_ratio, ratio
from bench.pipes import PipeClient, floor_argv, initialize, new_session, sidecar_argv

KEY = "2"
TITLE = "Lifecycle latency"
OPS = ("create", "close", "resume", "delete")
STORES = ("sqlite", "memory")
CLOSE_TARGET_MS = 5.0
STORE_RATIO_TARGET = 1.5


def _cycle(client: PipeClient, workspace: Path, times: dict[str, list[float]]) -> None:
    started = time.perf_counter_ns()
    session_id = new_session(client, workspace)["sessionId"]
    stamps = [started, time.perf_counter_ns()]
    for method in ("session/close", "session/resume", "session/close", "session/delete"):
        params = {"sessionId": session_id}
        if method == "session/resume":
            params["cwd"] = str(workspace)
        client.call(method, params)
        stamps.append(time.perf_counter_ns())
    spans = [(b - a) / 1e6 for a, b in zip(stamps, stamps[1:], strict=False)]
    times["create"].append(spans[0])
    times["close"].extend((spans[1], spans[3]))
    times["resume"].append(spans[2])
    times["delete"].append(spans[4])


class Baseline:
    """bind + listen on 127.0.0.1:0, and one INSERT into a WAL database (ms each)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
        self.bind: list[float] = []
        self.insert: list[float] = []

    def once(self) -> None:
        started = time.perf_counter_ns()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        bound = time.perf_counter_ns()
        self.db.execute("INSERT INTO t (body) VALUES (?)", ("x" * 300,))
        done = time.perf_counter_ns()
        sock.close()
        self.bind.append((bound - started) / 1e6)
        self.insert.append((done - bound) / 1e6)


def run(settings: Settings) -> ScenarioResult:
    n = settings.pick(8, 200, 500)
    rng = settings.rng(KEY)
    logs = settings.scratch("s2")
    workspace = settings.scratch("s2/ws")
    clients = {
        store: PipeClient(
            sidecar_argv(settings.scratch(f"s2/{store}"), store), logs / f"{store}.log"
        )
        for store in STORES
    }
    floor = PipeClient(floor_argv(), logs / "floor.log")
    times: dict[str, dict[str, list[float]]] = {s: {op: [] for op in OPS} for s in STORES}
    baseline = Baseline(logs / "baseline.db")
    rtt: list[float] = []
    try:
        for client in clients.values():
            initialize(client)
            for _ in range(settings.pick(2, 10, 20)):  # warm-up
                _cycle(client, workspace, {op: [] for op in OPS})
        order = list(STORES)
        for _ in range(n):
            rng.shuffle(order)
            for store in order:
                _cycle(clients[store], workspace, times[store])
            baseline.once()
            rtt.append(floor.timed("_session/status", {"sessionId": "x"})[0] / 1000.0)
    finally:
        for client in [*clients.values(), floor]:
            client.close()
        baseline.db.close()
    return _result(settings, times, baseline, rtt, n)


def _result(
    settings: Settings,
    times: dict[str, dict[str, list[float]]],
    baseline: Baseline,
    rtt: list[float],
    n: int,
) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    stats = {s: {op: Stats.of(v) for op, v in by_op.items()} for s, by_op in times.items()}
    bind, insert, pipe = Stats.of(baseline.bind), Stats.of(baseline.insert), Stats.of(rtt)
    floor_total = bind.p50 + insert.p50 + pipe.p50
    rows = []
    for op in OPS:
        sq, mem = stats["sqlite"][op], stats["memory"][op]
        rows.append(
            [op, fmt(sq.p50, 2), fmt(sq.p99, 2), fmt(mem.p50, 2), fmt(mem.p99, 2)]
            + [fmt_ratio(ratio(sq.p50, mem.p50)), fmt_ratio(ratio(sq.p50, floor_total))]
        )
    result.tables.append(
        Table(
            f"Lifecycle operations over stdio, ms ({n} cycles per store; close counted twice a cycle)",
            ["operation", "sqlite p50", "sqlite p99", "memory p50", "memory p99"]
            + ["sqlite / memory", "sqlite / baseline"],
            rows,
        )
    )
    result.tables.append(
        Table(
            "Bare baseline, ms (same rounds, in the benchmark process)",
            ["step", "p50", "p99"],
            [
                ["socket bind(127.0.0.1:0) + listen", fmt(bind.p50, 3), fmt(bind.p99, 3)],
                ["one INSERT into a WAL SQLite db", fmt(insert.p50, 3), fmt(insert.p99, 3)],
                ["floor echo round trip over stdio", fmt(pipe.p50, 3), fmt(pipe.p99, 3)],
                ["sum of the p50s (the baseline)", fmt(floor_total, 3), ""],
            ],
        )
    )
    for op in OPS:
        r = ratio(stats["sqlite"][op].p50, stats["memory"][op].p50)
        result.targets.append(
            Target(
                f"{op}: sqlite / memory",
                f"≤ {STORE_RATIO_TARGET}×",
                fmt_ratio(r),
                r <= STORE_RATIO_TARGET,
                "" if r <= STORE_RATIO_TARGET else _why_ratio(op, stats),
            )
        )
    close = stats["sqlite"]["close"].p50
    result.targets.append(
        Target(
            "close p50 (sqlite)",
            f"≤ {CLOSE_TARGET_MS:g} ms",
            f"{fmt(close, 2)} ms",
            close <= CLOSE_TARGET_MS,
            "" if close <= CLOSE_TARGET_MS else _why_close(stats),
        )
    )
    result.plots.append(
        plots.grouped_bars(
            settings.out / "s2_lifecycle.png",
            "Lifecycle p50 (ms): SQLite vs memory store",
            OPS,
            {f"{s} p50": [stats[s][op].p50 for op in OPS] for s in STORES}
            | {"baseline (bind + insert + pipe)": [floor_total] * len(OPS)},
            "ms",
        )
    )
    result.summary = f"close p50 {fmt(close, 2)} ms; sqlite/memory " + ", ".join(
        f"{op} {fmt_ratio(ratio(stats['sqlite'][op].p50, stats['memory'][op].p50))}" for op in OPS
    )
    result.notes.append(
        "Delete removes the record and its transcript in one transaction, then renames the "
        "session's shadow repository (`checkpoints/<id>`, made when the runtime starts) and "
        "its output spools into `.trash/` beside them and removes those trees in a worker "
        "thread after the answer (sidecar/fs/trash.py; the next start sweeps what a dead "
        "process left). Removing the tree inline cost ~40 ms a delete on this disk (one "
        "unlink per file, mounted with `discard`) on both stores alike."
    )
    result.raw = {
        "stats_ms": {s: {op: v.as_dict() for op, v in by.items()} for s, by in stats.items()},
        "baseline_ms": {"bind": bind.as_dict(), "insert": insert.as_dict(), "pipe": pipe.as_dict()},
    }
    return result


# What each operation writes, and how many SQLite transactions that is (manager.py, runtime.py).
WRITES = {
    "create": ("inserts the record, then writes `idle`", 2),
    "close": ("writes `closing`, then `closed`", 2),
    "resume": ("bumps the generation, then writes `idle`", 2),
    "delete": (
        "reads the record, then deletes its rows and the record (its checkpoint and output "
        "directories are renamed aside and removed after the answer, sidecar/fs/trash.py)",
        1,
    ),
}


def _why_ratio(op: str, stats: dict[str, dict[str, Stats]]) -> str:
    sq, mem = stats["sqlite"][op].p50, stats["memory"][op].p50
    what, transactions = WRITES[op]
    each = (sq - mem) / transactions
    return (
        f"{op} {what}: {transactions} SQLite transaction(s) (BEGIN IMMEDIATE, a read, the "
        f"write, COMMIT into the WAL), {fmt(each, 2)} ms each here, {fmt(sq - mem, 2)} ms in "
        f"all on top of the memory store's {fmt(mem, 2)} ms, most of which is the pipe round "
        f"trip. A commit's fixed cost is a large share of so cheap an operation. What would "
        f"cut it (sidecar/store/sqlite.py, manager.py): fold the existence read into the "
        f"write transaction, and where the staged order is not needed (a close with no turn "
        f"to cancel) write both states in one transaction."
    )


def _why_close(stats: dict[str, dict[str, Stats]]) -> str:
    return (
        f"close p50 is {fmt(stats['sqlite']['close'].p50, 2)} ms (memory store "
        f"{fmt(stats['memory']['close'].p50, 2)} ms): the time goes to stopping the aiohttp "
        f"listener (runner cleanup) and the two state writes, not to a polling interval."
    )
