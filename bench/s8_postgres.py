"""Scenario 8: the PostgreSQL store beside the SQLite one -- create, append, close, resume,
list and delete over stdio, at 100 and at 10,000 stored sessions, in the same run.

The benchmark starts its own throwaway PostgreSQL server (tests/pg_server.py, the one
helper the tests use too: initdb into a temp dir, a free port on 127.0.0.1). At each
size the same stored sessions are written twice: into a SQLite data dir with the
sidecar's own store (bench/transcripts.py), then into a fresh PostgreSQL database by
`python -m sidecar migrate`'s own code (timed: that is the migration's throughput).
Two sidecars, `--store sqlite` and `--store postgres`, then take turns in a shuffled
order: each cycle is `session/new` -> `session/prompt` ("hi": the user message and the
reply appended) -> `session/close` -> `session/resume` -> `session/close` ->
`session/list` (the first page) -> `session/delete`, so the stored count stays put.

The floor, timed in this process in the same rounds: one autocommit INSERT into a
WAL SQLite file with the store's settings, and one over TCP into PostgreSQL with
psycopg (plus a bare `SELECT 1`), i.e. what one commit costs each store before any
sidecar code runs. No target: the server is local, so the ratios are what is reported.
Tables and plot: bench/s8_report.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import random
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg

from bench import transcripts
from bench.core import REPO, ScenarioResult, Settings
from bench.pipes import PipeClient, initialize, new_session, prompt_params, sidecar_argv
from bench.s8_report import KEY, OPS, STORES, Measured, describe
from sidecar.migrate import Migration
from sidecar.store.postgres import PostgresSessionStore
from sidecar.store.sqlite import SqliteSessionStore

MESSAGES_EACH = 4  # per stored session: two turns
IMPORTERS = 6  # concurrent copies into PostgreSQL when growing the stored sessions


def pg_server_module() -> ModuleType:
    """tests/pg_server.py, loaded by path: one copy of the throwaway-server helper for the
    tests (which import it as `pg_server`) and the benchmarks."""
    name = "pg_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "pg_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cycle(client: PipeClient, workspace: Path, times: dict[str, list[float]]) -> None:
    stamps = [time.perf_counter_ns()]
    session_id = new_session(client, workspace)["sessionId"]
    stamps.append(time.perf_counter_ns())
    steps: list[tuple[str, dict[str, Any]]] = [
        ("session/prompt", prompt_params(session_id, "hi")),
        ("session/close", {"sessionId": session_id}),
        ("session/resume", {"sessionId": session_id, "cwd": str(workspace)}),
        ("session/close", {"sessionId": session_id}),
        ("session/list", {}),
        ("session/delete", {"sessionId": session_id}),
    ]
    for method, params in steps:
        client.call(method, params)
        stamps.append(time.perf_counter_ns())
    spans = [(b - a) / 1e6 for a, b in zip(stamps, stamps[1:], strict=False)]
    for op, span in zip(("create", "append", "close", "resume", "close", "list", "delete"), spans, strict=True):  # fmt: skip
        times[op].append(span)


class Floor:
    """One autocommit INSERT into each store's kind of database (ms), and a PostgreSQL
    round trip that writes nothing."""

    def __init__(self, sqlite_path: Path, pg_url: str) -> None:
        self.sqlite = sqlite3.connect(sqlite_path, isolation_level=None)
        self.sqlite.execute("PRAGMA journal_mode = WAL")
        self.sqlite.execute("PRAGMA synchronous = NORMAL")
        self.sqlite.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
        self.pg = psycopg.connect(pg_url, autocommit=True)
        self.pg.execute("CREATE TABLE IF NOT EXISTS floor_t (id bigserial PRIMARY KEY, body text)")
        self.times: dict[str, list[float]] = {
            "sqlite: one INSERT": [],
            "postgres: one INSERT": [],
            "postgres: SELECT 1": [],
        }

    def once(self) -> None:
        body = "x" * 300
        for name, run in (
            ("sqlite: one INSERT", lambda: self.sqlite.execute("INSERT INTO t (body) VALUES (?)", (body,))),
            ("postgres: one INSERT", lambda: self.pg.execute("INSERT INTO floor_t (body) VALUES (%s)", (body,))),
            ("postgres: SELECT 1", lambda: self.pg.execute("SELECT 1").fetchone()),
        ):  # fmt: skip
            started = time.perf_counter_ns()
            run()
            self.times[name].append((time.perf_counter_ns() - started) / 1e6)

    def close(self) -> None:
        self.sqlite.close()
        self.pg.close()


async def _migrate(sqlite_path: Path, url: str) -> tuple[int, float]:
    """`python -m sidecar migrate`'s own copy of every session; (copied, seconds)."""
    source = SqliteSessionStore(sqlite_path)
    target = await PostgresSessionStore.open(url, pool_size=2, role="migrate")
    try:
        migration = Migration(source, target, io.StringIO(), None)
        started = time.perf_counter()
        tally = await migration.run()
        seconds = time.perf_counter() - started
    finally:
        await target.close()
        await source.close()
    if not tally.complete:
        raise RuntimeError(f"the migration did not complete: {tally}")
    return tally.copied, seconds


