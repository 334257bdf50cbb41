"""Scenario 9: full-text search in `session/list` (`_meta.query`) over many stored
sessions with long transcripts (issue 17, item 5: "full-text search over 1,000 sessions x
10,000 messages: p50 reported, and <= 1.2x from 100 to 1,000 sessions for a query
matching 10 sessions").

Two data dirs, 100 and 1,000 stored sessions (smoke: 20 and 200), every session with
the same number of messages (full: 10,000 each, so 10 M rows in the large one; small:
100; smoke: 10; see FULL_MESSAGES for why full is 1,000 unless asked). Writing 10 M rows through `append_message` would take hours, so the
files are built by direct bulk insert into the store's own schema (the store opens the
file first and applies its migrations; the rows are `bench/transcripts.py` messages,
drawn from a seeded pool; the schema's own trigger queues each row for the FTS5 index and
the store's own indexing pass then indexes the queue, exactly as after live appends). In each dir the same rare
word sits in one message of exactly 10 sessions.

Measured in this process through the real `SqliteSessionStore.list_page` (what the
`session/list` handler calls), both sizes open at once, in shuffled interleaved batches:
the rare-word search (the target: 1,000 ÷ 100 sessions), a word in nearly every message
(context: its cost follows the matches, not the sessions), a two-word query, and the
plain listing with no query. Then over stdio: one sidecar on the large dir, `session/list`
with the rare word vs without a query.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import plots, transcripts
from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, fmt_ratio, ratio
from bench.core import interleaved as run_interleaved
from bench.pipes import PipeClient, initialize, sidecar_argv
from sidecar.store.blocking import BlockingStore

KEY = "9"
TITLE = "Full-text search in session/list"
RARE = "zanzibar"  # in exactly MATCHING sessions, one message each
COMMON = "session"  # one of bench/transcripts.py's words: in most messages
TWO_WORDS = "zanzi build"  # word prefixes: the rare word's sessions that also say "build"
MATCHING = 10
POOL = 2_000  # distinct message bodies the transcripts are drawn from
TARGET_RATIO = 1.2
# Messages per session at full size. The 10,000 (10 M rows in the large file,
# ~4 GB) takes ~30 min to build on the 2-core benchmark machine, so full runs 1,000
# (1 M rows); S9_MESSAGES=10000 python -m bench --size full --scenarios 9 runs the rest.
FULL_MESSAGES = 1_000
MESSAGES_ENV = "S9_MESSAGES"


def _pool(rng: random.Random) -> list[tuple[str, str]]:
    """(role, body JSON) of seeded messages as the agent loop stores them."""
    return [(m["role"], json.dumps(m)) for m in transcripts.messages(rng, POOL)]


def build(path: Path, rng: random.Random, sessions: int, each: int, cwd: Path) -> list[str]:
    """A store file of `sessions` closed sessions of `each` messages; returns the ids of
    the MATCHING sessions that hold the rare word."""
    store, close = transcripts.open_store(path)  # the schema, by the store's migrations
    try:
        ids = []
        for i in range(sessions):
            record = transcripts.record(cwd, f"Stored session {i}")
            store.insert(record)
            ids.append(record.session_id)
    finally:
        close()
    matching = set(rng.sample(range(sessions), MATCHING))
    pool = _pool(rng)
    planted = json.dumps(
        {"role": "user", "content": f"the {RARE} build failed again", "createdAt": "x"}
    )
    conn = sqlite3.connect(path, isolation_level=None)
    store, close = transcripts.open_store(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # a scratch file, rebuilt every run
        seqs = dict(conn.execute("SELECT id, seq FROM sessions").fetchall())
        now = time.time()
        for i, session_id in enumerate(ids):
            seq = seqs[session_id]
            start = rng.randrange(POOL)
            plant_at = rng.randrange(each) if i in matching else -1
            rows = (
                (seq, idx, planted if idx == plant_at else pool[(start + idx) % POOL][1])
                for idx in range(each)
            )
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)", rows)
            # Activity spread over the last days, in no relation to the insertion order.
            conn.execute(
                "UPDATE sessions SET message_count = ?, status = 'closed', lease_owner = NULL,"
                " updated_at = ? WHERE seq = ?",
                (each, now - rng.uniform(0, 5 * 86400), seq),
            )
            conn.execute("COMMIT")
            # The rows the inserts queued, indexed by the store's own pass, session by
            # session, as a sidecar indexes a session's rows soon after they are written.
            store.index_pending()
    finally:
        conn.close()
        close()
    return [ids[i] for i in sorted(matching)]


def _match_alone(path: Path, n: int) -> list[float]:
    """µs of the rare word's FTS5 MATCH alone, on its own connection."""
    from sidecar.store import search

    word = search.fts5_prefix(RARE)
    conn = sqlite3.connect(path)
    try:
        out = []
        for _ in range(n):
            started = time.perf_counter_ns()
            conn.execute(
                "SELECT rowid >> 32 FROM transcript_search WHERE transcript_search MATCH ?",
                (word,),
            ).fetchall()
            out.append((time.perf_counter_ns() - started) / 1000.0)
        return out
    finally:
        conn.close()


