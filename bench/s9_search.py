"""Scenario 9: library scale (issue 26, target 6): `session/list`'s first page, a search
matching 10 sessions, resume and delete with 100,000 stored sessions, each within 1.2×
of its figure with 1,000.

Two libraries (full: 1,000 and 100,000 closed sessions of 20 messages each; small: 1,000
and 10,000; smoke: 120 and 600 of 5), built by bulk insert into the SQLite store's own
schema and indexed by its own indexing pass a hundred sessions at a time
(bench/s9_build.py), the same rare word in one message of exactly 10 sessions of each.

Measured in this process through the real `SqliteSessionStore` first (the profile):
`list_page` with no query, with the rare word, with two words and with a common one, and
the rare word's FTS5 MATCH alone, on the index as written and after the store's idle
merge (sidecar/store/search_merge.py, run to the end here as an idle sidecar runs it).
Then over stdio, the targets: one sidecar (`--no-checkpoints`) on each library, taking
turns in shuffled batches: `session/list` with no params, `session/list` with
`_meta.query` the rare word, `session/resume` of a stored session (closed again,
untimed), `session/delete` of another.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import plots, s9_build, s9_report
from bench.core import ScenarioResult, Settings, Stats
from bench.core import interleaved as run_interleaved
from bench.pipes import PipeClient, initialize, sidecar_argv
from bench.s9_build import RARE
from sidecar.store.blocking import BlockingStore, blocking
from sidecar.store.sqlite import SqliteSessionStore

KEY = "9"
TITLE = "Library scale: list, search, resume, delete"
COMMON = "session"  # one of bench/transcripts.py's words: in most messages
TWO_WORDS = "zanzi build"  # word prefixes: the rare word's sessions that also say "build"
MESSAGES_ENV = "S9_MESSAGES"  # messages per session, to try other shapes
OPS = ("list", "search", "resume", "delete")


def _us(started: int) -> float:
    return (time.perf_counter_ns() - started) / 1000.0


def _store_probe(store: BlockingStore, **kwargs: Any) -> Callable[[], float]:
    def once() -> float:
        started = time.perf_counter_ns()
        store.list_page(limit=100, **kwargs)
        return _us(started)

    return once


def _match_alone(path: Path, n: int) -> list[float]:
    """µs of the rare word's FTS5 MATCH alone, on its own connection."""
    from sidecar.store import search

    word = search.fts5_prefix(RARE)
    with sqlite3.connect(path) as conn:
        out = []
        for _ in range(n):
            started = time.perf_counter_ns()
            conn.execute(
                "SELECT rowid >> 32 FROM transcript_search WHERE transcript_search MATCH ?",
                (word,),
            ).fetchall()
            out.append(_us(started))
        return out


def _open(path: Path) -> tuple[BlockingStore, Callable[[], None]]:
    """The real store on a built file, its idle merge left to the scenario."""
    return blocking(lambda: SqliteSessionStore(path, merge_when_idle=False))


def _in_store(
    paths: dict[int, Path], rng: random.Random, n: int, common_n: int, label: str
) -> dict[str, list[float]]:
    """The store-level probes over both libraries (`label` names the index's state)."""
    stores = {size: _open(path) for size, path in paths.items()}
    try:
        probes: dict[str, Callable[[], float]] = {}
        for size, (store, _) in stores.items():
            probes[f"{label} rare {size}"] = _store_probe(store, query=RARE)
            probes[f"{label} two words {size}"] = _store_probe(store, query=TWO_WORDS)
            probes[f"{label} no query {size}"] = _store_probe(store)
        samples = run_interleaved(rng, probes, n, batch=10)
        for size, (store, _) in stores.items():
            samples[f"{label} common {size}"] = [
                _store_probe(store, query=COMMON)() for _ in range(common_n)
            ]
            samples[f"{label} match {size}"] = _match_alone(paths[size], n)
    finally:
        for _, close in stores.values():
            close()
    return samples


