"""What only the SQLite store promises: durability, file hygiene, refusing files
it does not own, migrations, errors as StoreError, and O(1) appends.

Some tests reach into `store._conn`: the behaviour under test (WAL, query
plans, a full or read-only database) is only observable at that level.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.values import Backend, Mode
from sidecar.domain.errors import SessionNotFound, StaleGeneration, StoreError
from sidecar.domain.records import SessionRecord, SessionState
from sidecar.store import SqliteSessionStore as AsyncSqliteStore
from sidecar.store import migrations
from sidecar.store import sqlite as sqlite_module
from sidecar.store.blocking import BlockingStore

_LOOP = asyncio.new_event_loop()


def SqliteSessionStore(path: str | Path, **options: Any) -> Any:  # noqa: N802 (stands in for the class)
    """The real store, driven through its async API on a private loop."""
    return BlockingStore(AsyncSqliteStore(path, **options), _LOOP)


def record(session_id: str = "s1", **extra: Any) -> SessionRecord:
    fields: dict[str, Any] = {
        "cwd": "/work",
        "title": "t",
        "mode": Mode.CRAFT,
        "backend": Backend.PIPE,
        "status": SessionState.IDLE,
        "generation": 1,
        "created_at": 1.0,
        "updated_at": 1.0,
    }
    fields.update(extra)
    return SessionRecord(session_id=session_id, **fields)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def store(db: Path) -> Iterator[Any]:
    s = SqliteSessionStore(db)
    yield s
    s.close()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- durability and files ------------------------------------------------------


def test_everything_survives_reopen(db: Path) -> None:
    first = SqliteSessionStore(db)
    first.insert(record("a", model="m", interrupted=True))
    first.insert(record("b", cwd="/other"))
    first.append_message("a", 1, {"role": "user", "content": "héllo ✓"})
    first.update("b", 1, status="closed", last_error="gone")
    first.close()
    first.close()  # idempotent

    second = SqliteSessionStore(db)
    try:
        a = second.get("a")
        assert (a.model, a.interrupted, a.message_count) == ("m", True, 1)
        assert second.get("b").status is SessionState.CLOSED
        assert second.get("b").last_error == "gone"
        assert second.messages("a") == [{"role": "user", "content": "héllo ✓"}]
        page, _ = second.list_page()
        assert [r.session_id for r in page] == ["b", "a"]
        second.insert(record("c"))  # updated_at 1.0: the least recent activity
        assert [r.session_id for r in second.list_page()[0]] == ["b", "a", "c"]
        assert second.append_message("a", 1, {"n": 2}) == 1
    finally:
        second.close()


def test_pragmas(store: SqliteSessionStore, db: Path) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    other = sqlite3.connect(db)
    try:  # WAL is a property of the file, not only of our connection
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_file_and_dir_modes(tmp_path: Path) -> None:
    path = tmp_path / "data" / "dir" / "sessions.db"
    old = os.umask(0o022)
    try:
        s = SqliteSessionStore(path)
    finally:
        os.umask(old)
    try:
        s.insert(record())
        assert mode_of(path.parent) == 0o700
        assert mode_of(path) == 0o600
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                assert mode_of(side) == 0o600, suffix
    finally:
        s.close()


def test_use_after_close_is_store_error(store: SqliteSessionStore) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("s1")


# --- files that are not ours ---------------------------------------------------


def test_garbage_file_is_refused(db: Path) -> None:
    garbage = os.urandom(8192)
    db.write_bytes(garbage)
    with pytest.raises(StoreError, match=re.escape(str(db))) as info:
        SqliteSessionStore(db)
    assert "not a database" in str(info.value)
    assert db.read_bytes() == garbage


def test_foreign_sqlite_db_is_refused_and_untouched(db: Path) -> None:
    other = sqlite3.connect(db)
    other.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    other.execute("INSERT INTO photos (name) VALUES ('cat.jpg')")
    other.commit()
    other.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match=re.escape(str(db))) as info:
        SqliteSessionStore(db)
    assert "not a session store" in str(info.value)
    assert "photos" in str(info.value)
    assert db.read_bytes() == before
    assert not db.with_name(db.name + "-wal").exists()


def test_newer_schema_is_refused_and_untouched(db: Path) -> None:
    SqliteSessionStore(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"INSERT INTO {migrations.VERSION_TABLE} VALUES (99, 0)")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match="newer") as info:
        SqliteSessionStore(db)
    assert str(db) in str(info.value) and "99" in str(info.value)
    assert db.read_bytes() == before


def test_path_that_cannot_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "adir.db").mkdir()
    with pytest.raises(StoreError, match="adir.db"):
        SqliteSessionStore(tmp_path / "adir.db")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(StoreError, match="afile"):
        SqliteSessionStore(tmp_path / "afile" / "sessions.db")


# --- migrations ----------------------------------------------------------------


def versions(db: Path) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(f"SELECT version FROM {migrations.VERSION_TABLE} ORDER BY version")
        return [v for (v,) in rows]
    finally:
        conn.close()


def test_fresh_db_records_current_version(store: SqliteSessionStore, db: Path) -> None:
    assert versions(db) == [v for v, _ in migrations.MIGRATIONS]
    assert versions(db)[-1] == migrations.latest()
    assert migrations.pending(store._conn, str(db)) == []


def test_version_zero_db_is_migrated(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute(
        f"CREATE TABLE {migrations.VERSION_TABLE}"
        " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    conn.commit()
    conn.close()
    s = SqliteSessionStore(db)
    s.insert(record())
    s.close()
    assert versions(db) == [v for v, _ in migrations.MIGRATIONS]


def test_v1_database_migrates_to_current_keeping_sessions(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
        SqliteSessionStore(db).close()
    assert versions(db) == [1]
    conn = sqlite3.connect(db)  # rows as a v1 sidecar wrote them
    with conn:
        conn.execute(
            "INSERT INTO sessions (id, cwd, title, mode, backend, status, generation,"
            " created_at, updated_at, message_count) VALUES"
            " ('from-v1', '/w', 't', 'craft', 'pipe', 'closed', 1, 1.0, 1.0, 1)"
        )
        conn.execute(
            "INSERT INTO messages VALUES ((SELECT seq FROM sessions WHERE id = 'from-v1'), 0, ?)",
            ('{"role": "user", "content": "hi"}',),
        )
    conn.close()
    new = SqliteSessionStore(db)
    try:
        migrated = new.get("from-v1")
        assert (migrated.forked_from, migrated.context_from, migrated.summary_index) == (
            None,
            0,
            None,
        )
        assert migrated.lease_owner is None and migrated.message_count == 1
        # v3 numbers the turns of rows already stored (and counts them in the record).
        assert new.messages("from-v1") == [{"role": "user", "content": "hi", "turn": 1}]
        assert new.get("from-v1").turns == 1
    finally:
        new.close()
    assert versions(db) == [v for v, _ in migrations.MIGRATIONS]


def test_forward_migration_keeps_data(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = SqliteSessionStore(db)
    old.insert(record("kept"))
    old.append_message("kept", 1, {"n": 1})
    old.close()
    step2 = """
        ALTER TABLE sessions ADD COLUMN note TEXT;
        CREATE INDEX sessions_note ON sessions (note);
    """
    nxt = migrations.latest() + 1
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, (nxt, step2)))
    new = SqliteSessionStore(db)
    try:
        assert new.get("kept").session_id == "kept"
        assert new.messages("kept") == [{"n": 1}]
        columns = [row[1] for row in new._conn.execute("PRAGMA table_info(sessions)")]
        assert "note" in columns
    finally:
        new.close()
    assert versions(db) == [*range(1, nxt + 1)]


def test_failed_migration_leaves_previous_version(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SqliteSessionStore(db).close()
    broken = "CREATE TABLE half (x); INSERT INTO no_such_table VALUES (1)"
    before = versions(db)
    nxt = migrations.latest() + 1
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, (nxt, broken)))
    with pytest.raises(StoreError, match="no_such_table"):
        SqliteSessionStore(db)
    assert versions(db) == before
    conn = sqlite3.connect(db)
    try:  # the step's first statement was rolled back with the rest
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master")]
        assert "half" not in names
    finally:
        conn.close()


def test_split_sql_keeps_trigger_bodies() -> None:
    script = """
    CREATE TABLE a (x);
    CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1; SELECT ';'; END;
    INSERT INTO a VALUES (';');
    """
    assert len(migrations.split_sql(script)) == 3


# --- write errors become StoreError, and nothing half-lands -------------------


def test_write_to_read_only_database(store: SqliteSessionStore) -> None:
    store.insert(record())
    store._conn.execute("PRAGMA query_only = ON")  # SQLITE_READONLY, even for root
    with pytest.raises(StoreError, match="readonly database") as info:
        store.append_message("s1", 1, {"n": 1})
    assert str(store.path) in str(info.value)
    with pytest.raises(StoreError, match="readonly"):
        store.update("s1", 1, title="x")
    assert store.get("s1").message_count == 0
    store._conn.execute("PRAGMA query_only = OFF")
    assert store.append_message("s1", 1, {"n": 1}) == 0


READ_ONLY_CHECK = """
import re, sys
from pathlib import Path
from sidecar.domain.errors import StoreError
from sidecar.store.sqlite import SqliteSessionStore
db = Path(sys.argv[1])
try:
    reopened = SqliteSessionStore(db)
    try:
        reopened.update("s1", 1, title="x")
    finally:
        reopened.close()
