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
import dataclasses
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from typing_extensions import Unpack

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.domain import changes as change
from sidecar.domain.errors import SessionNotFound, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord, now
from sidecar.store import migrations, search
from sidecar.store.base import INTERRUPTED_MARKER, ListCursor, OrphanTest, RecordChanges, Row
from sidecar.store.private_files import secure_database

# Record fields in column order; the column for `session_id` is `id`.
_FIELDS: Final = (
    "session_id", "cwd", "title", "mode", "backend", "status", "generation",
    "created_at", "updated_at", "model", "last_error", "interrupted", "message_count",
    "forked_from", "context_from", "summary_index", "lease_owner", "lease_expires",
    "usage_input", "usage_output", "approval", "sandbox", "rules", "mcp_servers", "turns",
    "archived", "imported_from", "version",
)  # fmt: skip
_INSERT_COLUMNS: Final = ", ".join(_FIELDS).replace("session_id", "id")
_COLUMNS: Final = "seq, " + _INSERT_COLUMNS
_SELECT_BY_ID: Final = f"SELECT {_COLUMNS} FROM sessions WHERE id = ?"
# Offsets and limits are clamped below SQLite's 64-bit integer range.
log = logging.getLogger(__name__)

_MAX_INDEX: Final = 2**62
INDEX_DELAY: Final = 0.5  # seconds after a write that queued transcript rows, the index pass
INDEX_BATCH: Final = 5000  # queued rows indexed per transaction
RECENT_RECORDS: Final = 4096  # records `get` keeps between writes, at most


class _Members(dict[str, Any]):
    """Stored string -> enum member, a dict lookup on the read path; an unknown string
    still raises what the Enum constructor raises."""

    def __init__(self, enum: type[StrEnum]) -> None:
        super().__init__((member.value, member) for member in enum)
        self._enum = enum

    def __missing__(self, key: str) -> Any:
        return self._enum(key)


_STATUS: Final = _Members(Status)
_MODE: Final = _Members(Mode)
_BACKEND: Final = _Members(Backend)
_APPROVAL: Final = _Members(Approval)
_SANDBOX: Final = _Members(Sandbox)
if _FIELDS != tuple(field.name for field in dataclasses.fields(SessionRecord)):
    raise RuntimeError("sqlite store: _FIELDS must list SessionRecord's fields in order")


def _record(row: tuple[Any, ...]) -> tuple[int, SessionRecord]:
    """A `sessions` row (selected as _COLUMNS) as (seq, record). Positional, in field
    order (checked above): this runs on every read, `get` and each listed session."""
    (
        seq, session_id, cwd, title, mode, backend, status, generation, created_at,
        updated_at, model, last_error, interrupted, message_count, forked_from,
        context_from, summary_index, lease_owner, lease_expires, usage_input, usage_output,
        approval, sandbox, rules, mcp_servers, turns, archived, imported_from, version,
    ) = row  # fmt: skip
    return seq, SessionRecord(
        session_id, cwd, title, _MODE[mode], _BACKEND[backend], _STATUS[status], generation,
        created_at, updated_at, model, last_error, bool(interrupted), message_count,
        forked_from, context_from, summary_index, lease_owner, lease_expires, usage_input,
        usage_output, _APPROVAL[approval], None if sandbox is None else _SANDBOX[sandbox],
        rules, mcp_servers, turns, bool(archived), imported_from, version,
    )  # fmt: skip


def _column_value(value: Any) -> Any:
    if isinstance(value, Status | Mode | Backend | Approval | Sandbox):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def _read_only_hint(path: Path) -> str:
    """SQLite says "unable to open database file" or "readonly database"; say why."""
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return ""
    return " (the file system holding it is mounted read-only)" if read_only else ""


class _Boundary:
    """`SqliteSessionStore._boundary`'s context: a class, not a generator, because every
    store call, `get` on the status path included, passes through one."""

    __slots__ = ("_action", "_path")

    def __init__(self, path: Path, action: str) -> None:
        self._path = path
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, sqlite3.Error):
            hint = _read_only_hint(self._path)
            raise StoreError(
                f"cannot {self._action} session store {self._path}: {exc}{hint}"
            ) from exc


