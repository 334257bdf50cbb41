"""The durable `SessionStore`: one SQLite file, WAL, explicit transactions.

Why these settings: WAL lets a reader page a transcript while a writer appends;
`synchronous=NORMAL` in WAL survives a process crash (what we promise) without
an fsync per message; `busy_timeout` lets a second sidecar on the same data dir
wait for the lock instead of failing at once. Every sqlite3 error is turned
into StoreError once, in `_boundary`; SessionNotFound and StaleGeneration pass
through untouched because they are answers, not failures.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from sidecar.errors import SessionNotFound, StaleGeneration, StoreError
from sidecar.records import (
    LIVE_STATES,
    UPDATABLE_FIELDS,
    SessionRecord,
    SessionState,
    now,
)
from sidecar.store import migrations
from sidecar.store.base import INTERRUPTED_MARKER

# Record fields in column order; the column for `session_id` is `id`.
_FIELDS: Final = (
    "session_id", "cwd", "title", "mode", "backend", "status", "generation",
    "created_at", "updated_at", "model", "last_error", "interrupted", "message_count",
    "forked_from", "context_from", "summary_index", "lease_owner", "lease_expires",
)  # fmt: skip
_INSERT_COLUMNS: Final = ", ".join(_FIELDS).replace("session_id", "id")
_COLUMNS: Final = "seq, " + _INSERT_COLUMNS
# Offsets and limits are clamped below SQLite's 64-bit integer range.
_MAX_INDEX: Final = 2**62


def _record(row: tuple[Any, ...]) -> tuple[int, SessionRecord]:
    """A `sessions` row (selected as _COLUMNS) as (seq, record)."""
    fields = dict(zip(_FIELDS, row[1:], strict=True))
    fields["status"] = SessionState(fields["status"])
    fields["interrupted"] = bool(fields["interrupted"])
    return row[0], SessionRecord(**fields)


def _column_value(value: Any) -> Any:
    if isinstance(value, SessionState):
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


def _prepare_files(path: Path) -> None:
    """Create the data dir (0o700) and the database file (0o600) if missing.
    SQLite gives the -wal and -shm files the database file's mode."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)  # mkdir's mode is narrowed by the umask; be exact
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