except StoreError as exc:
    assert str(db) in str(exc), exc
    print("refused:", exc)
else:
    raise SystemExit("a read-only data dir was written")
"""


def test_read_only_data_dir(db: Path) -> None:
    s = SqliteSessionStore(db)
    s.insert(record())
    s.close()
    os.chmod(db, 0o400)
    os.chmod(db.parent, 0o500)
    # Run as a user would: root's power to ignore permission bits dropped (setpriv).
    drop = (
        ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
        if os.geteuid() == 0
        else []
    )
    try:
        done = subprocess.run(
            [*drop, sys.executable, "-c", READ_ONLY_CHECK, str(db)],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "refused:" in done.stdout
    finally:
        os.chmod(db.parent, 0o700)
        os.chmod(db, 0o600)


def test_locked_database_is_store_error(db: Path) -> None:
    store = SqliteSessionStore(db, busy_timeout=0.05)
    store.insert(record())
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError, match="locked"):
            store.append_message("s1", 1, {"n": 1})
        assert store.get("s1").message_count == 0  # WAL: reads still work
        holder.execute("ROLLBACK")
        assert store.append_message("s1", 1, {"n": 1}) == 0
    finally:
        holder.close()
        store.close()


def test_disk_full_is_store_error_and_rolls_back(store: SqliteSessionStore) -> None:
    store.insert(record())
    store.append_message("s1", 1, {"n": 0})
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError, match="full"):
        store.append_message("s1", 1, {"big": "x" * 200_000})
    assert store.get("s1").message_count == 1
    assert store.messages("s1") == [{"n": 0}]
    store._conn.execute("PRAGMA max_page_count = 1073741823")
    assert store.append_message("s1", 1, {"n": 1}) == 1


def test_unserialisable_message_is_refused(store: SqliteSessionStore) -> None:
    store.insert(record())
    with pytest.raises(StoreError, match="s1"):
        store.append_message("s1", 1, {"x": object()})
    assert store.get("s1").message_count == 0


# --- transactions --------------------------------------------------------------


def test_nested_atomic_uses_savepoints(store: SqliteSessionStore) -> None:
    store.insert(record())
    with store._atomic():
        store._conn.execute("UPDATE sessions SET title = 'outer'")
        with pytest.raises(RuntimeError), store._atomic():
            store._conn.execute("UPDATE sessions SET title = 'inner'")
            raise RuntimeError
        assert store._conn.in_transaction
    assert store.get("s1").title == "outer"
    assert not store._conn.in_transaction


def test_atomic_refuses_a_foreign_transaction(store: SqliteSessionStore) -> None:
    store.insert(record())
    store._conn.execute("BEGIN")
    with pytest.raises(StoreError, match="transaction"):
        store.update("s1", 1, title="x")
    store._conn.execute("ROLLBACK")
    assert store.update("s1", 1, title="x").title == "x"


def test_two_stores_share_one_file_and_the_fence(db: Path) -> None:
    a, b = SqliteSessionStore(db), SqliteSessionStore(db)
    try:
        a.insert(record())
        assert b.get("s1").generation == 1
        b.update("s1", 1, status="closed")
        b.begin_generation("s1", 1)
        with pytest.raises(StaleGeneration):
            a.append_message("s1", 1, {"late": True})
        with pytest.raises(StaleGeneration):
            a.begin_generation("s1", 1)
        assert a.append_message("s1", 2, {"n": 0}) == 0
        b.delete("s1")
        with pytest.raises(SessionNotFound):
            a.messages("s1")
    finally:
        a.close()
        b.close()


# --- cost: appends and listing never scan transcripts --------------------------


_LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", re.IGNORECASE)


def traced(store: SqliteSessionStore, action: Any) -> list[str]:
    """The statements `action` sends to SQLite, with bound values expanded."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        action()
    finally:
        store._conn.set_trace_callback(None)
    return statements


