"""`_session/worktree/orphans`: worktrees of ours whose session is gone, found and, when
asked, removed (never silently: a worktree may hold work nobody merged).

Which repositories to look in: every one a session of this data dir made a worktree in
(`KnownRepos`, a small file beside the store: a repository whose last session is gone is
still known), or the one named. A worktree is ours when it lies in the repository's
`<repo>.worktrees/` directory; it is an orphan when the session it names as its owner
is not in the store, or is but names another directory. Pruning removes the directory
and git's registration and keeps the branch (`git branch -D` is the user's call).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from sidecar.core.worktree_place import DIRECTORY_SUFFIX
from sidecar.domain.errors import InvalidInput, SessionNotFound
from sidecar.domain.worktree_info import WorktreeInfo
from sidecar.store.base import SessionStore
from sidecar.worktrees import manager as worktrees

log = logging.getLogger(__name__)


class KnownRepos:
    """The repositories sessions made worktrees in: one absolute path per line."""

    def __init__(self, path: Path | None) -> None:
        self._path = path  # None: remembered for this process only
        self._seen: set[str] = set()
        self._lock = asyncio.Lock()

    async def add(self, repo: str) -> None:
        async with self._lock:
            if repo in self._seen:
                return
            known = await asyncio.to_thread(self._read)
            if repo not in known and self._path is not None:
                await asyncio.to_thread(self._append, repo)
            self._seen |= known | {repo}

    async def all(self) -> list[str]:
        async with self._lock:
            return sorted(self._seen | await asyncio.to_thread(self._read))

    def _read(self) -> set[str]:
        if self._path is None:
            return set()
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return set()
        return {line for line in text.splitlines() if line.startswith("/")}

    def _append(self, repo: str) -> None:
        assert self._path is not None
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._path.open("a", encoding="utf-8") as out:
            out.write(repo + "\n")


async def find(
    store: SessionStore, known: KnownRepos, repo: str | None, *, prune: bool
) -> list[worktrees.Worktree]:
    """The orphans of `repo` (None: of every known repository); removed when `prune`."""
    if repo is not None:
        if not os.path.isabs(repo):
            raise InvalidInput("repo", f"must be an absolute path: {repo}")
        try:
            roots = [await worktrees.repo_root(repo)]
        except worktrees.NotARepository as exc:
            raise InvalidInput("repo", f"{repo}: {exc.reason}") from None
    else:
        roots = []
        for path in await known.all():
            try:
                roots.append(await worktrees.repo_root(path))
            except worktrees.NotARepository as exc:
                log.info("known repository %s is gone: %s", path, exc.reason)
    found: list[worktrees.Worktree] = []
    for root in dict.fromkeys(roots):
        ours = await worktrees.orphans(root, set(), under=root + DIRECTORY_SUFFIX)
        found += [wt for wt in ours if not await _owned(store, wt)]
    if prune:
        await worktrees.prune(found)
    return found


async def _owned(store: SessionStore, wt: worktrees.Worktree) -> bool:
    if not wt.owner:
        return False
    try:
        record = await store.get(wt.owner)
    except SessionNotFound:
        return False
    info = WorktreeInfo.from_json(record.worktree)
    return info is not None and info.path == wt.path  # both as git lists it (real paths)