class _Library:
    """One sidecar over stdio on one library, and the sessions it may resume or delete."""

    def __init__(self, data_dir: Path, matching: list[str], log: Path, cwd: Path) -> None:
        with sqlite3.connect(data_dir / "sessions.db") as conn:
            stored = [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY seq")]
        others = [session_id for session_id in stored if session_id not in set(matching)]
        self.resumable = others[::2]  # resumed and closed again, any number of times
        self.deletable = others[1::2]  # each deleted once
        self.cwd = str(cwd)
        self.client = PipeClient(sidecar_argv(data_dir, "sqlite", "--no-checkpoints"), log)
        initialize(self.client)
        found = self.client.call("session/list", {"_meta": {"query": RARE}})["sessions"]
        if sorted(s["sessionId"] for s in found) != sorted(matching):
            raise RuntimeError(f"the search found {len(found)} sessions, not the planted ones")

    def probes(self, rng: random.Random) -> dict[str, Callable[[], float]]:
        client = self.client

        def listing() -> float:
            started = time.perf_counter_ns()
            client.call("session/list", {})
            return _us(started)

        def search() -> float:
            started = time.perf_counter_ns()
            client.call("session/list", {"_meta": {"query": RARE}})
            return _us(started)

        def resume() -> float:
            session_id = rng.choice(self.resumable)
            params = {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}
            started = time.perf_counter_ns()
            client.call("session/resume", params)
            took = _us(started)
            client.call("session/close", {"sessionId": session_id})
            return took

        def delete() -> float:
            session_id = self.deletable.pop(rng.randrange(len(self.deletable)))
            started = time.perf_counter_ns()
            client.call("session/delete", {"sessionId": session_id})
            return _us(started)

        return {"list": listing, "search": search, "resume": resume, "delete": delete}


def run(settings: Settings) -> ScenarioResult:
    small, large = settings.pick((120, 600), (1_000, 10_000), (1_000, 100_000))
    each = int(os.environ.get(MESSAGES_ENV) or settings.pick(5, 20, 20))
    n = settings.pick(6, 100, 200)
    store_n = settings.pick(10, 200, 200)
    common_n = settings.pick(2, 5, 3)
    rng = settings.rng(KEY)
    cwd = settings.scratch("s9/ws")
    paths: dict[int, Path] = {}
    built: dict[int, dict[str, Any]] = {}
    matching: dict[int, list[str]] = {}
    for size in (small, large):
        data_dir = settings.scratch(f"s9/{size}")
        path = paths[size] = data_dir / "sessions.db"
        for stale in data_dir.glob("sessions.db*"):
            stale.unlink()
        started = time.perf_counter()
        matching[size] = s9_build.build(path, rng, size, each, cwd)
        built[size] = {"seconds": time.perf_counter() - started, "built": s9_build.segments(path)}
    samples = _in_store(paths, rng, store_n, common_n, "built")
    for size, path in paths.items():
        steps, seconds = s9_build.merge(path)
        built[size].update(merged=s9_build.segments(path), steps=steps, merge_seconds=seconds)
        built[size]["mb"] = sum(p.stat().st_size for p in path.parent.glob("sessions.db*")) / 1e6
    samples.update(_in_store(paths, rng, store_n, common_n, "merged"))

    logs = settings.scratch("s9/logs")
    libraries = {
        size: _Library(paths[size].parent, matching[size], logs / f"sidecar-{size}.log", cwd)
        for size in (small, large)
    }
    try:
        probes = {
            f"stdio {op} {size}": probe
            for size, library in libraries.items()
            for op, probe in library.probes(rng).items()
        }
        deletable = min(len(library.deletable) for library in libraries.values())
        samples.update(run_interleaved(rng, probes, min(n, deletable), batch=4))
    finally:
        for library in libraries.values():
            library.client.close()
    stats = {name: Stats.of(values) for name, values in samples.items()}
    result = s9_report.result(KEY, TITLE, stats, (small, large), each, built)
    result.plots.append(
        plots.grouped_bars(
            settings.out / "s9_search.png",
            f"Over stdio, p50: {small:,} vs {large:,} stored sessions ({each} messages each)",
            OPS,
            {
                f"{size:,} sessions": [stats[f"stdio {op} {size}"].p50 / 1000 for op in OPS]
                for size in (small, large)
            },
            "ms (p50)",
        )
    )
    return result
