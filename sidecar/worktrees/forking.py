"""A worktree for a fork of a worktree session: a branch of its own from the source
branch's tip, holding the source's uncommitted work too, so the fork's edits never
land in the source's worktree (nor in its merge) and discarding one leaves the other.

The source's work -- tracked changes, deletions, untracked files (ignored ones are not
carried), modes, symlinks, binaries -- is written as a tree with a scratch copy of its
index (the source's own index is only read), and the new worktree, made without a
checkout, gets exactly that tree's files with its index at the branch's tip: the work
shows there as uncommitted, as in the source.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from sidecar.worktrees import git
from sidecar.worktrees.manager import _admin_dir, _copy_index, create, discard
from sidecar.worktrees.repository import Worktree, commit_of


async def fork(source: Worktree, *, path: str, session_short_id: str, owner: str) -> Worktree:
    """The fork's worktree at `path` (branch `acp/<short id>`, base the source's base)."""
    tip = await commit_of(source.repo, f"refs/heads/{source.branch}")
    there = await asyncio.to_thread(os.path.isdir, source.path)
    files = await _work_tree(source) if there else f"{tip}^{{tree}}"
    made = await create(
        source.repo,
        path=path,
        session_short_id=session_short_id,
        base=source.base,
        owner=owner,
        start=tip,
        checkout=False,
    )
    try:
        await git.run(made.path, "read-tree", "--reset", "-u", files)
        await git.run(made.path, "reset", "--quiet")  # index at the tip; the files stay
    except BaseException:
        await discard(made)
        raise
    return made


async def _work_tree(wt: Worktree) -> str:
    """The worktree's files as they are (untracked ones too), as a tree object."""
    with tempfile.TemporaryDirectory(prefix="acp-fork-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        await asyncio.to_thread(_copy_index, await _admin_dir(wt.path), scratch)
        await git.run(wt.path, "add", "-A", env=env)
        return (await git.run(wt.path, "write-tree", env=env)).stripped
