"""Scenario 9's stored libraries: N closed sessions of M messages each, written into the
SQLite store's own schema in bulk, indexed by the store's own indexing pass.

Writing 100,000 sessions through the store's API would take most of an hour; the rows
here are exactly what it writes (its migrations make the schema, `sqlite_rows` encodes
each session row, the schema's trigger queues each transcript row for the search index
and `index_pending` indexes the queue), only many to a transaction. The index is
written a pass per INDEX_EVERY sessions, as a running sidecar's passes (one every half
second of writing) leave it: many segments, not one. In each library the same rare word
sits in one message of exactly MATCHING sessions.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench import transcripts
from sidecar.domain.records import SessionState
from sidecar.store.blocking import blocking
from sidecar.store.sqlite import SqliteSessionStore
from sidecar.store.sqlite_rows import FIELDS, INSERT_COLUMNS, column_value

RARE = "zanzibar"  # in exactly MATCHING sessions, one message each
MATCHING = 10
POOL = 2_000  # distinct message bodies the transcripts are drawn from
INDEX_EVERY = 100  # sessions written between two passes of the store's indexing
SESSIONS_PER_TRANSACTION = 1_000


def _pool(rng: random.Random) -> list[str]:
    """Message bodies (JSON) as the agent loop stores them."""
    return [json.dumps(m) for m in transcripts.messages(rng, POOL)]


def _session_rows(cwd: Path, first: int, count: int, rng: random.Random) -> list[list[Any]]:
    """Closed sessions, their activity spread over the last days (in no relation to the
    insertion order)."""
    now = time.time()
    rows = []
    for i in range(first, first + count):
        record = transcripts.record(cwd, f"Stored session {i}").replace(
            status=SessionState.CLOSED, updated_at=now - rng.uniform(0, 5 * 86400)
        )
        rows.append([column_value(getattr(record, name)) for name in FIELDS])
    return rows


def build(path: Path, rng: random.Random, sessions: int, each: int, cwd: Path) -> list[str]:
    """A store file of `sessions` closed sessions of `each` messages; the ids of the
    MATCHING sessions that hold the rare word."""
    SqliteSessionStore(path, merge_when_idle=False).close_now()  # the schema, by its migrations
    matching = set(rng.sample(range(sessions), MATCHING))
    pool = _pool(rng)
    planted = json.dumps(
        {"role": "user", "content": f"the {RARE} build failed again", "createdAt": "x"}
    )
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # a scratch file, rebuilt every run
    store, close = blocking(lambda: SqliteSessionStore(path, merge_when_idle=False))
    found: list[str] = []
    try:
        insert = f"INSERT INTO sessions ({INSERT_COLUMNS}) VALUES ({', '.join('?' * len(FIELDS))})"
        for first in range(0, sessions, SESSIONS_PER_TRANSACTION):
            count = min(SESSIONS_PER_TRANSACTION, sessions - first)
            conn.execute("BEGIN")
            conn.executemany(insert, _session_rows(cwd, first, count, rng))
            conn.execute("COMMIT")
        seqs = conn.execute("SELECT id, seq FROM sessions ORDER BY seq").fetchall()
        for i, (session_id, seq) in enumerate(seqs):
            start = rng.randrange(POOL)
            plant_at = rng.randrange(each) if i in matching else -1
            rows = (
                (seq, idx, planted if idx == plant_at else pool[(start + idx) % POOL])
                for idx in range(each)
            )
            if i % INDEX_EVERY == 0:
                conn.execute("BEGIN")
            conn.executemany("INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)", rows)
            conn.execute("UPDATE sessions SET message_count = ? WHERE seq = ?", (each, seq))
            if i in matching:
                found.append(session_id)
            if i % INDEX_EVERY == INDEX_EVERY - 1 or i == len(seqs) - 1:
                conn.execute("COMMIT")
                store.index_pending()  # the store's own pass over what was queued
    finally:
        conn.close()
        close()
    return found


def segments(path: Path) -> dict[str, int]:
    """Segments of each search index (FTS5's structure record: a MATCH visits each)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {
            table: _segment_count(
                conn.execute(f"SELECT block FROM {table}_data WHERE id = 10").fetchone()[0]
            )
            for table in ("transcript_search", "title_search")
        }


def _segment_count(structure: bytes) -> int:
    """The structure record's second varint (after a 4-byte cookie and the level count)."""
    position = 4
    for field in range(2):
        value = 0
        for _ in range(9):
            byte = structure[position]
            position += 1
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        if field == 1:
            return value
    return 0


def merge(path: Path) -> tuple[int, float]:
    """The store's idle merge run to the end now (what an idle sidecar does by itself):
    (steps that merged something, seconds)."""
    store = SqliteSessionStore(path, merge_when_idle=False)
    try:
        started = time.perf_counter()
        steps = store.search_merger.merge_now()
        return steps, time.perf_counter() - started
    finally:
        store.close_now()
