"""`_session/files`: fuzzy completion of paths under a live session's cwd, for `@` mentions.

Listing a directory is the slow part (git over 100,000 files: a few hundred ms), matching
the fast one (`fs/path_index.py`: a few scans in C), so the listing is cached per
directory and each keystroke pays only for the match. The first query of a directory
waits for its listing (the cold one); a query that finds its listing older than
`STALE_SECONDS` is answered from it at once while a new one is built in the background,
so files created since show up a keystroke or two later, never at the cost of a wait (a
listing that took long to build is refreshed less often: `STALE_FACTOR`).

Inside a git work tree the listing is git's (`worktrees/listing.py`: tracked and
untracked-not-ignored files); elsewhere a bounded walk honouring `.gitignore`s
(`fs/walk.py`). Either way nothing outside the cwd is listed: a symlink whose target lies
outside is dropped, a symlinked directory is not entered (git does not enter one either),
and the directories a session may not see (the data dir, `RuntimeDeps.hide`) are left out.
Directories are offered too (every parent of a listed file), as kind `dir`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from sidecar.fs.path_index import Found, Kind, PathIndex
from sidecar.fs.walk import inside, walk
from sidecar.worktrees import git
from sidecar.worktrees.listing import GitPaths, list_paths

log = logging.getLogger(__name__)

# A listing is stale after this, or after STALE_FACTOR times what it took to build, if
# longer: while someone types, rebuilding a 100,000-file listing (~2 s of git and Python)
# costs at most a tenth of a core.
STALE_SECONDS: Final = 5.0
STALE_FACTOR: Final = 10.0
MAX_ENTRIES: Final = 500_000  # paths kept from git's listing; more: the listing is cut
MAX_WALKED: Final = 200_000  # entries a walk outside git visits at most
GIT_SECONDS: Final = 60.0  # a git that lists longer is stopped; the directory is walked
MAX_DIRECTORIES: Final = 4  # directories whose listings are kept (least recently asked go)


@dataclass(frozen=True, slots=True)
class FileMatches:
    files: list[Found]
    truncated: bool  # more paths match than were returned (or the listing itself was cut)


@dataclass(frozen=True, slots=True)
class _Listing:
    index: PathIndex
    cut: bool
    built: float  # when its listing started
    took: float  # seconds it took

    def stale(self, now: float) -> bool:
        return now - self.built > max(STALE_SECONDS, STALE_FACTOR * self.took)


def _hidden_prefixes(root: str, hidden: Sequence[str]) -> tuple[str, ...]:
    """The hidden directories under `root`, as relative prefixes (`data/`)."""
    out = []
    for path in hidden:
        real = os.path.realpath(path)
        if real != root and inside(root, real):
            out.append(os.path.relpath(real, root) + "/")
    return tuple(out)


def _from_git(cwd: str, paths: GitPaths) -> list[tuple[str, Kind]]:
    root = os.path.realpath(cwd)
    entries: list[tuple[str, Kind]] = []

    def link(path: str) -> Kind | None:
        """A symlink's kind, or None when its target is outside the cwd."""
        full = os.path.join(cwd, path)
        if not inside(root, full):
            return None
        return "dir" if os.path.isdir(full) else "file"

    for path, mode in paths.tracked:
        if path in paths.deleted:
            continue
        if mode == "120000":
            kind = link(path)
            if kind is not None:
                entries.append((path, kind))
        else:
            entries.append((path, "dir" if mode == "160000" else "file"))
    for path in paths.untracked:
        if path.endswith("/"):  # an embedded repository
            entries.append((path.rstrip("/"), "dir"))
            continue
        try:
            is_link = os.path.islink(os.path.join(cwd, path))
        except OSError:
            continue
        kind = link(path) if is_link else "file"
        if kind is not None:
            entries.append((path, kind))
    return entries


def _with_parents(entries: list[tuple[str, Kind]]) -> list[tuple[str, Kind]]:
    """The entries and every directory above them (git lists files only)."""
    dirs: set[str] = set()
    for path, _ in entries:
        cut = path.rfind("/")
        while cut > 0:
            parent = path[:cut]
            if parent in dirs:
                break
            dirs.add(parent)
            cut = path.rfind("/", 0, cut)
    return entries + [(d, "dir") for d in dirs]


def build(
    cwd: str, paths: GitPaths | None, hidden: Sequence[str], max_entries: int = MAX_ENTRIES
) -> tuple[PathIndex, bool]:
    """The index of `cwd` (from git's listing, else a walk) and whether it was cut. Blocking:
    run in a thread."""
    if paths is None:
        entries, cut = walk(cwd, min(max_entries, MAX_WALKED), hidden)
    else:
        entries = _with_parents(_from_git(cwd, paths))
        cut = len(entries) > max_entries
    prefixes = _hidden_prefixes(os.path.realpath(cwd), hidden)
    if prefixes:
        entries = [
            (p, k) for p, k in entries if not any(p + "/" == h or p.startswith(h) for h in prefixes)
        ]
    if cut:  # the shallow ones are kept (the walk is breadth first; git's: by depth here)
        entries = sorted(entries, key=lambda e: (e[0].count("/"), e[0]))[:max_entries]
    return PathIndex(entries), cut


class FileSearch:
    """Listings of the directories completed in, each refreshed when a query finds it stale."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._listings: OrderedDict[str, _Listing] = OrderedDict()
        self._building: dict[str, asyncio.Task[_Listing]] = {}

    async def search(
        self, cwd: str, query: str, limit: int, hidden: Sequence[str] = ()
    ) -> FileMatches:
        listing = self._listings.get(cwd)
        if listing is None:
            listing = await asyncio.shield(self._build(cwd, hidden))
        else:
            self._listings.move_to_end(cwd)
            if listing.stale(self._clock()) and cwd not in self._building:
                self._build(cwd, hidden).add_done_callback(_logged)
        found, more = await asyncio.to_thread(listing.index.match, query, limit)
        return FileMatches(found, more or listing.cut)

    def _build(self, cwd: str, hidden: Sequence[str]) -> asyncio.Task[_Listing]:
        """The listing being built for `cwd` (one at a time per directory)."""
        task = self._building.get(cwd)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._list(cwd, tuple(hidden)))
            self._building[cwd] = task
            task.add_done_callback(lambda _: self._building.pop(cwd, None))
        return task

    async def _list(self, cwd: str, hidden: tuple[str, ...]) -> _Listing:
        started = self._clock()
        try:
            paths = await asyncio.wait_for(list_paths(cwd), GIT_SECONDS)
        except (git.GitError, TimeoutError) as exc:  # walk it like any directory
            log.warning("listing %s with git failed (%r); walking it instead", cwd, exc)
            paths = None
        index, cut = await asyncio.to_thread(build, cwd, paths, hidden)
        listing = _Listing(index, cut, started, self._clock() - started)
        self._listings[cwd] = listing
        self._listings.move_to_end(cwd)
        while len(self._listings) > MAX_DIRECTORIES:
            self._listings.popitem(last=False)
        return listing


def _logged(task: asyncio.Task[_Listing]) -> None:
    """A background refresh that failed: the old listing stays; the log says why."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("refreshing a file listing failed: %r", task.exception())