def _probe(store: BlockingStore, **kwargs: Any) -> Callable[[], float]:
    def once() -> float:
        started = time.perf_counter_ns()
        store.list_page(limit=100, **kwargs)
        return (time.perf_counter_ns() - started) / 1000.0

    return once


def _stdio(client: PipeClient, params: dict[str, Any]) -> Callable[[], float]:
    def once() -> float:
        started = time.perf_counter_ns()
        client.call("session/list", params)
        return (time.perf_counter_ns() - started) / 1000.0

    return once


def run(settings: Settings) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    small, large = settings.pick((20, 200), (100, 1_000), (100, 1_000))
    each = int(os.environ.get(MESSAGES_ENV) or settings.pick(10, 100, FULL_MESSAGES))
    n = settings.pick(10, 200, 200)
    common_n = settings.pick(3, 20, 5)
    rng = settings.rng(KEY)
    cwd = settings.scratch("s9/ws")
    built: dict[int, tuple[Path, list[str], float]] = {}
    for count in (small, large):
        data_dir = settings.scratch(f"s9/{count}")
        path = data_dir / "sessions.db"
        path.unlink(missing_ok=True)
        started = time.perf_counter()
        matching = build(path, rng, count, each, cwd)
        built[count] = (data_dir, matching, time.perf_counter() - started)

    stores: dict[int, tuple[BlockingStore, Callable[[], None]]] = {
        count: transcripts.open_store(built[count][0] / "sessions.db") for count in built
    }
    try:
        for count, (store, _) in stores.items():  # the searches find what was planted
            found, cursor = store.list_page(query=RARE, limit=100)
            assert cursor is None
            assert sorted(r.session_id for r in found) == sorted(built[count][1]), count
        probes: dict[str, Callable[[], float]] = {}
        for count, (store, _) in stores.items():
            probes[f"rare {count}"] = _probe(store, query=RARE)
            probes[f"two words {count}"] = _probe(store, query=TWO_WORDS)
            probes[f"no query {count}"] = _probe(store)
        samples = run_interleaved(rng, probes, n, batch=10)
        for count, (store, _) in stores.items():
            samples[f"common {count}"] = [_probe(store, query=COMMON)() for _ in range(common_n)]
            # The profile of the rare-word search, one file at a time: the whole call, and
            # its FTS5 MATCH alone (what follows the matches).
            samples[f"alone {count}"] = [_probe(store, query=RARE)() for _ in range(n)]
            samples[f"match {count}"] = _match_alone(built[count][0] / "sessions.db", n)
    finally:
        for _, close in stores.values():
            close()

    log = settings.scratch("s9/logs") / "sidecar.log"
    with PipeClient(sidecar_argv(built[large][0]), log) as client:
        initialize(client)
        stdio = run_interleaved(
            rng,
            {
                "stdio rare": _stdio(client, {"_meta": {"query": RARE}}),
                "stdio no query": _stdio(client, {}),
            },
            n,
            batch=10,
        )
    samples.update(stdio)
    stats = {name: Stats.of(values) for name, values in samples.items()}

    rows = []
    for label in ("rare", "two words", "common", "no query"):
        a, b = stats[f"{label} {small}"], stats[f"{label} {large}"]
        rows.append(
            [label, fmt(a.p50), fmt(a.p99), fmt(b.p50), fmt(b.p99), fmt_ratio(ratio(b.p50, a.p50))]
        )
    queries = {"rare": RARE, "two words": TWO_WORDS, "common": COMMON, "no query": "(none)"}
    result.tables.append(
        Table(
            f"`SqliteSessionStore.list_page` (first page of 100), µs; {each:,} messages per "
            f"session; queries: " + ", ".join(f"{k} = `{v}`" for k, v in queries.items()),
            [
                "query",
                f"{small} p50",
                f"{small} p99",
                f"{large} p50",
                f"{large} p99",
                f"{large} ÷ {small}",
            ],
            rows,
        )
    )
    result.tables.append(
        Table(
            f"Over stdio, one sidecar on {large:,} sessions: `session/list`, µs",
            ["request", "p50", "p99"],
            [
                [
                    f"`_meta.query` = `{RARE}`",
                    fmt(stats["stdio rare"].p50),
                    fmt(stats["stdio rare"].p99),
                ],
                ["no query", fmt(stats["stdio no query"].p50), fmt(stats["stdio no query"].p99)],
            ],
        )  # fmt: skip
    )
    result.tables.append(
        Table(
            "Data (built by direct bulk insert into the store's schema; FTS5 filled by the store's index pass, a session at a time)",
            ["sessions", "messages", "build s", "file MB"],
            [
                [
                    f"{count:,}",
                    f"{count * each:,}",
                    fmt(built[count][2]),
                    fmt(_size_mb(built[count][0])),
                ]
                for count in (small, large)
            ],
        )
    )
    growth = ratio(stats[f"rare {large}"].p50, stats[f"rare {small}"].p50)
    met = growth <= TARGET_RATIO
    result.targets.append(
        Target(
            f"search matching {MATCHING} sessions, {small} → {large} sessions",
            f"≤ {TARGET_RATIO}×",
            f"{fmt_ratio(growth)} (p50 {fmt(stats[f'rare {small}'].p50)} → "
            f"{fmt(stats[f'rare {large}'].p50)} µs)",
            met,
            ""
            if met
            else (
                f"the rare-word search, interleaved with the {small}-session file's, grew "
                f"{fmt_ratio(growth)}; with one file at a time it costs "
                f"{fmt(stats[f'alone {small}'].p50)} → {fmt(stats[f'alone {large}'].p50)} µs "
                f"({fmt_ratio(ratio(stats[f'alone {large}'].p50, stats[f'alone {small}'].p50))}), "
                f"and its FTS5 MATCH alone {fmt(stats[f'match {small}'].p50)} → "
                f"{fmt(stats[f'match {large}'].p50)} µs. The index is written by the store's "
                f"batch passes (here one per session, as a sidecar indexes rows soon after "
                f"writing them); FTS5 keeps it as segments that it merges as it goes, and a "
                f"MATCH visits each one. A full merge (FTS5 `optimize`) of the 1M-row index "
                f"took an isolated MATCH from ~100 to ~30 µs here, but it rewrites the index "
                f"(seconds), so the store does not run it. What would fix it: that merge on an "
                f"idle sidecar, off the event loop. Before batch indexing (the index written "
                f"by trigger inside every write, ~180 µs per transcript row) this measured "
                f"1.20×"
            ),
        )
    )
    result.targets.append(
        Target(
            f"search p50 over {large:,} sessions × {each:,} messages",
            "reported",
            f"{fmt(stats[f'rare {large}'].p50)} µs in the store, "
            f"{fmt(stats['stdio rare'].p50)} µs over stdio",
            True,
        )
    )
    result.notes.append(
        f"`{COMMON}` is in most messages: its search reads every matching row of the "
        "index (FTS5 doclists), so it grows with the transcript text, not the page; "
        "the rare word's search reads only its matches and the rows of the sessions found."
    )
    labels = ("rare", "two words", "common", "no query")
    result.plots.append(
        plots.grouped_bars(
            settings.out / "s9_search.png",
            f"session/list p50 by query, {each:,} messages per session",
            labels,
            {
                f"{count:,} sessions": [stats[f"{label} {count}"].p50 / 1000 for label in labels]
                for count in (small, large)
            },
            "ms (p50)",
        )
    )
    result.summary = (
        f"rare-word search p50 {fmt(stats[f'rare {large}'].p50)} µs over {large:,} × "
        f"{each:,}; {small}→{large} {fmt_ratio(growth)}"
    )
    result.raw = {
        "sizes": [small, large],
        "messages_each": each,
        "stats": {name: s.as_dict() for name, s in stats.items()},
        "growth": growth,
        "build_seconds": {str(c): built[c][2] for c in built},
    }
    return result


def _size_mb(data_dir: Path) -> float:
    return sum(p.stat().st_size for p in data_dir.glob("sessions.db*")) / 1e6