class SqliteSessionStore:
    """`SessionStore` over one SQLite file. `busy_timeout` is in seconds."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0) -> None:
        self._path = Path(path)
        self._depth = 0
        self._closed = False
        # Records as last read by `get`, while nobody has written the file since: our own
        # writes empty it, another connection's commit changes `PRAGMA data_version`. A
        # status request then costs a PRAGMA instead of a row read and its conversion.
        self._recent: dict[str, SessionRecord] = {}
        self._recent_version = -1
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

    def _boundary(self, action: str) -> _Boundary:
        """The one place sqlite3 errors become StoreError."""
        if self._closed:
            raise StoreError(f"cannot {action} session store {self._path}: it is closed")
        return _Boundary(self._path, action)

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
        try:
            with self._boundary("write"), self._atomic():
                yield
        finally:
            self._recent.clear()  # what a failed write may have changed too

    def _row(self, session_id: str) -> tuple[int, SessionRecord]:
        row = self._conn.execute(_SELECT_BY_ID, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return _record(row)

    def _save(self, seq: int, record: SessionRecord, *names: str) -> SessionRecord:
        """Write the named fields of `record`, and always updated_at and version."""
        columns = sorted(
            {*names, "updated_at", "version"}
        )  # sorted: one SQL text per set of fields
        self._conn.execute(
            f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in columns)} WHERE seq = ?",
            [*(_column_value(getattr(record, c)) for c in columns), seq],
        )
        return record

    def _insert_message(self, seq: int, record: SessionRecord, body: str) -> None:
        """O(1) in transcript length: the next index is the record's message_count."""
        self._conn.execute(
            "INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)",
            (seq, record.message_count, body),
        )
        self._index_soon()

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
        return len(ids)

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

    def _append(self, seq: int, record: SessionRecord, body: str) -> SessionRecord:
        self._insert_message(seq, record, body)
        return self._save(seq, change.appended(record, now()), "message_count")

    def _insert_row(self, record: SessionRecord) -> int:
        exists = self._conn.execute(
            "SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)
        ).fetchone()
        if exists:
            raise StoreError(f"session {record.session_id} already exists")
        cursor = self._conn.execute(
            f"INSERT INTO sessions ({_INSERT_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})",
            [_column_value(getattr(record, name)) for name in _FIELDS],
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def insert(self, record: SessionRecord) -> None:
        stored = change.forked(record, 0)
        with self._write():
            self._insert_row(stored)

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

    async def list_page(
        self,
        *,
        cwd: str | None = None,
        cursor: ListCursor | None = None,
        limit: int = 100,
        query: str | None = None,
        archived: bool | None = False,
    ) -> tuple[list[SessionRecord], ListCursor | None]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
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
        columns = _COLUMNS.replace("seq, ", "sessions.seq, ", 1)
        # One row beyond the page says whether a next page exists.
        sql = (
            f"SELECT {columns} FROM {source} WHERE {where}"
            " ORDER BY updated_at DESC, sessions.seq DESC LIMIT ?"
        )
        args.append(min(limit, _MAX_INDEX) + 1)
        with self._boundary("read"):
            rows = [_record(row) for row in self._conn.execute(sql, args)]
        page = rows[:limit]
        next_cursor = (page[-1][1].updated_at, page[-1][0]) if len(rows) > limit else None
        return [record for _, record in page], next_cursor

    async def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Row | None = None,
        **changes: Unpack[RecordChanges],
    ) -> SessionRecord:
        checked = change.validated_changes(changes)
        body = None if append is None else self._body(session_id, append)
        with self._write():
            seq, record = self._row(session_id)
            change.check_fence(record, generation)
            # UPDATABLE_FIELDS are column names, so `checked` names columns.
            if body is None:
                return self._save(seq, change.updated(record, checked, now()), *checked)
            # The row and the changes it came with: one record, one UPDATE (a turn's two
            # writes each carry a row, so this is the hot path).
            self._insert_message(seq, record, body)
            updated = change.updated_appending(record, checked, now())
            return self._save(seq, updated, *checked, "message_count")

    async def update_metadata(
        self,
        session_id: str,
        *,
        title: str | None = None,
        rules: str | None = None,
        archived: bool | None = None,
    ) -> SessionRecord:
        given = (("title", title), ("rules", rules), ("archived", archived))
        checked = change.validated_metadata({k: v for k, v in given if v is not None})
        with self._write():
            seq, record = self._row(session_id)
            return self._save(seq, change.updated(record, checked, now()), *checked)

    async def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        with self._write():
            seq, record = self._row(session_id)
            updated = change.new_generation(
                record,
                expected_generation,
                lease_owner=lease_owner,
                lease_expires=lease_expires,
                at=now(),
            )
            return self._save(
                seq, updated, "generation", "status", "last_error", "lease_owner", "lease_expires"
            )

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        with self._write():
            rows = self._conn.execute(
                "UPDATE sessions SET lease_expires = ? WHERE lease_owner = ? RETURNING id",
                (expires, owner),
            ).fetchall()
            return {session_id for (session_id,) in rows}

    @staticmethod
    def _body(session_id: str, row: Row) -> str:
        try:
            return json.dumps(dict(row))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"cannot store a row for session {session_id}: {exc}") from exc

    async def append_message(self, session_id: str, generation: int, row: Row) -> int:
        body = self._body(session_id, row)
        with self._write():
            seq, record = self._row(session_id)
            change.check_fence(record, generation)
            return self._append(seq, record, body).message_count - 1

    async def messages(
        self, session_id: str, offset: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        if offset < 0 or limit < 0:
            raise ValueError(f"offset and limit must be >= 0, got {offset}, {limit}")
        start = min(offset, _MAX_INDEX)
        stop = min(offset + limit, _MAX_INDEX)
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

    async def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        change.forked(record, 0)  # refuses a record that claims rows already
        with self._write():
            source_seq, source = self._row(source_id)
            stored = change.forked(record, max(0, min(upto, source.message_count)))
            seq = self._insert_row(stored)
            self._conn.execute(
                "INSERT INTO messages (session_seq, idx, body)"
                " SELECT ?, idx, body FROM messages WHERE session_seq = ? AND idx < ?",
                (seq, source_seq, stored.message_count),
            )
        self._index_soon()
        return stored

    async def insert_with_transcript(
        self, record: SessionRecord, rows: Sequence[Row]
    ) -> SessionRecord:
        change.forked(record, 0)  # refuses a record that claims rows already
        bodies = [self._body(record.session_id, row) for row in rows]
        stored = change.forked(record, len(bodies))
        with self._write():
            seq = self._insert_row(stored)
            self._conn.executemany(
                "INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)",
                ((seq, idx, body) for idx, body in enumerate(bodies)),
            )
        self._index_soon()
        return stored

    async def delete(self, session_id: str) -> None:
        with self._write():
            seq, _ = self._row(session_id)
            self._conn.execute("DELETE FROM messages WHERE session_seq = ?", (seq,))
            self._conn.execute("DELETE FROM sessions WHERE seq = ?", (seq,))

    def _reconcile(self, seq: int, record: SessionRecord) -> SessionRecord:
        closed, was_running = change.closed_orphan(record, now())
        self._save(seq, closed, "status", "interrupted", "lease_owner", "lease_expires")
        if was_running:
            closed = self._append(seq, closed, json.dumps(INTERRUPTED_MARKER))
        return closed

    async def reconcile_orphans(self, is_orphan: OrphanTest | None = None) -> list[SessionRecord]:
        live = sorted(state.value for state in LIVE_STATES)
        changed: list[SessionRecord] = []
        with self._write():
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE status IN ({', '.join('?' * len(live))})"
                " ORDER BY seq",
                live,
            ).fetchall()
            for seq, record in map(_record, rows):
                if is_orphan is None or is_orphan(record):
                    changed.append(self._reconcile(seq, record))
        return changed

    async def reconcile_one(self, session_id: str, is_orphan: OrphanTest) -> SessionRecord:
        with self._write():
            seq, record = self._row(session_id)
            if record.status in LIVE_STATES and is_orphan(record):
                return self._reconcile(seq, record)
            return record

    async def clock(self) -> float:
        return time.time()  # one file, one host: this host's clock is the shared one

    async def close(self) -> None:
        self.close_now()

    def close_now(self) -> None:
        """Synchronous close (for callers outside the event loop); the search index is
        brought up to date first (if that fails, the next search on the file does it)."""
        if self._closed:
            return
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
