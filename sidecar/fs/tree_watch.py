"""Which paths under a directory changed since the last look, from the kernel (inotify).

The kernel queues an event for each change as it happens, before the process that made
it goes on, so draining the queue (`take`, never blocking) at the moment of asking says
everything that changed up to that moment. Every directory of the tree gets a watch; a
directory created or moved in later gets one when its event is read, and everything in it
counts as changed. What cannot be followed is said as unknown (`take` answers None), and
the caller looks at the whole tree instead: the kernel's queue overflowed, a directory
was moved out, the tree's root went away, the tree has more directories than `max_dirs`
(the user's inotify watches are a shared, bounded resource: `WatchBudget`), or more
paths changed than `max_changed` (a caller that would look at each of them does better
with one pass over the tree).

A directory's own metadata (its mode, its times) is not a change: git records none of it,
and a `chmod` of a directory would otherwise name everything below it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Final

from inotify_simple import INotify
from inotify_simple import flags as f

log = logging.getLogger(__name__)

MASK: Final = (
    f.MODIFY
    | f.ATTRIB
    | f.CLOSE_WRITE
    | f.CREATE
    | f.DELETE
    | f.MOVED_FROM
    | f.MOVED_TO
    | f.DELETE_SELF
    | f.MOVE_SELF
    | f.DONT_FOLLOW
    | f.ONLYDIR
)
MAX_DIRS: Final = 20_000
MAX_CHANGED: Final = 50_000  # paths held between two looks; past it: unknown
_WATCHES_FILE: Final = "/proc/sys/fs/inotify/max_user_watches"


class TreeWatch:
    def __init__(
        self,
        root: str,
        *,
        skip: frozenset[str] = frozenset({".git"}),
        opaque: frozenset[str] = frozenset(),
        skip_dirs: frozenset[str] = frozenset(),
        max_changed: int = MAX_CHANGED,
    ) -> None:
        self.root = root
        self._skip = skip  # names never entered nor reported (the repository's own files)
        self._opaque = opaque  # names reported when they change, never entered
        self._skip_dirs = skip_dirs  # relative directories never entered nor reported
        self._max_changed = max_changed
        self._max_dirs = MAX_DIRS
        self._inotify: INotify | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory, relative ("" root)
        self._changed: set[str] = set()
        self._lost = True  # nothing known until started

    @property
    def size(self) -> int:
        """Directories watched now (each one inotify watch)."""
        return len(self._dirs)

    def start(self, max_dirs: int = MAX_DIRS) -> bool:
        """Watch every directory now (blocking: a walk of the tree's directories). False
        when the tree cannot be followed; `take` then always answers None."""
        self._max_dirs = max_dirs
        try:
            self._inotify = INotify(nonblocking=True)
            self._lost = False
            self._add_tree("")
        except OSError as exc:  # no inotify, out of instances, the root gone
            log.info("not watching %s: %s", self.root, exc)
            self.close()
            return False
        if self._lost:
            self.close()
            return False
        return True

    def _add_tree(self, relative: str) -> None:
        """A watch on `relative` and every directory below it (their files count as
        changed: they appeared after the last look, or are seen for the first time)."""
        assert self._inotify is not None
        pending = [relative]
        while pending and not self._lost:
            directory = pending.pop()
            if len(self._dirs) >= self._max_dirs:
                self._lost = True
                return
            full = os.path.join(self.root, directory)
            try:
                wd = self._inotify.add_watch(full, MASK)
                entries = list(os.scandir(full))
            except OSError as exc:
                if not directory:
                    raise  # the root: nothing can be watched
                if isinstance(exc, FileNotFoundError | NotADirectoryError):
                    continue  # gone again before we looked: its removal is an event too
                log.info("watch of %s lost at %s: %s", self.root, directory, exc)
                self._lost = True  # out of watches, or a directory we may not read
                return
            self._dirs[wd] = directory
            for entry in entries:
                if entry.name in self._skip:
                    continue
                path = f"{directory}/{entry.name}" if directory else entry.name
                if path in self._skip_dirs:
                    continue
                if relative:  # a tree that appeared: all of it is new
                    self._add_changed(path)
                if entry.name not in self._opaque and entry.is_dir(follow_symlinks=False):
                    pending.append(path)

    def _add_changed(self, path: str) -> None:
        self._changed.add(path)
        if len(self._changed) > self._max_changed:
            self._lost = True

    def take(self) -> set[str] | None:
        """The paths (relative, files and directories) changed since the last `take`, or
        None when that is not known. Never blocks on the kernel (a directory that
        appeared is walked to watch it)."""
        if self._inotify is None or self._lost:
            return None
        try:
            events = self._inotify.read(timeout=0)
        except OSError as exc:
            log.info("watch of %s lost: %s", self.root, exc)
            self._lost = True
            return None
        for event in events:
            self._note(event.wd, event.mask, event.name)
            if self._lost:
                self._changed = set()
                return None
        changed, self._changed = self._changed, set()
        return changed

    def _note(self, wd: int, mask: int, name: str) -> None:
        if mask & f.Q_OVERFLOW:
            self._lost = True
            return
        directory = self._dirs.get(wd)
        if mask & f.IGNORED:
            self._dirs.pop(wd, None)
            return
        if directory is None:
            return  # a watch already dropped
        if mask & (f.DELETE_SELF | f.MOVE_SELF):
            if directory == "" or mask & f.MOVE_SELF:
                self._lost = True  # the root went, or a directory moved somewhere unknown
            return
        if not name or name in self._skip or (mask & f.ISDIR and mask & f.ATTRIB):
            return  # about a directory's own metadata (its parent names it too), or skipped
        path = f"{directory}/{name}" if directory else name
        if path in self._skip_dirs:
            return
        self._add_changed(path)
        if mask & f.ISDIR and name not in self._opaque:
            if mask & f.MOVED_FROM:
                self._lost = True  # its files are elsewhere now, under names we do not know
            elif mask & (f.CREATE | f.MOVED_TO):
                self._add_tree(path)

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        self._inotify = None
        self._dirs.clear()
        self._changed = set()
        self._lost = True


class WatchBudget:
    """What all the tree watches of one process may hold together: inotify instances and
    watches are per-user kernel resources shared with every other program (editors, file
    managers), so ours take at most `watches` instances and half the user's watches."""

    def __init__(self, watches: int = 16, dirs: int | None = None) -> None:
        self._watches = watches
        self._dirs = dirs if dirs is not None else _half_the_users_watches()
        self._live: set[TreeWatch] = set()
        self._lock = threading.Lock()  # watches start and close in worker threads

    def claim(self, watch: TreeWatch) -> int | None:
        """The directories `watch` may hold (None: no watch may start now). Held until
        `release`."""
        with self._lock:
            if len(self._live) >= self._watches:
                return None
            room = self._dirs - sum(w.size for w in self._live)
            if room <= 0:
                return None
            self._live.add(watch)
            return min(MAX_DIRS, room)

    def release(self, watch: TreeWatch) -> None:
        with self._lock:
            self._live.discard(watch)


def _half_the_users_watches() -> int:
    try:
        with open(_WATCHES_FILE) as handle:
            return max(0, int(handle.read().strip()) // 2)
    except (OSError, ValueError):
        return 4096  # not Linux's proc, or unreadable: a modest share of the usual 8,192
