"""A `TreeWatch` kept for as long as its owner lives, worked in threads, never on the loop.

Starting a watch walks every directory of the tree, and a look (`take`) walks each
directory that appeared since: both run in a worker thread so the event loop never
waits on a large tree. Closing never waits either: a walk in progress closes the watch
itself when it ends. A watch takes its share of the process's `WatchBudget`, and none
is started where inotify cannot see every change (`mounts.changes_all_seen`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Final, TypeVar

from sidecar.fs.mounts import changes_all_seen
from sidecar.fs.tree_watch import MAX_CHANGED, TreeWatch, WatchBudget

GIT: Final = frozenset({".git"})
T = TypeVar("T")


class LiveWatch:
    def __init__(
        self,
        root: str,
        budget: WatchBudget,
        *,
        skip_dirs: frozenset[str] = frozenset(),
        max_changed: int = MAX_CHANGED,
    ) -> None:
        self.root = root
        self._budget = budget
        self._skip_dirs = skip_dirs
        self._max_changed = max_changed
        self._watch: TreeWatch | None = None
        self._local: bool | None = None  # asked once
        self._busy = threading.Lock()  # one thread at a time works the watch
        self._closed = False
        self._failed = 0  # starts that failed in a row
        self._skip = 0  # restarts left out before the next try

    @property
    def watching(self) -> bool:
        return self._watch is not None and not self._closed

    async def restart(self) -> bool:
        """A new watch from now on (the old one's changes are dropped): True if watching.
        After a start that failed, the next ones are left out (1, 2, 4 ... up to 64 of
        them): a tree with too many directories is not walked for nothing each time."""
        if self._skip:
            self._skip -= 1
            self.close_watch()
            return False
        started = await asyncio.to_thread(self._in_thread, self._restart)
        self._failed = 0 if started else self._failed + 1
        self._skip = 0 if started else min(1 << (self._failed - 1), 64)
        return started

    async def take(self) -> set[str] | None:
        """What changed since the last look (or the start); None when not known."""
        if self._watch is None:
            return None
        return await asyncio.to_thread(self._in_thread, self._take)

    def close(self) -> None:
        """For good. Never waits: a thread working the watch closes it when done."""
        self._closed = True
        self.close_watch()

    def close_watch(self) -> None:
        """The watch of now closed (`restart` may start another)."""
        if self._busy.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._busy.release()

    def _in_thread(self, work: Callable[[], T]) -> T:
        with self._busy:
            try:
                return work()
            finally:
                if self._closed:
                    self._drop()

    def _restart(self) -> bool:
        self._drop()
        if self._closed:
            return False
        if self._local is None:
            self._local = changes_all_seen(self.root)
        if not self._local:
            return False
        watch = TreeWatch(
            os.path.realpath(self.root), skip=frozenset(), opaque=GIT, skip_dirs=self._skip_dirs,
            max_changed=self._max_changed,
        )  # fmt: skip
        room = self._budget.claim(watch)
        if room is None:
            return False
        if not watch.start(max_dirs=room):
            self._budget.release(watch)
            return False
        self._watch = watch
        return True

    def _take(self) -> set[str] | None:
        return self._watch.take() if self._watch is not None and not self._closed else None

    def _drop(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._budget.release(self._watch)
            self._watch = None
