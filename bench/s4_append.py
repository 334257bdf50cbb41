"""Scenario 4, in-process part: the store's append cost per message as a transcript grows.

`SqliteSessionStore.append_message` (the real store: a fenced read of the record, the
row insert and the count update in one transaction) is timed for every message of
one session grown to the largest checkpoint; the window just before each checkpoint
gives its p50/p99. The floor, grown to the same lengths in the same loop: one bare
`INSERT` per transaction into a table with the store's message schema and pragmas.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import transcripts
from bench.core import Stats
from sidecar.domain.records import SessionState
from sidecar.store.sqlite import SqliteSessionStore


@dataclass
class AppendRun:
    session_id: str
    db_path: Path
    # How many messages fit in `budget` characters of provider context (what the sidecar
    # counts: content plus tool-call arguments); None if the whole transcript fits.
    fits_budget: int | None = None
    store: dict[int, Stats] = field(default_factory=dict)  # checkpoint -> µs
    floor: dict[int, Stats] = field(default_factory=dict)
    fill_s: float = 0.0


class _Floor:
    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE messages (session_seq INTEGER NOT NULL, idx INTEGER NOT NULL,"
            " body TEXT NOT NULL, PRIMARY KEY (session_seq, idx)) WITHOUT ROWID"
        )
        self.index = 0

    def append(self, body: str) -> float:
        started = time.perf_counter_ns()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "INSERT INTO messages (session_seq, idx, body) VALUES (1, ?, ?)", (self.index, body)
        )
        self.db.execute("COMMIT")
        self.index += 1
        return (time.perf_counter_ns() - started) / 1000.0


def provider_chars(message: dict[str, Any]) -> int:
    """The characters of provider context a message takes (sidecar/agent/context.py)."""
    size = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or []:
        size += len(str(call.get("function", {}).get("arguments", "")))
    return size


def measure(
    work: Path, rng: random.Random, checkpoints: list[int], window: int, budget: int
) -> AppendRun:
    """Grow one stored session to max(checkpoints) messages, timing every append."""
    return asyncio.run(_measure(work, rng, checkpoints, window, budget))


async def _measure(
    work: Path, rng: random.Random, checkpoints: list[int], window: int, budget: int
) -> AppendRun:
    path = work / "append.db"
    store = SqliteSessionStore(path)
    floor = _Floor(work / "append-floor.db")
    new = transcripts.record(work, "Long transcript")
    await store.insert(new)
    run = AppendRun(new.session_id, path)
    store_us: list[float] = []
    floor_us: list[float] = []
    chars = 0
    started = time.perf_counter()
    for index, message in enumerate(transcripts.messages(rng, max(checkpoints))):
        chars += provider_chars(message)
        if run.fits_budget is None and chars > budget:
            run.fits_budget = index
        t0 = time.perf_counter_ns()
        await store.append_message(new.session_id, 1, message)
        store_us.append((time.perf_counter_ns() - t0) / 1000.0)
        floor_us.append(floor.append(json.dumps(message)))
    run.fill_s = time.perf_counter() - started
    for checkpoint in checkpoints:
        low = max(0, checkpoint - window)
        run.store[checkpoint] = Stats.of(store_us[low:checkpoint])
        run.floor[checkpoint] = Stats.of(floor_us[low:checkpoint])
    await store.update(new.session_id, 1, status=SessionState.CLOSED.value)
    await store.close()
    floor.db.close()
    return run


def read_all_per_s(path: Path, session_id: str, page: int = 500) -> float:
    """Messages/s of reading a whole transcript through the store in `session/load`'s
    page size: the floor of a replay, which must at least read every row."""
    return asyncio.run(_read_all_per_s(path, session_id, page))


async def _read_all_per_s(path: Path, session_id: str, page: int) -> float:
    store = SqliteSessionStore(path)
    try:
        started = time.perf_counter()
        offset = 0
        while batch := await store.messages(session_id, offset, page):
            offset += len(batch)
        return offset / (time.perf_counter() - started)
    finally:
        await store.close()
