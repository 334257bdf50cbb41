"""Which paths under a directory changed since the last look, from the kernel (inotify).

The kernel queues an event for each change as it happens, before the process that made
it goes on, so draining the queue (`take`, never blocking) at the moment of asking says
everything that changed up to that moment. Every directory of the tree gets a watch; a
directory created or moved in later gets one when its event is read, and everything in it
counts as changed. What cannot be followed is said as unknown (`take` answers None), and
the caller looks at the whole tree instead: the kernel's queue overflowed, a directory
was moved out, the tree's root went away, or the tree has more directories than
`max_dirs` (the user's inotify watches are a shared, bounded resource).
"""

from __future__ import annotations

import logging
import os
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


class TreeWatch:
    def __init__(self, root: str, *, skip: frozenset[str] = frozenset({".git"})) -> None:
        self.root = root
        self._skip = skip  # names never entered (the repository's own files)
        self._inotify: INotify | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory, relative ("" root)
        self._changed: set[str] = set()
        self._lost = True  # nothing known until started

    def start(self, max_dirs: int = MAX_DIRS) -> bool:
        """Watch every directory now (blocking: a walk of the tree's directories). False
        when the tree cannot be followed; `take` then always answers None."""
        try:
            self._inotify = INotify(nonblocking=True)
            self._lost = False
            self._add_tree("", max_dirs)
        except OSError as exc:  # no inotify, out of watches, the root gone
            log.info("not watching %s: %s", self.root, exc)
            self.close()
            return False
        return not self._lost

    def _add_tree(self, relative: str, max_dirs: int = MAX_DIRS) -> None:
        """A watch on `relative` and every directory below it (their files count as
        changed: they appeared after the last look, or are seen for the first time)."""
        assert self._inotify is not None
        pending = [relative]
        while pending:
            directory = pending.pop()
            if len(self._dirs) >= max_dirs:
                self._lost = True
                return
            full = os.path.join(self.root, directory)
            try:
                wd = self._inotify.add_watch(full, MASK)
                entries = list(os.scandir(full))
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone again before we looked: its removal is an event too
            self._dirs[wd] = directory
            for entry in entries:
                if entry.name in self._skip:
                    continue
                path = f"{directory}/{entry.name}" if directory else entry.name
                if relative:  # a tree that appeared: all of it is new
                    self._changed.add(path)
                if entry.is_dir(follow_symlinks=False):
                    pending.append(path)

    def take(self) -> set[str] | None:
        """The paths (relative, files and directories) changed since the last `take`, or
        None when that is not known. Never blocks."""
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
        if name in self._skip:
            return
        path = f"{directory}/{name}" if directory else name
        self._changed.add(path)
        if mask & f.ISDIR:
            if mask & f.MOVED_FROM:
                self._lost = True  # its files are elsewhere now, under names we do not know
            elif mask & (f.CREATE | f.MOVED_TO):
                self._add_tree(path)

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        self._inotify = None
        self._dirs.clear()
        self._lost = True
