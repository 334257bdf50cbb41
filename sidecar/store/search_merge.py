"""The search index merged while the store is idle, off the event loop.

FTS5 keeps an index as segments (every indexing pass writes one) and merges them only as
more is written (`automerge`); a MATCH visits every segment, so a big library written a
batch at a time searches slower than a merged one. Here, once the store has written
nothing for IDLE_SECONDS, a worker thread merges both search indexes on its own
connection, MERGE_PAGES leaf pages per table per transaction (FTS5's `merge` command,
with `usermerge` 2: any level with two segments is merged into the next, so each level
ends with at most one), until FTS5 reports nothing left to merge; any write by the
store stops it at the next step, and the next indexing pass starts the wait again.

What it never does: hold up a request for long (a step holds SQLite's write lock for
a few to a few tens of ms, and only after seconds without a write; reads never wait in
WAL mode), change what a search finds (merging rewrites segments, not documents), or
outlive the store (`close` waits for the step under way and closes the connection).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

IDLE_SECONDS: Final = 2.0  # without a write before a merge starts
MERGE_PAGES: Final = (
    16  # leaf pages written per table per step (bounds how long a step holds the lock)
)
USERMERGE: Final = 2  # segments on one level that the `merge` command merges
TABLES: Final = ("transcript_search", "title_search")


class SearchMerger:
    """One SQLite store's idle merge. `touch()` on every write, `poke()` when an indexing
    pass wrote segments, `close()` with the store."""

    def __init__(self, path: Path, *, idle: float = IDLE_SECONDS, pages: int = MERGE_PAGES) -> None:
        self._path = path
        self._idle = idle
        self._pages = pages
        self._last_write = time.monotonic()
        self._pending = False  # segments may wait to be merged
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._conn: sqlite3.Connection | None = None  # used only under `_lock`
        self._lock = threading.Lock()  # one step at a time; close waits for it
        self._closed = False
        self.steps = 0  # steps that merged something (what tests and benchmarks read)

    def touch(self) -> None:
        """The store wrote: a merge under way stops at its next step."""
        self._last_write = time.monotonic()

    def poke(self) -> None:
        """Segments were written: merge them once the store has been idle long enough."""
        self._pending = True
        self._schedule(self._idle)

    @property
    def merging(self) -> bool:
        return self._task is not None and not self._task.done()

    def _schedule(self, delay: float) -> None:
        if self._closed or self._timer is not None or self.merging:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a script's store): the next poke on a loop starts it
        self._timer = loop.call_later(delay, self._wake)

    def _idle_for(self) -> float:
        return time.monotonic() - self._last_write

    def _wake(self) -> None:
        self._timer = None
        if self._closed or not self._pending:
            return
        left = self._idle - self._idle_for()
        if left > 0:
            self._schedule(left)
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="search-merge")

    async def _run(self) -> None:
        while not self._closed:
            if self._idle_for() < self._idle:
                self._task = None
                self._schedule(self._idle - self._idle_for())  # a write came: wait again
                return
            started = time.monotonic()
            try:
                worked = await asyncio.to_thread(self._step)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    log.warning("search index merge stopped: %s", exc)
                    self._pending = False
                    return
                self._task = None  # the store is writing: try again once it is idle
                self._schedule(self._idle)
                return
            except sqlite3.Error as exc:
                log.warning("search index merge stopped: %s", exc)
                self._pending = False
                return
            if not worked and self._last_write < started:
                self._pending = False  # merged: nothing to do until the next indexing pass
                return

    def _step(self) -> bool:
        """One bounded merge transaction per table, in a worker thread; whether anything
        was merged. A busy database raises (the store's write comes first)."""
        with self._lock:
            if self._closed:
                return False
            conn = self._conn
            if conn is None:
                conn = sqlite3.connect(
                    self._path, timeout=0, isolation_level=None, check_same_thread=False
                )
                for table in TABLES:
                    conn.execute(
                        f"INSERT INTO {table} ({table}, rank) VALUES ('usermerge', ?)",
                        (USERMERGE,),
                    )
                self._conn = conn
            worked = False
            for table in TABLES:
                before = conn.total_changes
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(
                        f"INSERT INTO {table} ({table}, rank) VALUES ('merge', ?)", (self._pages,)
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                # FTS5: a `merge` that did nothing changes fewer than two rows.
                worked = worked or conn.total_changes - before >= 2
            if worked:
                self.steps += 1
            return worked

    def merge_now(self) -> int:
        """Merge to the end here and now, blocking (scripts and benchmarks: what an idle
        sidecar does by itself); how many steps merged something."""
        done = self.steps
        while self._step():
            pass
        return self.steps - done

    def close(self) -> None:
        """Stop: no step starts after this; the one under way (a bounded transaction) is
        waited for, then the connection is closed."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