async def _import(sqlite_path: Path, url: str, ids: list[str]) -> tuple[int, float]:
    """The same rows by the store's `import_session` (migrate's write), IMPORTERS at once:
    the quick way to thousands of stored sessions; (copied, seconds)."""
    source = SqliteSessionStore(sqlite_path)
    target = await PostgresSessionStore.open(url, pool_size=IMPORTERS, role="bench")
    queue = list(reversed(ids))

    async def bodies(session_id: str) -> AsyncIterator[str]:
        for row in await source.messages(session_id, 0, 10_000):
            yield json.dumps(row)

    async def importer() -> None:
        while queue:
            session_id = queue.pop()
            record = await source.get(session_id)
            if not await target.import_session(record, bodies(session_id)):
                raise RuntimeError(f"{session_id} was there already")

    try:
        started = time.perf_counter()
        await asyncio.gather(*(importer() for _ in range(IMPORTERS)))
        seconds = time.perf_counter() - started
    finally:
        await target.close()
        await source.close()
    return len(ids), seconds


class Stored:
    """The stored sessions of both stores, grown size by size: forks of one seeded
    session (one transaction each), the same rows in SQLite and in PostgreSQL."""

    def __init__(self, settings: Settings, base: Path, url: str) -> None:
        self.rng = settings.rng(KEY)
        self.sqlite_dir = base / "sqlite"
        self.sqlite_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = self.sqlite_dir / "sessions.db"
        self.cwd = settings.scratch("s8/stored")
        self.url = url
        self.count = 0
        self.template: str | None = None

    def grow(self, size: int, measured: Measured) -> None:
        started = time.perf_counter()
        store, close = transcripts.open_store(self.path)
        added: list[str] = []
        try:
            if self.template is None:
                self.template = transcripts.add_session(
                    store, self.rng, self.cwd, "Stored session 0", MESSAGES_EACH
                )
                added.append(self.template)
            for number in range(self.count + len(added), size):
                added.append(
                    transcripts.fork_closed(
                        store, self.template, self.cwd, f"Stored session {number}", MESSAGES_EACH
                    )
                )
        finally:
            close()
        measured.fill_s[size] = time.perf_counter() - started
        if self.count == 0:  # the first batch goes through migrate itself
            measured.copy[size] = ("migrate", *asyncio.run(_migrate(self.path, self.url)))
        else:
            copied = asyncio.run(_import(self.path, self.url, added))
            measured.copy[size] = (f"import_session, {IMPORTERS} at once", *copied)
        self.count = size


def _measure(
    settings: Settings,
    clients: dict[str, PipeClient],
    floor: Floor,
    workspace: Path,
    cycles: int,
    rng: random.Random,
) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {store: {op: [] for op in OPS} for store in STORES}
    for client in clients.values():
        for _ in range(settings.pick(1, 5, 10)):  # warm-up
            _cycle(client, workspace, {op: [] for op in OPS})
    order = list(STORES)
    for _ in range(cycles):
        rng.shuffle(order)
        for store in order:
            _cycle(clients[store], workspace, times[store])
        floor.once()
    return times


def run(settings: Settings) -> ScenarioResult:
    """One sidecar per store for the whole scenario: measured at the first size, the
    stored sessions grown to the next (the sidecars keep running), measured again."""
    sizes = settings.pick([10, 40], [100, 1_000], [100, 10_000])
    cycles = settings.pick(3, 60, 150)
    base = settings.scratch("s8")
    workspace = settings.scratch("s8/ws")
    rng = settings.rng(f"{KEY}/cycles")
    pg = pg_server_module()
    started = time.perf_counter()
    server = pg.PgServer.start()
    measured = Measured(sizes, cycles, time.perf_counter() - started, MESSAGES_EACH)
    clients: dict[str, PipeClient] = {}
    floor: Floor | None = None
    try:
        url = server.create_database("bench")
        stored = Stored(settings, base, url)
        stored.grow(sizes[0], measured)
        argv = {
            "sqlite": sidecar_argv(stored.sqlite_dir, "sqlite"),
            "postgres": sidecar_argv(
                base / "postgres", "postgres", "--database-url", url, "--host-id", "bench"
            ),
        }
        for store in STORES:  # both start at once
            clients[store] = PipeClient(argv[store], base / f"{store}.log")
        for client in clients.values():
            initialize(client)
        floor = Floor(base / "floor.db", url)
        for size in sizes:
            if size != stored.count:
                stored.grow(size, measured)
            measured.times[size] = _measure(settings, clients, floor, workspace, cycles, rng)
            measured.floor[size] = {name: list(v) for name, v in floor.times.items()}
            for values in floor.times.values():
                values.clear()
    finally:
        for client in clients.values():
            client.close()
        if floor is not None:
            floor.close()
        server.stop()
    return describe(settings, measured)
