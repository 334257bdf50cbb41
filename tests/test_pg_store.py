"""The PostgreSQL store's own behaviour, in process against the real server: schema
migrations under concurrency, refusals, row locks and timeouts, lease renewal beside a
lock, the change feed, and what may be said about the URL.

The behaviour every store shares is in tests/test_store_contract.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import psycopg
import pytest
from pg_server import PgServer

from protocol.values import Backend, Mode, Status
from sidecar.domain.errors import StoreError
from sidecar.domain.records import SessionRecord
from sidecar.store import postgres_schema
from sidecar.store.postgres import PostgresSessionStore
from sidecar.store.postgres_conn import Database

ALL_VERSIONS = [version for version, _ in postgres_schema.MIGRATIONS]


def record(session_id: str, **extra: Any) -> SessionRecord:
    return SessionRecord(
        session_id, "/w", "title", Mode.CRAFT, Backend.PIPE, Status.IDLE, 1, 1.0, 1.0, **extra
    )


async def waiting_for_locks(url: str, count: int) -> None:
    """Until `count` other backends wait for a lock (an ordering, not a timing, condition)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(400):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            if row and row[0] >= count:
                return
            await asyncio.sleep(0.025)
    raise AssertionError(f"{count} backends never waited for a lock")


async def test_sidecars_opening_an_empty_database_at_once_migrate_it_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, "sidecar.store.postgres")
    # Hold the migration lock, so every opener is inside its transaction at once.
    async with await psycopg.AsyncConnection.connect(pg_url) as holder:
        await holder.execute("SELECT pg_advisory_lock(%s)", (postgres_schema._LOCK_KEY,))
        opening = [asyncio.ensure_future(PostgresSessionStore.open(pg_url)) for _ in range(4)]
        await waiting_for_locks(pg_url, 4)
        await holder.execute("SELECT pg_advisory_unlock(%s)", (postgres_schema._LOCK_KEY,))
        stores = await asyncio.gather(*opening)
    try:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cur = await conn.execute("SELECT version FROM sidecar.schema_version")
            assert [v for (v,) in await cur.fetchall()] == ALL_VERSIONS  # each once
        assert caplog.text.count(f"schema migrated to version {ALL_VERSIONS[-1]}") == 1
        await stores[0].insert(record("s1"))
        assert (await stores[3].get("s1")).title == "title"
    finally:
        for store in stores:
            await store.close()


async def test_a_foreign_schema_of_that_name_is_refused_and_left_alone(pg_url: str):
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("CREATE SCHEMA sidecar")
        await conn.execute("CREATE TABLE sidecar.invoices (id int PRIMARY KEY, total real)")
    with pytest.raises(StoreError, match="is not a session store: .* holds invoices"):
        await PostgresSessionStore.open(pg_url)
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'sidecar'"
        )
        assert await cur.fetchall() == [("invoices",)]


async def test_a_schema_from_a_newer_sidecar_is_refused(pg_url: str):
    store = await PostgresSessionStore.open(pg_url)
    await store.insert(record("kept"))
    await store.close()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO sidecar.schema_version VALUES (99, 0)")
    with pytest.raises(StoreError, match="schema version 99, newer than this sidecar knows"):
        await PostgresSessionStore.open(pg_url)
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cur = await conn.execute("SELECT id FROM sidecar.sessions")
        assert await cur.fetchall() == [("kept",)]


