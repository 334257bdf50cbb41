"""News of sessions other sidecars changed: PostgreSQL LISTEN/NOTIFY on a connection of
its own.

The schema's trigger notifies in the writing transaction (see `postgres_schema`), so a
change is announced exactly when it commits. The feed LISTENs on a dedicated
one-connection pool: when the connection drops (a server restart, a killed backend,
a network cut) the pool opens a new one, and the feed LISTENs again and catches up on
what it missed from the `changed_at` column (by the server's clock, with a margin for
transactions that committed late), so no change goes unannounced across a reconnect.
The first connection catches up the same way from when the store was opened, so
nothing between start-up and the first LISTEN is missed either.
Each session id is delivered to the callback one call at a time, and an id already
waiting is not queued twice: a burst of appends costs one read, not hundreds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Final

import psycopg
from psycopg_pool import AsyncConnectionPool

from sidecar.store.base import ChangeCallback
from sidecar.store.postgres_conn import Database
from sidecar.store.postgres_schema import CHANNEL, SCHEMA

log = logging.getLogger(__name__)

Conn = psycopg.AsyncConnection[tuple[Any, ...]]
# After a failure, at least this long before the next attempt (the pool paces reconnects;
# this only keeps an error that repeats at once from spinning).
_PAUSE: Final = 1.0


def _parse(payload: str) -> tuple[str, float, str] | None:
    try:
        data = json.loads(payload)
        return str(data["session"]), float(data["at"]), str(data["origin"])
    except (ValueError, KeyError, TypeError):
        return None


class ChangeFeed:
    def __init__(self, db: Database, origin: str, since: float) -> None:
        self._db = db
        self._since = since  # the server's time of the latest change we know of
        self._origin = origin  # our application_name: our own changes are not news
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        # Late commits: a change is stamped when written, announced when committed, at
        # most a statement timeout apart.
        self._margin = 2 * db.timeout + 1.0

    def _offer(self, session_id: str) -> None:
        if session_id not in self._queued:
            self._queued.add(session_id)
            self._queue.put_nowait(session_id)

    async def run(self, on_change: ChangeCallback) -> None:
        """Until cancelled."""
        delivering = asyncio.create_task(self._deliver(on_change), name="store-changes")
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self._db.url,
            kwargs=self._db.connect_kwargs(self._origin),
            min_size=1,
            max_size=1,
            open=False,
            timeout=self._db.timeout,
            reconnect_timeout=self._db.timeout,
            name="sidecar-changes",
        )
        try:
            await pool.open()
            await self._listen(pool)
        finally:
            delivering.cancel()
            await asyncio.gather(delivering, return_exceptions=True)
            await pool.close()

    async def _listen(self, pool: AsyncConnectionPool[Conn]) -> None:
        first = True
        while True:
            try:
                async with pool.connection() as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    caught = await self._catch_up(conn, self._since - self._margin)
                    self._since = max([self._since, *caught.values()])
                    if not first:
                        log.info(
                            "change feed from %s: listening again (%d session(s) to catch up)",
                            self._db.server,
                            len(caught),
                        )
                    first = False
                    async for notify in conn.notifies():
                        parsed = _parse(notify.payload)
                        if parsed is None:
                            log.warning("change feed: unreadable notification %r", notify.payload)
                            continue
                        session_id, at, origin = parsed
                        self._since = max(self._since, at)
                        if origin != self._origin:
                            self._offer(session_id)
            except psycopg.Error as exc:  # a lost connection, or none to be had yet
                log.warning(
                    "change feed from %s lost: %s; listening again when it is back",
                    self._db.server,
                    self._db.cause(exc),
                )
                await asyncio.sleep(_PAUSE)

    async def _catch_up(self, conn: Conn, after: float) -> dict[str, float]:
        """Sessions changed since `after` (ours among them: they cannot be told apart
        here, and one extra state notification is harmless)."""
        cur = await conn.execute(
            f"SELECT id, changed_at FROM {SCHEMA}.sessions WHERE changed_at > %s"
            " ORDER BY changed_at",
            (after,),
        )
        caught = {str(session_id): float(at) for session_id, at in await cur.fetchall()}
        for session_id in caught:
            self._offer(session_id)
        return caught

    async def _deliver(self, on_change: ChangeCallback) -> None:
        while True:
            session_id = await self._queue.get()
            self._queued.discard(session_id)  # a change from now on queues it again
            try:
                await on_change(session_id)
            except Exception:  # noqa: BLE001 (one bad delivery must not end the feed)
                log.exception("change feed: telling about session %s failed", session_id)