class SqliteSessionStore:
    """`SessionStore` over one SQLite file. `busy_timeout` is in seconds."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0) -> None:
        self._path = Path(path)
        self._depth = 0
        self._closed = False
        try:
            _prepare_files(self._path)
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

    @contextlib.contextmanager
    def _boundary(self, action: str) -> Iterator[None]:
        """The one place sqlite3 errors become StoreError."""
        if self._closed:
            raise StoreError(f"cannot {action} session store {self._path}: it is closed")
        try:
            yield
        except sqlite3.Error as exc:
            hint = _read_only_hint(self._path)
            raise StoreError(f"cannot {action} session store {self._path}: {exc}{hint}") from exc

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
        with self._boundary("write"), self._atomic():
            yield

    def _row(self, session_id: str) -> tuple[int, SessionRecord]:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return _record(row)

    def _fenced(self, session_id: str, generation: int) -> tuple[int, SessionRecord]:
        seq, record = self._row(session_id)
        if record.generation != generation or record.status is SessionState.CLOSED:
            raise StaleGeneration(session_id, generation, record.generation)
        return seq, record

    def _save(self, seq: int, record: SessionRecord, *names: str) -> SessionRecord:
        """Write the named fields of `record`, and always updated_at."""
        columns = sorted({*names, "updated_at"})  # sorted: one SQL text per set of fields
        self._conn.execute(
            f"UPDATE sessions SET {', '.join(f'{c} = ?' for c in columns)} WHERE seq = ?",
            [*(_column_value(getattr(record, c)) for c in columns), seq],
        )
        return record

    def _append(self, seq: int, record: SessionRecord, body: str) -> SessionRecord:
        """O(1) in transcript length: the next index is the record's message_count."""
        index = record.message_count
        self._conn.execute(
            "INSERT INTO messages (session_seq, idx, body) VALUES (?, ?, ?)", (seq, index, body)
        )
        updated = record.replace(message_count=index + 1, updated_at=now())
        return self._save(seq, updated, "message_count")

    def insert(self, record: SessionRecord) -> None:
        if record.message_count != 0:
            raise ValueError("a new session record must have message_count 0")
        values = [_column_value(getattr(record, name)) for name in _FIELDS]
        with self._write():
            exists = self._conn.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)
            ).fetchone()
            if exists:
                raise StoreError(f"session {record.session_id} already exists")
            self._conn.execute(
                f"INSERT INTO sessions ({_INSERT_COLUMNS})"
                f" VALUES ({', '.join('?' * len(_FIELDS))})",
                values,
            )

    def get(self, session_id: str) -> SessionRecord:
        with self._boundary("read"):
            return self._row(session_id)[1]

    def list_page(
        self, *, cwd: str | None = None, cursor: int | None = None, limit: int = 100
    ) -> tuple[list[SessionRecord], int | None]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        filters = {"cwd = ?": cwd, "seq < ?": cursor}
        where = " AND ".join(f for f, v in filters.items() if v is not None) or "1"
        args = [v for v in filters.values() if v is not None]
        # One row beyond the page says whether a next page exists.
        sql = f"SELECT {_COLUMNS} FROM sessions WHERE {where} ORDER BY seq DESC LIMIT ?"
        args.append(min(limit, _MAX_INDEX) + 1)
        with self._boundary("read"):
            rows = [_record(row) for row in self._conn.execute(sql, args)]
        page = rows[:limit]
        next_cursor = page[-1][0] if len(rows) > limit else None
        return [record for _, record in page], next_cursor

    def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> SessionRecord:
        unknown = set(changes) - UPDATABLE_FIELDS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        if "status" in changes:
            changes["status"] = SessionState(changes["status"])
        body = None if append is None else self._body(session_id, append)
        with self._write():
            seq, record = self._fenced(session_id, generation)
            if body is not None:
                record = self._append(seq, record, body)
            # UPDATABLE_FIELDS are column names, so `changes` names columns.
            return self._save(seq, record.replace(**changes, updated_at=now()), *changes)

    def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        with self._write():
            seq, record = self._row(session_id)
            if record.generation != expected_generation:
                raise StaleGeneration(session_id, expected_generation, record.generation)
            updated = record.replace(
                generation=record.generation + 1,
                status=SessionState.CREATING,
                last_error=None,
                lease_owner=lease_owner,
                lease_expires=lease_expires,
                updated_at=now(),
            )
            return self._save(
                seq, updated, "generation", "status", "last_error", "lease_owner", "lease_expires"
            )

    def renew_leases(self, owner: str, expires: float) -> set[str]:
        with self._write():
            self._conn.execute(
                "UPDATE sessions SET lease_expires = ? WHERE lease_owner = ?", (expires, owner)
            )
            rows = self._conn.execute("SELECT id FROM sessions WHERE lease_owner = ?", (owner,))
            return {session_id for (session_id,) in rows}

    @staticmethod
    def _body(session_id: str, message: Mapping[str, Any]) -> str:
        try:
            return json.dumps(dict(message))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"cannot store message for session {session_id}: {exc}") from exc

    def append_message(self, session_id: str, generation: int, message: Mapping[str, Any]) -> int:
        body = self._body(session_id, message)
        with self._write():
            seq, record = self._fenced(session_id, generation)
            return self._append(seq, record, body).message_count - 1

    def messages(self, session_id: str, offset: int = 0, limit: int = 100) -> list[dict[str, Any]]:
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

    def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        if record.message_count != 0:
            raise ValueError("a new session record must have message_count 0")
        with self._write():
            source_seq, source = self._row(source_id)
            count = max(0, min(upto, source.message_count))
            stored = record.replace(message_count=count)
            exists = self._conn.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (record.session_id,)
            ).fetchone()
            if exists:
                raise StoreError(f"session {record.session_id} already exists")
            cursor = self._conn.execute(
                f"INSERT INTO sessions ({_INSERT_COLUMNS})"
                f" VALUES ({', '.join('?' * len(_FIELDS))})",
                [_column_value(getattr(stored, name)) for name in _FIELDS],
            )
            self._conn.execute(
                "INSERT INTO messages (session_seq, idx, body)"
                " SELECT ?, idx, body FROM messages WHERE session_seq = ? AND idx < ?",
                (cursor.lastrowid, source_seq, count),
            )
            return stored

    def delete(self, session_id: str) -> None:
        with self._write():
            seq, _ = self._row(session_id)
            self._conn.execute("DELETE FROM messages WHERE session_seq = ?", (seq,))
            self._conn.execute("DELETE FROM sessions WHERE seq = ?", (seq,))

    def reconcile_orphans(
        self, is_orphan: Callable[[SessionRecord], bool] | None = None
    ) -> list[SessionRecord]:
        live = sorted(state.value for state in LIVE_STATES)
        marker = json.dumps(INTERRUPTED_MARKER)
        changed: list[SessionRecord] = []
        with self._write():
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM sessions WHERE status IN ({', '.join('?' * len(live))})"
                " ORDER BY seq",
                live,
            ).fetchall()
            for seq, record in map(_record, rows):
                if is_orphan is not None and not is_orphan(record):
                    continue
                was_running = record.status is SessionState.RUNNING
                updated = record.replace(
                    status=SessionState.CLOSED,
                    interrupted=record.interrupted or was_running,
                    lease_owner=None,
                    lease_expires=None,
                    updated_at=now(),
                )
                self._save(seq, updated, "status", "interrupted", "lease_owner", "lease_expires")
                if was_running:
                    updated = self._append(seq, updated, marker)
                changed.append(updated)
        return changed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot close session store {self._path}: {exc}") from exc
