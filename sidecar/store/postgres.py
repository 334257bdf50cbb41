"""The shared `SessionStore`: PostgreSQL through psycopg 3's async connection pool.

Why these choices:
- Async all the way (psycopg's asyncio connections, `psycopg_pool.AsyncConnectionPool`):
  a query waiting on the network or on a row lock suspends only the request that made
  it; every other request, the listeners and the lease renewal go on.
- The pool reconnects: a connection is checked when it is taken (`check_connection`),
  so after the server restarted or killed our backends the next request gets a fresh
  one; while the server is gone requests fail with a StoreError after `--db-timeout`.
- Read-modify-write under a row lock (`SELECT ... FOR NO KEY UPDATE`), the new record
  from `domain.changes`, and the UPDATE itself fenced again by generation (`WHERE seq
  = ... AND generation = ...`): a superseded runtime's write cannot land, whichever
  host it comes from. Every multi-row change is one transaction; single statements
  run in autocommit.
- Lease renewal is one statement that skips rows another transaction has locked, so a
  held lock delays no renewal (the skipped lease is renewed next round).
- Every psycopg error becomes StoreError once, in `_connection`, naming the server as
  host:port/dbname and never the password; SessionNotFound and StaleGeneration pass
  through untouched because they are answers, not failures.
Transcript bodies are stored as JSON text, exactly as the SQLite store keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.domain import changes as change
from sidecar.domain.errors import SessionNotFound, StaleGeneration, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord
from sidecar.store import postgres_schema as schema
from sidecar.store import search
from sidecar.store.base import ChangeCallback, ListCursor
from sidecar.store.postgres_conn import Database
from sidecar.store.postgres_feed import ChangeFeed
from sidecar.store.repository import SessionRepository

log = logging.getLogger(__name__)

Conn = psycopg.AsyncConnection[tuple[Any, ...]]

_FIELDS: Final = tuple(f.name for f in dataclasses.fields(SessionRecord))
_COLUMN: Final = {name: "id" if name == "session_id" else name for name in _FIELDS}
_INSERT_COLUMNS: Final = ", ".join(_COLUMN[name] for name in _FIELDS)
_SELECT: Final = "seq, " + _INSERT_COLUMNS
_SESSIONS: Final = f"{schema.SCHEMA}.sessions"
_MESSAGES: Final = f"{schema.SCHEMA}.messages"
# The live states as SQL literals: the same predicate as the partial index sessions_live.
_LIVE: Final = ", ".join(f"'{state.value}'" for state in sorted(LIVE_STATES))
DEFAULT_POOL_SIZE: Final = 10


def _record(row: Sequence[Any]) -> tuple[int, SessionRecord]:
    """A `sessions` row (selected as _SELECT) as (seq, record)."""
    fields = dict(zip(_FIELDS, row[1:], strict=True))
    fields["status"] = Status(fields["status"])
    fields["mode"] = Mode(fields["mode"])
    fields["backend"] = Backend(fields["backend"])
    fields["approval"] = Approval(fields["approval"])
    fields["sandbox"] = None if fields["sandbox"] is None else Sandbox(fields["sandbox"])
    return int(row[0]), SessionRecord(**fields)


def _value(value: Any) -> Any:
    if isinstance(value, Status | Mode | Backend | Approval | Sandbox):
        return value.value
    return value


async def _row(conn: Conn, session_id: str, lock: str = "") -> tuple[int, SessionRecord]:
    cur = await conn.execute(
        f"SELECT {_SELECT} FROM {_SESSIONS} WHERE id = %s {lock}", (session_id,)
    )
    row = await cur.fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return _record(row)


class _Transaction:
    """The driver inside one transaction (`repository.StoreDriver`): a row read for update
    is locked (`FOR NO KEY UPDATE`) until the transaction ends."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def locked(self, session_id: str, *, share: bool = False) -> tuple[int, SessionRecord]:
        # FOR SHARE (a fork's source): only its deletion waits for the copy.
        return await _row(self._conn, session_id, "FOR SHARE" if share else "FOR NO KEY UPDATE")

    async def save(
        self, seq: int, record: SessionRecord, names: Sequence[str], fence: int | None
    ) -> None:
        """With `fence`, only if the stored generation is still that one (in this very
        statement: a second fence beside the row lock)."""
        columns = sorted({*names, "updated_at", "version"})  # one SQL text per set of fields
        sets = ", ".join(f"{_COLUMN[c]} = %s" for c in columns)
        args = [*(_value(getattr(record, c)) for c in columns), seq]
        where = "seq = %s"
        if fence is not None:
            where += " AND generation = %s"
            args.append(fence)
        cur = await self._conn.execute(f"UPDATE {_SESSIONS} SET {sets} WHERE {where}", args)
        if cur.rowcount != 1:
            raise StaleGeneration(record.session_id, fence or 0, record.generation)

    async def insert_row(self, record: SessionRecord) -> int:
        cur = await self._conn.execute(
            f"INSERT INTO {_SESSIONS} ({_INSERT_COLUMNS})"
            f" VALUES ({', '.join(['%s'] * len(_FIELDS))})"
            " ON CONFLICT (id) DO NOTHING RETURNING seq",
            [_value(getattr(record, name)) for name in _FIELDS],
        )
        row = await cur.fetchone()
        if row is None:
            raise StoreError(f"session {record.session_id} already exists")
        return int(row[0])

    async def add_message(self, seq: int, index: int, body: str) -> None:
        await self._conn.execute(
            f"INSERT INTO {_MESSAGES} (session_seq, idx, body) VALUES (%s, %s, %s)",
            (seq, index, body),
        )

    async def add_messages(self, seq: int, bodies: Sequence[str]) -> None:
        async with (
            self._conn.cursor() as cur,
            cur.copy(f"COPY {_MESSAGES} (session_seq, idx, body) FROM STDIN") as copy,
        ):
            for idx, body in enumerate(bodies):
                await copy.write_row((seq, idx, body))

    async def copy_messages(self, source: int, seq: int, count: int) -> None:
        await self._conn.execute(
            f"INSERT INTO {_MESSAGES} (session_seq, idx, body)"
            f" SELECT %s, idx, body FROM {_MESSAGES} WHERE session_seq = %s AND idx < %s",
            (seq, source, count),
        )

    async def live_rows(self) -> list[tuple[int, SessionRecord]]:
        # SKIP LOCKED: a row some transaction is writing right now has a live writer.
        cur = await self._conn.execute(
            f"SELECT {_SELECT} FROM {_SESSIONS} WHERE status IN ({_LIVE})"
            " ORDER BY seq FOR NO KEY UPDATE SKIP LOCKED"
        )
        return [_record(row) for row in await cur.fetchall()]