async def test_a_version_2_schema_gives_its_sessions_version_1_and_notifies_versions(
    pg_url: str,
):
    """Migration v3: rows already stored start at version 1 (and keep counting after a
    reopen); every notification of a change carries the row's version after it."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await postgres_schema.migrate(conn, pg_url, postgres_schema.MIGRATIONS[:2])
        await conn.execute(
            "INSERT INTO sidecar.sessions (id, cwd, title, mode, backend, status, generation,"
            " created_at, updated_at) VALUES ('old', '/w', 't', 'craft', 'pipe', 'closed', 1, 1, 1)"
        )
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as listener:
        store = await PostgresSessionStore.open(pg_url)
        try:
            assert (await store.get("old")).version == 1
            await listener.execute(f"LISTEN {postgres_schema.CHANNEL}")
            assert (await store.update_metadata("old", title="renamed")).version == 2
            await store.insert(record("new"))
            await store.renew_leases("nobody", 5.0)  # not news: no notification
            await store.delete("new")
        finally:
            await store.close()
        heard = []
        async for note in listener.notifies(timeout=10, stop_after=3):
            payload = json.loads(note.payload)
            heard.append((payload["session"], payload["version"]))
    assert heard == [("old", 2), ("new", 1), ("new", None)]
    again = await PostgresSessionStore.open(pg_url)
    try:
        assert (await again.get("old")).version == 2
        assert (await again.update_metadata("old", title="again")).version == 3
    finally:
        await again.close()


async def test_a_row_lock_is_bounded_and_delays_nothing_else(
    pg_server: PgServer, pg_database: str, pg_url: str
):
    store = await PostgresSessionStore.open(pg_url, timeout=1)
    try:
        await store.insert(record("locked", lease_owner="me", lease_expires=10.0))
        await store.insert(record("free", lease_owner="me", lease_expires=10.0))
        async with await psycopg.AsyncConnection.connect(pg_url) as holder, holder.transaction():
            await holder.execute("SELECT 1 FROM sidecar.sessions WHERE id = 'locked' FOR UPDATE")
            waiting = asyncio.ensure_future(store.update("locked", 1, title="waits"))
            await waiting_for_locks(pg_url, 1)
            # Other sessions, reads of the locked one, and the lease renewal go on.
            assert (await store.update("free", 1, title="free")).title == "free"
            assert (await store.get("locked")).title == "title"
            assert await store.renew_leases("me", 20.0) == {"locked", "free"}
            assert (await store.get("free")).lease_expires == 20.0
            assert (await store.get("locked")).lease_expires == 10.0  # skipped this round
            with pytest.raises(StoreError) as timed_out:
                await waiting
        message = str(timed_out.value)
        assert message.startswith(f"cannot write session store 127.0.0.1:{pg_server.port}/")
        assert pg_database in message and "locked by another connection" in message
        assert pg_server.password not in message
        assert (await store.get("locked")).title == "title"  # nothing half-written
        assert await store.renew_leases("me", 30.0) == {"locked", "free"}
        assert (await store.get("locked")).lease_expires == 30.0
    finally:
        await store.close()


async def test_the_change_feed_tells_others_changes_not_ours_and_catches_up(pg_url: str):
    watcher = await PostgresSessionStore.open(pg_url)
    writer = await PostgresSessionStore.open(pg_url)
    heard: asyncio.Queue[str] = asyncio.Queue()

    async def tell(session_id: str) -> None:
        await heard.put(session_id)

    try:
        # Written before the feed runs: caught up from when the store was opened.
        await writer.insert(record("early"))
        feed = asyncio.ensure_future(watcher.watch_changes(tell))
        assert await asyncio.wait_for(heard.get(), 10) == "early"
        await watcher.insert(record("ours"))  # our own change: not news
        await writer.insert(record("theirs"))
        assert await asyncio.wait_for(heard.get(), 10) == "theirs"
        # Lease renewals are not news either; a rename is.
        await writer.renew_leases("nobody", 5.0)
        await writer.update_metadata("ours", title="renamed there")
        assert await asyncio.wait_for(heard.get(), 10) == "ours"
        await writer.delete("theirs")
        assert await asyncio.wait_for(heard.get(), 10) == "theirs"
        assert heard.empty()
        feed.cancel()
        await asyncio.gather(feed, return_exceptions=True)
    finally:
        await watcher.close()
        await writer.close()


async def test_the_change_feed_listens_again_after_its_connection_is_killed(
    pg_server: PgServer, pg_database: str, pg_url: str
):
    watcher = await PostgresSessionStore.open(pg_url)
    writer = await PostgresSessionStore.open(pg_url)
    heard: asyncio.Queue[str] = asyncio.Queue()

    async def tell(session_id: str) -> None:
        await heard.put(session_id)

    feed = asyncio.ensure_future(watcher.watch_changes(tell))
    try:
        await writer.insert(record("before"))
        assert await asyncio.wait_for(heard.get(), 10) == "before"
        await asyncio.to_thread(pg_server.terminate_backends, pg_database)
        await writer.insert(record("after"))  # while the feed may still be reconnecting
        got = {await asyncio.wait_for(heard.get(), 20)}
        while "after" not in got:
            got.add(await asyncio.wait_for(heard.get(), 20))
        assert got <= {"before", "after"}  # a catch-up may tell "before" again, never more
    finally:
        feed.cancel()
        await asyncio.gather(feed, return_exceptions=True)
        await watcher.close()
        await writer.close()


def test_the_url_is_named_by_server_and_its_password_never_said(monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    db = Database.parse("postgresql://ann:s3cr%40t@db.example:6543/sessions", 5)
    assert db.server == "db.example:6543/sessions"
    assert "s3cr" not in repr(db)
    assert db.redact("failed for ann:s3cr@t and s3cr%40t") == "failed for ann:*** and ***"
    query = Database.parse("postgresql:///sessions?host=/run/pg&password=hunter2&port=7")
    assert query.server == "/run/pg:7/sessions"
    assert query.redact("password=hunter2") == "password=***"
    with pytest.raises(StoreError) as bad:
        Database.parse("mysql://ann:s3cr@t@db/x")
    assert "s3cr" not in str(bad.value) and "***" in str(bad.value)
    monkeypatch.setenv("PGPASSWORD", "from-the-env")
    assert Database.parse("postgresql://ann@h/d").redact("x from-the-env y") == "x *** y"