def vm_steps(store: SqliteSessionStore, action: Any) -> int:
    """How many SQLite virtual-machine instructions `action` executes: a measure
    of work that, unlike a timing, is exact and does not flake."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    store._conn.set_progress_handler(count, 1)
    try:
        action()
    finally:
        store._conn.set_progress_handler(None, 1)
    return steps


def plan(conn: sqlite3.Connection, statement: str) -> list[str]:
    if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b", statement, re.I):
        return []
    if statement.startswith("--"):  # "-- TRIGGER name": a trigger's body ran (search index)
        return []
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]


def assert_no_message_scan(conn: sqlite3.Connection, statements: list[str]) -> None:
    for statement in statements:
        for step in plan(conn, statement):
            assert not re.search(r"\bSCAN (m|messages)\b", step), (statement, step)


def test_append_cost_does_not_depend_on_length(store: SqliteSessionStore) -> None:
    store.insert(record("empty"))
    store.insert(record("long"))
    for i in range(5000):
        store.append_message("long", 1, {"n": i})

    on_empty = traced(store, lambda: store.append_message("empty", 1, {"n": 0}))
    on_long = traced(store, lambda: store.append_message("long", 1, {"n": 0}))

    assert [_LITERAL.sub("?", s) for s in on_empty] == [_LITERAL.sub("?", s) for s in on_long]
    assert_no_message_scan(store._conn, on_long)
    # The transcript is only ever inserted into: no count(*), no max(idx), no rewrite.
    # (A statement whose triggers run, the search index's, is traced once per program.)
    touching = list(dict.fromkeys(s for s in on_long if "messages" in s))
    assert len(touching) == 1 and touching[0].startswith("INSERT INTO messages")

    empty_cost = vm_steps(store, lambda: store.append_message("empty", 1, {"n": 1}))
    long_cost = vm_steps(store, lambda: store.append_message("long", 1, {"n": 1}))
    assert long_cost <= empty_cost + 5
    assert store.get("long").message_count == 5002
    # A page costs the same at the start and at the end of the transcript.
    first = vm_steps(store, lambda: store.messages("long", 0, 10))
    last = vm_steps(store, lambda: store.messages("long", 4990, 10))
    assert last <= first + 5


def test_reads_use_the_primary_key(store: SqliteSessionStore) -> None:
    store.insert(record("s1"))
    for i in range(50):
        store.append_message("s1", 1, {"n": i})

    page = traced(store, lambda: store.messages("s1", 10, 5))
    steps = [step for statement in page for step in plan(store._conn, statement)]
    range_scan = re.compile(r"SEARCH m USING PRIMARY KEY \(session_seq=\? AND idx>\? AND idx<\?\)")
    assert any(range_scan.search(step) for step in steps), steps
    assert_no_message_scan(store._conn, page)

    listing = traced(store, lambda: store.list_page(cwd="/work", limit=10))
    listing += traced(store, lambda: store.list_page(limit=10))
    listing += traced(store, lambda: store.get("s1"))
    assert listing and not any("messages" in s for s in listing)


def test_delete_and_reconcile_do_not_scan_messages(store: SqliteSessionStore) -> None:
    for i in range(3):
        store.insert(record(f"s{i}", status=SessionState.RUNNING))
        store.append_message(f"s{i}", 1, {"n": i})
    statements = traced(store, store.reconcile_orphans)
    statements += traced(store, lambda: store.delete("s1"))
    assert_no_message_scan(store._conn, statements)
    assert store.messages("s0")[-1]["kind"] == "interrupted"


def test_a_read_never_returns_what_a_write_has_changed_since(db: Path) -> None:
    """`get` keeps the records it read until the file is written: by this store (which
    then keeps the records it wrote whole, and forgets all on any other write, a refused
    one too) or by another connection (`PRAGMA data_version`)."""
    mine, other = SqliteSessionStore(db), SqliteSessionStore(db)
    try:
        mine.insert(record("s1", title="first"))
        assert mine.get("s1").title == "first"
        assert mine.get("s1") is mine.get("s1"), "kept between writes"
        other.update_metadata("s1", title="renamed elsewhere")  # another connection
        assert mine.get("s1").title == "renamed elsewhere"
        written = mine.update("s1", 1, status=SessionState.RUNNING.value)  # its own write
        assert mine.get("s1") is written, "what it wrote is kept: no read"
        assert mine.get("s1").status is SessionState.RUNNING
        kept = mine.get("s1")
        with pytest.raises(StaleGeneration):
            mine.update("s1", 7, status=SessionState.IDLE.value)  # refused
        assert mine.get("s1") == kept and mine.get("s1") is not kept, "read again"
        with sqlite3.connect(db) as raw:  # a plain sqlite3 client, outside any store
            raw.execute("UPDATE sessions SET title = 'by hand' WHERE id = 's1'")
        assert mine.get("s1").title == "by hand"
        mine.delete("s1")
        with pytest.raises(SessionNotFound):
            mine.get("s1")
    finally:
        mine.close()
        other.close()


def _queued(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM search_pending").fetchone()[0])


def _index_intact(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("INSERT INTO transcript_search (transcript_search) VALUES ('integrity-check')")


def test_transcript_rows_are_indexed_in_batches_and_always_before_a_search(db: Path) -> None:
    """A row write only queues the row for the index (migrations.py v5); a search indexes
    the queue first, so it never misses a row, and a row that goes before it was indexed
    only leaves the queue (the contentless index is never told to drop what it lacks)."""
    store = SqliteSessionStore(db)
    try:
        for name in ("kept", "gone"):
            store.insert(record(name))
            store.append_message(name, 1, {"role": "user", "content": f"{name} marmalade"})
        assert _queued(db) == 2, "queued by the writes, not indexed in them"
        assert {r.session_id for r in store.list_page(query="marmalade")[0]} == {"kept", "gone"}
        assert _queued(db) == 0, "the search indexed the queue first"
        store.append_message("gone", 1, {"role": "user", "content": "quince, still queued"})
        store.insert(record("fresh"))
        store.append_message("fresh", 1, {"role": "user", "content": "quince again"})
        assert _queued(db) == 2
        store.delete("gone")  # one row indexed, one still queued
        assert _queued(db) == 1
        _index_intact(db)
        assert [r.session_id for r in store.list_page(query="quince")[0]] == ["fresh"]
        assert [r.session_id for r in store.list_page(query="marmalade")[0]] == ["kept"]
        _index_intact(db)
    finally:
        store.close()


def test_the_index_pass_runs_soon_after_writes_and_at_close(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "INDEX_BATCH", 2)  # so the pass takes three turns

    async def scenario() -> None:
        store = AsyncSqliteStore(db)
        await store.insert(record("s1"))
        for n in range(5):
            await store.append_message("s1", 1, {"role": "user", "content": f"row {n}"})
        assert _queued(db) == 5
        await asyncio.sleep(sqlite_module.INDEX_DELAY + 0.5)  # one pass, batch by batch
        assert _queued(db) == 0
        await store.append_message("s1", 1, {"role": "user", "content": "last words"})
        await store.close()  # before the pass was due: the close indexes it

    asyncio.run(scenario())
    assert _queued(db) == 0
    store = SqliteSessionStore(db)
    try:
        assert [r.session_id for r in store.list_page(query="last")[0]] == ["s1"]
    finally:
        store.close()


def test_a_version_4_file_keeps_its_index_and_queues_from_then_on(db: Path) -> None:
    v4 = [m for m in migrations.MIGRATIONS if m[0] <= 4]
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:

        @contextlib.contextmanager
        def atomic() -> Iterator[None]:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")

        migrations.migrate(conn, atomic, str(db), v4)
        conn.execute(
            "INSERT INTO sessions (id, cwd, title, mode, backend, status, generation,"
            " created_at, updated_at) VALUES ('old', '/w', 't', 'craft', 'pipe', 'closed', 1, 1, 1)"
        )
        conn.execute(
            "INSERT INTO messages (session_seq, idx, body) VALUES (1, 0, ?)",
            ('{"role": "user", "content": "indexed by the old trigger"}',),
        )
    store = SqliteSessionStore(db)
    try:
        assert migrations.pending(store._conn, str(db)) == []
        assert _queued(db) == 0
        assert [r.session_id for r in store.list_page(query="trigger")[0]] == ["old"]
        store.delete("old")  # indexed by v4: taken out of the index
        _index_intact(db)
        assert store.list_page(query="trigger")[0] == []
    finally:
        store.close()


def test_a_version_5_file_gives_its_sessions_version_1_and_counts_on_from_there(db: Path) -> None:
    """Migration v6: the rows already stored start at version 1, as a new session does,
    and the number survives reopening the file."""
    v5 = [m for m in migrations.MIGRATIONS if m[0] <= 5]
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as conn:

        @contextlib.contextmanager
        def atomic() -> Iterator[None]:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")

        migrations.migrate(conn, atomic, str(db), v5)
        conn.execute(
            "INSERT INTO sessions (id, cwd, title, mode, backend, status, generation,"
            " created_at, updated_at) VALUES ('old', '/w', 't', 'craft', 'pipe', 'closed', 1, 1, 1)"
        )
    store = SqliteSessionStore(db)
    try:
        assert versions(db)[-1] == migrations.latest()
        assert store.get("old").version == 1
        assert store.update_metadata("old", title="renamed").version == 2
    finally:
        store.close()
    again = SqliteSessionStore(db)
    try:
        assert again.get("old").version == 2
        assert again.list_page()[0][0].version == 2
    finally:
        again.close()