class PostgresSessionStore(SessionRepository):
    """`SessionStore` (and `ChangeFeed`) over one PostgreSQL database: the rules of
    `repository.SessionRepository` over this driver. Make one with
    `await PostgresSessionStore.open(url)`."""

    def __init__(
        self, db: Database, pool: AsyncConnectionPool[Conn], origin: str, opened_at: float
    ) -> None:
        self._db = db
        self._pool = pool
        self._origin = origin
        self._opened_at = opened_at  # the server's clock: where the change feed starts
        self._pool_size = pool.max_size
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        timeout: float = 10.0,
        pool_size: int = DEFAULT_POOL_SIZE,
        role: str = "sidecar",
    ) -> PostgresSessionStore:
        """Connect, migrate the schema (one transaction, under an advisory lock), and open
        the pool. Raises StoreError naming the server and the cause."""
        db = Database.parse(url, timeout)
        origin = f"acp-{role} {uuid.uuid4().hex[:16]}"
        kwargs = db.connect_kwargs(origin)
        try:
            async with asyncio.timeout(3 * timeout):
                conn = await psycopg.AsyncConnection.connect(db.url, **kwargs)
                try:
                    applied = await schema.migrate(conn, db.server)
                    cur = await conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
                    opened_at = float((await cur.fetchone() or (0.0,))[0])
                finally:
                    await conn.close()
        except (psycopg.Error, TimeoutError) as exc:
            raise db.error("open", exc) from None
        if applied:
            log.info("session store %s: schema migrated to version %s", db.server, applied[-1])
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            db.url,
            kwargs=kwargs,
            min_size=1,
            max_size=max(pool_size, 1),
            open=False,
            timeout=timeout,
            # Give up a backoff chain after `timeout`: the next request starts a fresh
            # attempt at once, so a server back after a long absence is used at once.
            reconnect_timeout=timeout,
            check=AsyncConnectionPool.check_connection,
            name="sidecar-store",
        )
        try:
            await pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise db.error("open", exc) from None
        log.info("session store: PostgreSQL at %s (pool of %d)", db.server, pool.max_size)
        return cls(db, pool, origin, opened_at)

    @property
    def server(self) -> str:
        """host:port/dbname (never the password)."""
        return self._db.server

    # ---- connections and the error boundary ------------------------------------------

    @contextlib.asynccontextmanager
    async def _connection(self, action: str) -> AsyncIterator[Conn]:
        """A pooled connection for one operation: the one place psycopg errors become
        StoreError, and the client-side bound on a server that stopped answering."""
        if self._closed:
            raise StoreError(f"cannot {action} session store {self.server}: it is closed")
        try:
            async with asyncio.timeout(3 * self._db.timeout):
                async with self._pool.connection() as conn:
                    yield conn
        except PoolTimeout as exc:
            raise await self._unreachable(action) from exc
        except (psycopg.Error, TimeoutError) as exc:
            raise self._db.error(action, exc) from exc

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[Conn]:
        async with self._connection("write") as conn, conn.transaction():
            yield conn

    async def _unreachable(self, action: str) -> StoreError:
        """No pooled connection in time: one direct attempt says why (server down, wrong
        password now, ...) or that every connection is busy."""
        try:
            async with asyncio.timeout(self._db.timeout):
                probe = await psycopg.AsyncConnection.connect(
                    self._db.url, **{**self._db.connect_kwargs(self._origin), "connect_timeout": 2}
                )
        except (psycopg.Error, TimeoutError) as exc:
            return self._db.error(action, exc)
        await probe.close()
        return StoreError(
            f"cannot {action} session store {self.server}: no free connection within "
            f"{self._db.timeout:g} s (all {self._pool_size} busy)"
        )

    # ---- the driver (repository.StoreDriver) ---------------------------------------------

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[_Transaction]:
        async with self._write() as conn:
            yield _Transaction(conn)

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
        words = search.terms(query, diacritics=True)  # `simple` keeps accents
        if words:
            # Every word in the title or in some message of the session (GIN, both).
            per_word = " INTERSECT ".join(
                f"(SELECT session_seq FROM {_MESSAGES} WHERE words @@ to_tsquery('simple', %s)"
                f" UNION SELECT seq FROM {_SESSIONS}"
                f" WHERE {schema.SCHEMA}.search_words(title) @@ to_tsquery('simple', %s))"
                for _ in words
            )
            filters.append(f"seq IN ({per_word})")
            for word in words:
                args += [f"{word}:*"] * 2  # letters and digits only: nothing to escape
        if archived is not None:
            filters.append("archived = %s")
            args.append(archived)
        if cwd is not None:
            filters.append("cwd = %s")
            args.append(cwd)
        if cursor is not None:
            filters.append("(updated_at, seq) < (%s, %s)")
            args += [cursor[0], cursor[1]]
        where = " AND ".join(filters) or "true"
        args.append(rows)
        async with self._connection("read") as conn:
            cur = await conn.execute(
                f"SELECT {_SELECT} FROM {_SESSIONS} WHERE {where}"
                " ORDER BY updated_at DESC, seq DESC LIMIT %s",
                args,
            )
            return [_record(row) for row in await cur.fetchall()]

    async def _messages(self, session_id: str, start: int, stop: int) -> list[dict[str, Any]]:
        # One statement, so the existence check and the page come from one snapshot.
        async with self._connection("read") as conn:
            cur = await conn.execute(
                f"SELECT m.body FROM {_SESSIONS} AS s LEFT JOIN {_MESSAGES} AS m"
                " ON m.session_seq = s.seq AND m.idx >= %s AND m.idx < %s"
                " WHERE s.id = %s ORDER BY m.idx",
                (start, stop, session_id),
            )
            rows = await cur.fetchall()
        if not rows:
            raise SessionNotFound(session_id)
        return [json.loads(body) for (body,) in rows if body is not None]

    # ---- the rest of SessionStore -------------------------------------------------------

    async def insert(self, record: SessionRecord) -> None:
        stored = change.forked(record, 0)
        async with self._connection("write") as conn:  # one statement: autocommit
            await _Transaction(conn).insert_row(stored)

    async def get(self, session_id: str) -> SessionRecord:
        async with self._connection("read") as conn:
            return (await _row(conn, session_id))[1]

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        # The outer SELECT reads the statement's snapshot: every lease `owner` holds,
        # including rows locked elsewhere that this round skips.
        sql = (
            f"WITH owned AS (SELECT seq FROM {_SESSIONS} WHERE lease_owner = %(owner)s"
            "   FOR NO KEY UPDATE SKIP LOCKED),"
            f" renewed AS (UPDATE {_SESSIONS} AS s SET lease_expires = %(expires)s"
            "   FROM owned WHERE s.seq = owned.seq RETURNING s.seq)"
            f" SELECT id FROM {_SESSIONS} WHERE lease_owner = %(owner)s"
        )
        async with self._connection("write") as conn:
            cur = await conn.execute(sql, {"owner": owner, "expires": expires})
            return {str(session_id) for (session_id,) in await cur.fetchall()}

    async def delete(self, session_id: str) -> None:
        # One statement: the transcript goes with the row (ON DELETE CASCADE).
        async with self._connection("write") as conn:
            cur = await conn.execute(
                f"DELETE FROM {_SESSIONS} WHERE id = %s RETURNING seq", (session_id,)
            )
            if await cur.fetchone() is None:
                raise SessionNotFound(session_id)

    async def clock(self) -> float:
        async with self._connection("read") as conn:
            cur = await conn.execute("SELECT extract(epoch FROM statement_timestamp())::float8")
            row = await cur.fetchone()
        assert row is not None
        return float(row[0])

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._pool.close()

    # ---- ChangeFeed ---------------------------------------------------------------------

    async def watch_changes(self, on_change: ChangeCallback) -> None:
        await ChangeFeed(self._db, self._origin, self._opened_at).run(on_change)

    # ---- for `python -m sidecar migrate` ------------------------------------------------

    async def import_session(self, record: SessionRecord, bodies: AsyncIterator[str]) -> bool:
        """Insert `record` exactly as given with its transcript (JSON texts, in order), in
        one transaction. False (nothing written) if the id exists; StoreError if the rows
        do not number `record.message_count`."""
        async with self._write() as conn:
            try:
                seq = await _Transaction(conn).insert_row(record)
            except StoreError:
                return False
            copied = 0
            async with (
                conn.cursor() as cur,
                cur.copy(f"COPY {_MESSAGES} (session_seq, idx, body) FROM STDIN") as copy,
            ):
                async for body in bodies:
                    await copy.write_row((seq, copied, body))
                    copied += 1
            if copied != record.message_count:
                raise StoreError(
                    f"session {record.session_id}: {copied} transcript rows for a record "
                    f"that counts {record.message_count}; nothing was written"
                )
        return True

    async def count_messages(self, session_id: str) -> int:
        """The transcript rows really stored (not the record's counter): for verifying."""
        async with self._connection("read") as conn:
            cur = await conn.execute(
                f"SELECT count(m.idx) FROM {_SESSIONS} AS s LEFT JOIN {_MESSAGES} AS m"
                " ON m.session_seq = s.seq WHERE s.id = %s GROUP BY s.seq",
                (session_id,),
            )
            row = await cur.fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return int(row[0])
