"""The durable `SessionStore`: one SQLite file, WAL, explicit transactions.

Why these settings: WAL lets a reader page a transcript while a writer appends;
`synchronous=NORMAL` in WAL survives a process crash (what we promise) without
an fsync per message; `busy_timeout` lets a second sidecar on the same data dir
wait for the lock instead of failing at once. Every sqlite3 error is turned
into StoreError once, in `_boundary`; SessionNotFound and StaleGeneration pass
through untouched because they are answers, not failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from sidecar.domain.errors import SessionNotFound, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord
from sidecar.store import migrations, search
from sidecar.store.base import ListCursor
from sidecar.store.private_files import secure_database
from sidecar.store.repository import SessionRepository
from sidecar.store.search_merge import SearchMerger
from sidecar.store.sqlite_rows import (
    COLUMNS,
    FIELDS,
    INSERT_COLUMNS,
    SELECT_BY_ID,
    Boundary,
    column_value,
    record_of,
)

log = logging.getLogger(__name__)

INDEX_DELAY: Final = 0.5  # seconds after a write that queued transcript rows, the index pass
INDEX_BATCH: Final = 5000  # queued rows indexed per transaction
RECENT_RECORDS: Final = 4096  # records `get` keeps between writes, at most


class _Transaction:
    """`SqliteSessionStore._transaction`'s context: its `_write` around the block. A class,
    not an async generator, because a turn's two writes pass through it (measured: an
    `asynccontextmanager` made each `update` ~8 us slower)."""

    __slots__ = ("_store", "_write")

    def __init__(self, store: SqliteSessionStore) -> None:
        self._store = store
        self._write = store._write()

    async def __aenter__(self) -> SqliteSessionStore:
        self._write.__enter__()
        return self._store

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self._write.__exit__(kind, exc, tb)


class SqliteSessionStore(SessionRepository):
    """`SessionStore` over one SQLite file: `repository.SessionRepository`'s rules over
    this driver. `busy_timeout` is in seconds."""

    def __init__(
        self, path: str | Path, *, busy_timeout: float = 5.0, merge_when_idle: bool = True
    ) -> None:
        self._path = Path(path)
        # The search index merged when nothing was written for a while (search_merge.py);
        # off for files built in bulk by scripts, which merge when they choose.
        self.search_merger = SearchMerger(self._path)
        self._merge_when_idle = merge_when_idle
        self._depth = 0
        self._closed = False
        # Records as last read by `get`, while nobody has written the file since: our own
        # writes empty it, another connection's commit changes `PRAGMA data_version`. A
        # status request then costs a PRAGMA instead of a row read and its conversion.
        self._recent: dict[str, SessionRecord] = {}
        self._recent_version = -1
        # The records the open write transaction saved whole; None: it changed rows in a
        # way not kept here (a delete, lease renewals), so `get` forgets everything.
        self._saved: dict[str, SessionRecord] | None = None
        self._index_timer: asyncio.TimerHandle | None = None
        try:
            secure_database(self._path)
        except OSError as exc:
            raise StoreError(
                f"cannot open session store {self._path}: {exc.strerror or exc}"
            ) from exc
        with self._boundary("open"):
            self._conn = sqlite3.connect(self._path, timeout=busy_timeout, isolation_level=None)
        try:
            with self._boundary("open"):
                self._setup(busy_timeout)
        except BaseException:
            self._conn.close()
            self._closed = True
            raise
        if os.access(self._path.parent, os.W_OK):
            self._merge_soon()  # what earlier runs left unmerged

    def _setup(self, busy_timeout: float) -> None:
        conn, where = self._conn, str(self._path)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        steps = migrations.MIGRATIONS  # looked up now, so tests can substitute their own
        # Judge the file before the first write: switching to WAL rewrites the header.
        migrations.current_version(conn, where, migrations.latest(steps))
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot open session store {where}: WAL mode refused ({mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        migrations.migrate(conn, self._atomic, where, steps)

    @property
    def path(self) -> Path:
        return self._path

    def _boundary(self, action: str) -> Boundary:
        """The one place sqlite3 errors become StoreError."""
        if self._closed:
            raise StoreError(f"cannot {action} session store {self._path}: it is closed")
        return Boundary(self._path, action)

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """BEGIN IMMEDIATE at the outer level (take the write lock up front, so a
        read-then-write never fails half-way on a lock upgrade), SAVEPOINT when
        nested. Refuses to adopt a transaction it did not open: committing it
        would commit someone else's half-done work."""
        conn = self._conn
        savepoint: str | None = None
        if self._depth == 0:
            if conn.in_transaction:
                raise StoreError(f"session store {self._path}: a foreign transaction is open")
            conn.execute("BEGIN IMMEDIATE")
        else:
            savepoint = f"sp{self._depth}"
            conn.execute(f"SAVEPOINT {savepoint}")
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            self._rollback(savepoint)
            raise
        self._depth -= 1
        try:
            conn.execute(f"RELEASE {savepoint}" if savepoint else "COMMIT")
        except BaseException:
            self._rollback(savepoint)
            raise

    def _rollback(self, savepoint: str | None) -> None:
        # SQLite may already have rolled back (disk full, I/O error). If the
        # rollback itself fails, the error being raised is the one that matters.
        if not self._conn.in_transaction:
            return
        with contextlib.suppress(sqlite3.Error):
            if savepoint:
                self._conn.execute(f"ROLLBACK TO {savepoint}")
                self._conn.execute(f"RELEASE {savepoint}")
            else:
                self._conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """A write transaction. The records it saved (`save`, `insert_row`) are what a read
        would return once it commits: they replace what `get` kept (our own commits do
        not change `PRAGMA data_version`); any other write empties what `get` kept."""
        if self._depth > 0:  # nested (a savepoint): the outer transaction keeps the count
            with self._boundary("write"), self._atomic():
                yield
            return
        self._saved = {}
        try:
            with self._boundary("write"), self._atomic():
                yield
        except BaseException:
            self._recent.clear()  # what a failed write may have changed too
            raise
        finally:
            saved, self._saved = self._saved, None
        if saved is None or len(self._recent) + len(saved) > RECENT_RECORDS:
            self._recent.clear()
        else:
            self._recent.update(saved)
        self.search_merger.touch()

    def _keep(self, record: SessionRecord) -> None:
        """A record this transaction wrote whole (see `_write`)."""
        if self._saved is not None:
            self._saved[record.session_id] = record

    def _forget_all(self) -> None:
        """This transaction changes rows in a way `_write` cannot keep: forget them all."""
        self._saved = None

    def _transaction(self) -> _Transaction:
        """The repository's transaction: `_write` on the one connection (this object is
        the driver inside it)."""
        return _Transaction(self)

    def _row(self, session_id: str) -> tuple[int, SessionRecord]:
        row = self._conn.execute(SELECT_BY_ID, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return record_of(row)

    # ---- the driver (repository.StoreDriver), inside `_transaction` ---------------------

    async def locked(self, session_id: str, *, share: bool = False) -> tuple[int, SessionRecord]:
        return self._row(session_id)  # BEGIN IMMEDIATE holds the file's write lock

    async def save(
        self, seq: int, record: SessionRecord, names: Sequence[str], fence: int | None
    ) -> None:
        """The fence was judged under the write lock; only the row is written here."""
        columns = sorted({*names, "updated_at", "version"})  # one SQL text per set
        self._conn.execute(
            f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in columns)} WHERE seq = ?",
            [*(column_value(getattr(record, c)) for c in columns), seq],
        )
        self._keep(record)

    async def add_message(self, seq: int, index: int, body: str) -> None:
        self._conn.execute(
            "INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)", (seq, index, body)
        )
        self._index_soon()

    async def add_messages(self, seq: int, bodies: Sequence[str]) -> None:
        self._conn.executemany(
            "INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)",
            ((seq, idx, body) for idx, body in enumerate(bodies)),
        )
        self._index_soon()

    async def copy_messages(self, source: int, seq: int, count: int) -> None:
        self._conn.execute(
            "INSERT INTO messages (session_seq, idx, body)"
            " SELECT ?, idx, body FROM messages WHERE session_seq = ? AND idx < ?",
            (seq, source, count),
        )
        self._index_soon()

    async def insert_row(self, record: SessionRecord) -> int:
        seq = self._insert_row(record)
        self._keep(record)
        return seq

    async def live_rows(self) -> list[tuple[int, SessionRecord]]:
        live = sorted(state.value for state in LIVE_STATES)
        rows = self._conn.execute(
            f"SELECT {COLUMNS} FROM sessions WHERE status IN ({', '.join('?' * len(live))})"
            " ORDER BY seq",
            live,
        ).fetchall()
        return [record_of(row) for row in rows]

    async def _listed(
        self,
        *,
        cwd: str | None,
        cursor: ListCursor | None,
        rows: int,
        query: str | None,
        archived: bool | None,
    ) -> list[tuple[int, SessionRecord]]:
        filters: list[str] = []
        args: list[Any] = []
        source = "sessions"
        words = search.terms(query)
        if words:
            self._index_pending()  # what was written since the last pass, first
            # The matching seqs first (every word in the title or some message), then
            # their rows: the work follows the matches, not the number of sessions.
            per_word = " INTERSECT ".join(
                "SELECT seq FROM (SELECT rowid >> 32 AS seq FROM transcript_search"
                " WHERE transcript_search MATCH ? UNION"
                " SELECT rowid FROM title_search WHERE title_search MATCH ?)"
                for _ in words
            )
            source = f"({per_word}) AS hits CROSS JOIN sessions ON sessions.seq = hits.seq"
            for word in words:
                args += [search.fts5_prefix(word)] * 2
        if archived is not None:
            filters.append("archived = ?")
            args.append(int(archived))
        if cwd is not None:
            filters.append("cwd = ?")
            args.append(cwd)
        if cursor is not None:
            filters.append("(updated_at, sessions.seq) < (?, ?)")
            args += [cursor[0], cursor[1]]
        where = " AND ".join(filters) or "1"
        columns = COLUMNS.replace("seq, ", "sessions.seq, ", 1)
        # One row beyond the page says whether a next page exists.
        sql = (
            f"SELECT {columns} FROM {source} WHERE {where}"
            " ORDER BY updated_at DESC, sessions.seq DESC LIMIT ?"
        )
        args.append(rows)
        with self._boundary("read"):
            return [record_of(row) for row in self._conn.execute(sql, args)]

    async def _messages(self, session_id: str, start: int, stop: int) -> list[dict[str, Any]]:
        # One statement, so the existence check and the page come from one snapshot.
        with self._boundary("read"):
            rows = self._conn.execute(
                "SELECT m.body FROM sessions AS s LEFT JOIN messages AS m"
                " ON m.session_seq = s.seq AND m.idx >= ? AND m.idx < ?"
                " WHERE s.id = ? ORDER BY m.idx",
                (start, stop, session_id),
            ).fetchall()
        if not rows:
            raise SessionNotFound(session_id)
        return [json.loads(body) for (body,) in rows if body is not None]

    # ---- the rest of SessionStore --------------------------------------------------------

    async def get(self, session_id: str) -> SessionRecord:
        with self._boundary("read"):
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._recent_version or len(self._recent) >= RECENT_RECORDS:
                self._recent.clear()
                self._recent_version = version
            record = self._recent.get(session_id)
            if record is None:
                record = self._recent[session_id] = self._row(session_id)[1]
            return record

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        with self._write():
            self._forget_all()
            rows = self._conn.execute(
                "UPDATE sessions SET lease_expires = ? WHERE lease_owner = ? RETURNING id",
                (expires, owner),
            ).fetchall()
            return {session_id for (session_id,) in rows}

    async def delete(self, session_id: str) -> None:
        with self._write():
            self._forget_all()
            seq, _ = self._row(session_id)
            self._conn.execute("DELETE FROM messages WHERE session_seq = ?", (seq,))
            self._conn.execute("DELETE FROM sessions WHERE seq = ?", (seq,))
        self._merge_soon()  # the index took the rows out as segments of their own

    # ---- the search index, a batch at a time (migrations.py, v5) ----------------------

    def _index_soon(self, delay: float = INDEX_DELAY) -> None:
        """A write queued transcript rows for the index: index them shortly, in one
        transaction for all that come meanwhile (outside a running loop: at the next
        search, or at close)."""
        if self._index_timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._index_timer = loop.call_later(delay, self._index_later)

    def _index_later(self) -> None:
        """One batch per turn of the event loop, so a big queue (an import) never holds
        the loop for long."""
        self._index_timer = None
        if self._closed:
            return
        try:
            more = self._index_batch() == INDEX_BATCH
        except StoreError as exc:  # the rows stay queued: the next search indexes them
            log.warning("search index not brought up to date: %s", exc)
            return
        if more:
            self._index_soon(0.0)

    def _index_batch(self) -> int:
        """Index up to INDEX_BATCH queued transcript rows in one transaction; how many."""
        with self._write():
            ids = self._conn.execute(
                "SELECT id FROM search_pending ORDER BY id LIMIT ?", (INDEX_BATCH,)
            ).fetchall()
            if ids:
                last = ids[-1][0]
                self._conn.execute(migrations.INDEX_PENDING, (last,))
                self._conn.execute("DELETE FROM search_pending WHERE id <= ?", (last,))
        if ids:
            self._merge_soon()
        return len(ids)

    def _merge_soon(self) -> None:
        """The search index has segments to merge: once the store is idle (search_merge.py)."""
        if self._merge_when_idle:
            self.search_merger.poke()

    def _index_pending(self) -> int:
        """Index every queued transcript row, a batch per transaction; how many. An empty
        queue costs one read (no write transaction: a search stays a reader)."""
        with self._boundary("read"):
            if self._conn.execute("SELECT 1 FROM search_pending LIMIT 1").fetchone() is None:
                return 0
        done = 0
        while (batch := self._index_batch()) == INDEX_BATCH:
            done += batch
        return done + batch

    async def index_pending(self) -> int:
        """Bring the search index up to date now (a search does this itself); how many
        rows it took."""
        return self._index_pending()

    def _insert_row(self, record: SessionRecord) -> int:
        exists = self._conn.execute(
            "SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)
        ).fetchone()
        if exists:
            raise StoreError(f"session {record.session_id} already exists")
        cursor = self._conn.execute(
            f"INSERT INTO sessions ({INSERT_COLUMNS}) VALUES ({', '.join('?' * len(FIELDS))})",
            [column_value(getattr(record, name)) for name in FIELDS],
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def clock(self) -> float:
        return time.time()  # one file, one host: this host's clock is the shared one

    async def close(self) -> None:
        self.close_now()

    def close_now(self) -> None:
        """Synchronous close (for callers outside the event loop); the search index is
        brought up to date first (if that fails, the next search on the file does it)."""
        if self._closed:
            return
        self.search_merger.close()  # first: it waits for a merge step under way, if any
        if self._index_timer is not None:
            self._index_timer.cancel()
            self._index_timer = None
        try:
            self._index_pending()
        except StoreError as exc:
            log.warning("search index not brought up to date at close: %s", exc)
        self._closed = True
        try:
            self._conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot close session store {self._path}: {exc}") from exc
