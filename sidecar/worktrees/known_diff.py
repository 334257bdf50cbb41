"""A worktree's branch diff when it is known which paths of the working tree may differ
from HEAD: the same files and hunks `manager.diff` gives, without a pass over the tree.

`manager.diff` compares the whole working tree with the merge-base, so it looks at every
file (as `git status` does). Here the commits' part is a diff of two commits (what plain
`git diff base...branch` costs) and only the paths that may differ from HEAD (`dirty`:
what `git status` said once, plus what changed since, as a watcher saw it) are compared
in the working tree. Paths a rename could pair across the two parts (everything the
commits add, delete or rename) are compared in the working tree too, so renames pair as
they would in the whole diff.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterable

from sidecar.worktrees import git
from sidecar.worktrees.hunks import FileDiff, parse_diff
from sidecar.worktrees.manager import _DIFF_ARGS, _admin_dir, _copy_index
from sidecar.worktrees.repository import Worktree, ref

LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}


async def committed(wt: Worktree, *, with_head: bool) -> tuple[str | None, list[FileDiff]]:
    """(HEAD's commit when asked for, the diff of the commits: base...HEAD, what plain
    `git diff base...branch` shows), in one round of git processes."""
    diffed = git.run(wt.path, "diff", *_DIFF_ARGS, f"{ref(wt.base)}...HEAD")
    if not with_head:
        return None, parse_diff((await diffed).text)
    head, out = await asyncio.gather(
        git.run(wt.path, "rev-parse", "--verify", "HEAD^{commit}"), diffed
    )
    return head.stripped, parse_diff(out.text)


async def admin_dir(wt: Worktree) -> str:
    """The worktree's own git directory (HEAD, its reflog, its index)."""
    return await _admin_dir(wt.path)


async def merge_base(wt: Worktree) -> str:
    return (await git.run(wt.path, "merge-base", ref(wt.base), "HEAD")).stripped


async def dirty_paths(wt: Worktree) -> tuple[str, set[str]]:
    """(HEAD's commit, the paths where the working tree differs from it, untracked files
    included), as `git status` says now."""
    head, status = await asyncio.gather(
        git.run(wt.path, "rev-parse", "--verify", "HEAD^{commit}"),
        git.run(wt.path, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"),
    )
    records = [r for r in status.text.split("\0") if r]
    return head.stripped, {record[3:] for record in records}


async def changed_between(wt: Worktree, old: str, new: str) -> set[str]:
    out = await git.run(wt.path, "diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
    return {p for p in out.text.split("\0") if p}


async def diff_known(wt: Worktree, commits: list[FileDiff], dirty: set[str]) -> list[FileDiff]:
    """The whole diff from the commits' (`committed`) and the dirty paths' parts."""
    if not dirty:
        return commits
    touched = set(dirty)
    for found in commits:
        if found.status != "modified" or found.path in dirty or found.old_path in dirty:
            touched |= {p for p in (found.path, found.old_path) if p}
    kept = [f for f in commits if f.path not in touched and f.old_path not in touched]
    working = await _working(wt, await merge_base(wt), sorted(touched))
    return sorted(kept + working, key=lambda f: f.path)


async def _working(wt: Worktree, merge_base: str, paths: list[str]) -> list[FileDiff]:
    """These paths of the working tree against the merge-base (untracked ones as new
    files, through a scratch index holding them as intent-to-add)."""
    untracked = await git.run(
        wt.path, "ls-files", "--others", "--exclude-standard", "-z", "--", *paths, env=LITERAL
    )
    new_files = [p for p in untracked.text.split("\0") if p]
    if not new_files:
        out = await git.run(wt.path, "diff", *_DIFF_ARGS, merge_base, "--", *paths, env=LITERAL)
        return parse_diff(out.text)
    with tempfile.TemporaryDirectory(prefix="acp-diff-") as scratch:
        env = {**LITERAL, "GIT_INDEX_FILE": os.path.join(scratch, "index")}
        await asyncio.to_thread(_copy_index, await _admin_dir(wt.path), scratch)
        await git.run(wt.path, "add", "--intent-to-add", "--", *new_files, env=env)
        out = await git.run(wt.path, "diff", *_DIFF_ARGS, merge_base, "--", *paths, env=env)
    return parse_diff(out.text)


def paths_of(files: Iterable[FileDiff]) -> list[str]:
    return [f.path for f in files]
