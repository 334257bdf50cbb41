"""The search index merged while the SQLite store is idle (sidecar/store/search_merge.py):
it runs on its own after the store has written nothing for a while, never changes what a
search finds, stops for the store's writes (which are never refused meanwhile), and stops
with the store. Real SQLite files, real worker threads, the store's own async API."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from protocol.values import Backend, Mode
from sidecar.domain.records import SessionRecord, SessionState
from sidecar.store.search_merge import SearchMerger
from sidecar.store.sqlite import SqliteSessionStore

QUERIES = ("marmalade", "quince", "marmalade quince", "apricot", "zz")


def _record(session_id: str) -> SessionRecord:
    return SessionRecord(
        session_id, "/work", f"jar {session_id}", Mode.CRAFT, Backend.PIPE,
        SessionState.IDLE, 1, 1.0, 1.0,
    )  # fmt: skip


async def _fragmented(path: Path, sessions: int = 60) -> SqliteSessionStore:
    """A store whose index was written one session at a time (a segment per pass, as
    a sidecar's indexing passes leave it), with no merge of its own."""
    store = SqliteSessionStore(path, merge_when_idle=False)
    for n in range(sessions):
        session_id = f"s{n}"
        await store.insert(_record(session_id))
        for k in range(4):
            fruit = ("marmalade", "quince", "apricot")[(n + k) % 3]
            text = f"{fruit} number {n} line {k} " + " ".join(f"w{n}x{k}x{i}" for i in range(30))
            await store.append_message(session_id, 1, {"role": "user", "content": text})
        await store.index_pending()
    return store


async def _found(store: SqliteSessionStore) -> dict[str, list[str]]:
    found = {}
    for query in QUERIES:
        records, _ = await store.list_page(query=query, limit=1000)
        found[query] = sorted(r.session_id for r in records)
    return found


def _intact(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for table in ("transcript_search", "title_search"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")


async def _until(condition: Callable[[], bool], every: float = 0.01) -> None:
    deadline = time.monotonic() + 20.0
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(every)


async def test_an_idle_store_merges_its_index_and_every_search_finds_the_same(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.db"
    store = await _fragmented(path)
    try:
        before = await _found(store)
        assert before["marmalade"] and before["marmalade quince"] and not before["zz"]
        merger = store.search_merger = SearchMerger(path, idle=0.05)
        store._merge_when_idle = True
        await store.append_message("s1", 1, {"role": "user", "content": "apricot jam"})
        await store.index_pending()  # an indexing pass: the merge starts once idle
        await _until(lambda: merger.steps > 0 and not merger.merging)
        assert merger.merge_now() == 0, "the idle merge went to the end by itself"
        after = await _found(store)
        assert after == {**before, "apricot": sorted({*before["apricot"], "s1"})}
        _intact(path)
    finally:
        await store.close()


async def test_the_stores_writes_go_first_and_the_merge_waits_for_quiet(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = await _fragmented(path, sessions=300)
    try:
        merger = store.search_merger = SearchMerger(path, idle=0.05, pages=1)
        store._merge_when_idle = True
        merger.poke()
        await _until(lambda: merger.merging, every=0)
        # Requests while it merges: every write lands (a merge step never refuses one;
        # the step after it sees the write and waits for quiet again).
        for n in range(20):
            await store.append_message("s2", 1, {"role": "user", "content": f"quince {n}"})
            await asyncio.sleep(0.005)
        await store.index_pending()
        assert len(await store.messages("s2", 0, 100)) == 24
        assert (await _found(store))["quince"].count("s2") == 1
        await _until(lambda: merger.steps > 0 and not merger.merging)
        assert merger.merge_now() == 0
        _intact(path)
    finally:
        await store.close()


async def test_close_stops_a_merge_under_way_and_leaves_the_index_whole(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    store = await _fragmented(path, sessions=300)
    before = await _found(store)
    merger = store.search_merger = SearchMerger(path, idle=0.0, pages=1)
    store._merge_when_idle = True
    merger.poke()
    await _until(lambda: merger.steps > 0, every=0)  # the loop's turn between two steps
    assert merger.merging, "closed half-way, not after the end"
    await store.close()
    assert merger._conn is None and not merger._lock.locked()
    steps = merger.steps
    await asyncio.sleep(0.1)
    assert merger.steps == steps, "nothing merges after close"
    _intact(path)
    reopened = SqliteSessionStore(path, merge_when_idle=False)
    try:
        assert await _found(reopened) == before
        assert reopened.search_merger.merge_now() > 0, "what close interrupted is still to do"
        assert await _found(reopened) == before
    finally:
        await reopened.close()
