"""A live session's worktree diff without a pass over the whole tree each time.

For each live worktree session that asked for its diff, a kernel watch of the worktree
(`fs/tree_watch.py`) and the set of paths that may differ from HEAD: what `git status`
said when the watch began, plus every path the watch saw change since, plus what HEAD's
moves changed (a commit, a reset: `git diff-tree` between the old and the new HEAD). The
diff then compares only those paths in the working tree (`worktrees/known_diff.py`); the
commits' part is a diff of two commits. Whenever the watch cannot say (its queue
overflowed, a directory moved out, too many directories, no inotify) or the set grows
past `MAX_DIRTY`, the whole tree is looked at again, exactly as without the watch: the
answer is the same either way, only its cost differs.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Final

from sidecar.fs.tree_watch import TreeWatch
from sidecar.worktrees import known_diff
from sidecar.worktrees import manager as worktrees
from sidecar.worktrees.hunks import FileDiff

log = logging.getLogger(__name__)

MAX_DIRTY: Final = 2000  # paths compared one by one; past this a whole pass is cheaper


@dataclass
class _Known:
    generation: int
    watch: TreeWatch
    admin: TreeWatch  # the worktree's git dir: HEAD moves there (its file, its reflog)
    head: str = ""
    dirty: set[str] = field(default_factory=set)
    baseline: bool = False  # head and dirty hold what git status said (plus changes since)


class WorktreeChanges:
    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._unwatchable: set[tuple[str, int]] = set()  # (session, generation): tried once

    async def diff(
        self, session_id: str, generation: int | None, wt: worktrees.Worktree
    ) -> list[FileDiff]:
        """The whole diff of the session's branch and working tree against its base.
        `generation`: the live runtime's (None: not live here, no watch is kept)."""
        known = await self._watched(session_id, generation, wt)
        if known is None:
            return await _whole(wt)
        changed = known.watch.take()
        if changed is not None and not known.baseline:
            # What status says now, and what changed while it looked (the watch runs).
            known.head, known.dirty = await known_diff.dirty_paths(wt)
            known.baseline = True
            changed = known.watch.take()
        if changed is None:  # the watch cannot say: a whole pass, and a new watch next time
            self.forget(session_id)
            return await _whole(wt)
        known.dirty |= changed
        moved = known.admin.take()  # None (not known) or something changed: HEAD is asked
        head, commits = await known_diff.committed(wt, with_head=moved != set())
        head = head or known.head
        if head != known.head:
            known.dirty |= await known_diff.changed_between(wt, known.head, head)
            known.head = head
        if len(known.dirty) > MAX_DIRTY:
            known.baseline = False  # the next diff asks git status again
            return await _whole(wt)
        return await known_diff.diff_known(wt, commits, known.dirty)

    async def _watched(
        self, session_id: str, generation: int | None, wt: worktrees.Worktree
    ) -> _Known | None:
        known = self._known.get(session_id)
        if known is not None and known.generation == generation:
            return known
        self.forget(session_id)
        if generation is None or (session_id, generation) in self._unwatchable:
            return None
        watch = TreeWatch(wt.path)
        # Its index changes with every `git status` anyone runs: only HEAD and its reflog count.
        admin = TreeWatch(await known_diff.admin_dir(wt), skip=frozenset({"index", "index.lock"}))
        if not await asyncio.to_thread(watch.start):
            self._unwatchable.add((session_id, generation))
            return None
        await asyncio.to_thread(admin.start)  # not watched: HEAD is asked every time
        known = _Known(generation, watch, admin)
        self._known[session_id] = known
        return known

    def forget(self, session_id: str) -> None:
        """The session closed, or its worktree changed under us (a merge): no watch."""
        known = self._known.pop(session_id, None)
        if known is not None:
            known.watch.close()
            known.admin.close()

    def close(self) -> None:
        for session_id in list(self._known):
            self.forget(session_id)


async def _whole(wt: worktrees.Worktree) -> list[FileDiff]:
    files, _ = await worktrees.diff(wt, cursor=0, limit=1 << 30)
    return files
