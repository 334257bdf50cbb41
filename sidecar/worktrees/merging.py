"""A session's branch merged back into its base (`merge`, `squash` or `rebase`), all or
nothing, never touching anything the merge did not make.

The new commit is made away from the user's main working tree: a merge or a squash with
plumbing (`git merge-tree --write-tree`, then `git commit-tree`), a rebase in the
session's own worktree (no turn runs there meanwhile: the caller holds its turn lock).
Only then is the main tree touched, in one step that is refused whole when anything
moved meanwhile (`_land`): base is moved by a compare-and-swap from the commit the merge
started from (`git update-ref <base> <new> <old>`), and the main tree's index and files
from that commit to the new one by git's two-tree `read-tree -m -u`, which never
overwrites a local change or an untracked file. A user who commits, edits or switches
branch in the main tree while a merge runs keeps all of it: the merge is refused, base
stays where they left it, and a rebased branch is put back as it was.

Everything runs under the repository's lock (two merges into one repository run one
after the other) and shielded, so a cancelled caller cannot stop it halfway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sidecar.domain.errors import InvalidInput, InvalidState
from sidecar.worktrees import git
from sidecar.worktrees.repository import (
    Worktree,
    changed_files,
    commit_of,
    identity,
    is_branch,
    ref,
    repo_lock,
    unmerged_paths,
)

log = logging.getLogger(__name__)

Strategy = Literal["merge", "squash", "rebase"]


class MergeRefused(InvalidState):
    """Nothing was merged: the main tree is dirty or elsewhere, it moved meanwhile, or git
    refused."""

    def __init__(self, reason: str, files: Iterable[str] = ()) -> None:
        self.files = tuple(files)
        shown = f": {', '.join(self.files)}" if self.files else ""
        super().__init__(f"merge refused: {reason}{shown}")


class MergeConflict(InvalidState):
    """Nothing was merged; base and the main tree are as they were."""

    def __init__(self, branch: str, base: str, files: Iterable[str]) -> None:
        self.files = tuple(files)
        super().__init__(
            f"merging {branch} into {base} conflicts in {', '.join(self.files) or '(unknown)'}; "
            "nothing was merged"
        )


@dataclass(frozen=True)
class MergeResult:
    strategy: Strategy
    base: str
    before: str  # base's commit before the merge
    after: str  # and after it (equal: there was nothing to merge)


async def commit_pending(wt: Worktree, message: str) -> bool:
    """Commit everything uncommitted in the worktree onto its branch; False if nothing."""
    await git.run(wt.path, "add", "-A")
    staged = await git.run(wt.path, "diff", "--cached", "--quiet", ok=(0, 1))
    if staged.code == 0:
        return False
    who = await identity(wt.path)
    await git.run(wt.path, "commit", "--quiet", "--no-verify", "-m", message, config=who)
    return True


async def merge(wt: Worktree, strategy: Strategy, message: str | None = None) -> MergeResult:
    """Merge the branch into base in the main working tree (see the module's doc)."""
    if strategy not in ("merge", "squash", "rebase"):
        raise InvalidInput("strategy", f"unknown merge strategy {strategy!r}")
    task = asyncio.ensure_future(_merge_locked(wt, strategy, message))
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


async def _merge_locked(wt: Worktree, strategy: Strategy, message: str | None) -> MergeResult:
    async with repo_lock(wt.repo):
        await _check_main_tree(wt)
        await commit_pending(wt, message or f"Session work on {wt.branch}")
        old = await commit_of(wt.repo, ref(wt.base))  # what base is moved from, and only from
        who = await identity(wt.repo)
        if strategy == "rebase":
            tip = await commit_of(wt.repo, f"refs/heads/{wt.branch}")
            new = await _rebased(wt, old, who)
            try:
                await _land(wt, old, new, strategy)
            except MergeRefused:
                await _unrebase(wt, tip)
                raise
        else:
            new = await _merged(wt, old, strategy, message, who)
            await _land(wt, old, new, strategy)
        return MergeResult(strategy, wt.base, old, new)


async def _check_main_tree(wt: Worktree) -> None:
    on = await git.run(wt.repo, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))
    if not await is_branch(wt.repo, wt.base):
        raise MergeRefused(f"base {wt.base} is a commit, not a branch to merge into")
    if on.stripped != f"refs/heads/{wt.base}":
        current = on.stripped.removeprefix("refs/heads/") or "a detached HEAD"
        raise MergeRefused(f"the main working tree {wt.repo} is on {current}, not on {wt.base}")
    dirty = await changed_files(wt.repo)
    if dirty:
        raise MergeRefused(f"the main working tree {wt.repo} has uncommitted changes", dirty)


# -- the new commit, made away from the main tree ---------------------------------------


async def _merged(
    wt: Worktree, old: str, strategy: Strategy, message: str | None, who: list[str]
) -> str:
    """The merge (or squash) commit of the branch onto `old`, made with plumbing: no index
    and no working tree is touched. `old` itself when there is nothing to merge."""
    tip = await commit_of(wt.repo, f"refs/heads/{wt.branch}")
    contained = await git.run(wt.repo, "merge-base", "--is-ancestor", tip, old, ok=(0, 1))
    if contained.code == 0:
        return old  # already in base ("Already up to date")
    tree = await _merge_tree(wt, old, tip)
    if strategy == "squash":
        if tree == (await git.run(wt.repo, "rev-parse", f"{old}^{{tree}}")).stripped:
            return old  # the branch's changes are in base already
        parents = ["-p", old]
        text = message or f"Squashed branch '{wt.branch}' into {wt.base}"
    else:
        parents = ["-p", old, "-p", tip]
        text = message or f"Merge branch '{wt.branch}' into {wt.base}"
    sign = ["-S"] if await _signs(wt.repo) else []
    try:
        made = await git.run(wt.repo, "commit-tree", *sign, *parents, "-m", text, tree, config=who)
    except git.GitError as exc:  # a signing failure, say: nothing was made
        raise MergeRefused(exc.stderr or str(exc)) from exc
    return made.stripped


async def _merge_tree(wt: Worktree, old: str, tip: str) -> str:
    """The merged tree of `old` and `tip` (git's own merge, written as objects only); a
    conflict is MergeConflict naming its files."""
    out = await git.run(
        wt.repo,
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        old,
        tip,
        ok=(0, 1, 128),
    )
    if out.code == 128:
        raise MergeRefused(out.err.decode("utf-8", errors="replace").strip() or "git merge-tree")
    fields = out.text.split("\0")
    if out.code == 1:
        raise MergeConflict(wt.branch, wt.base, sorted({f for f in fields[1:] if f}))
    return fields[0].strip()


async def _signs(repo: str) -> bool:
    """`commit-tree` does not read `commit.gpgSign`: the user's wish to sign is passed on."""
    found = await git.run(
        repo, "config", "--type=bool", "--default=false", "--get", "commit.gpgSign", ok=(0, 1, 128)
    )
    return found.stripped == "true"


async def _rebased(wt: Worktree, old: str, who: list[str]) -> str:
    """Rebase the branch onto `old` in its own worktree; on a conflict abort (the branch
    is as it was, base never moved). Its new tip."""
    try:
        await git.run(wt.path, "rebase", "--quiet", "--no-autostash", old, config=who)
    except git.GitError as exc:
        conflicted = await unmerged_paths(wt.path)
        await git.run(wt.path, "rebase", "--abort", ok=(0, 1, 128))
        if conflicted:
            raise MergeConflict(wt.branch, wt.base, conflicted) from exc
        raise MergeRefused(exc.stderr or str(exc)) from exc
    return await commit_of(wt.repo, f"refs/heads/{wt.branch}")


async def _unrebase(wt: Worktree, tip: str) -> None:
    """The landing was refused: the branch back where it was before the rebase (`--keep`:
    never over a change made in its worktree meanwhile)."""
    try:
        await git.run(wt.path, "reset", "--keep", "--quiet", tip)
    except git.GitError as exc:
        log.warning("the branch %s stays rebased (it was at %s): %s", wt.branch, tip, exc)


# -- landing: the one step that touches the main tree -----------------------------------


async def _land(wt: Worktree, old: str, new: str, strategy: Strategy) -> None:
    """Base from `old` to `new`, and the main tree's index and files with it; refused,
    with nothing changed, when the main tree left base, base moved, or a change or an
    untracked file of the user's is in the way."""
    if new == old:
        return
    repo, base_ref = wt.repo, f"refs/heads/{wt.base}"
    on = await git.run(repo, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))
    if on.stripped != base_ref:
        current = on.stripped.removeprefix("refs/heads/") or "a detached HEAD"
        raise MergeRefused(
            f"the main working tree {repo} moved to {current} while merging; nothing was merged"
        )
    await _read_tree(repo, old, new, dry_run=True)  # what would be in the way, before anything
    reason = f"acp-session-host: {strategy} {wt.branch}"
    swapped = await git.run(repo, "update-ref", "-m", reason, base_ref, new, old, ok=(0, 1, 128))
    if swapped.code != 0:
        raise MergeRefused(
            f"{wt.base} moved while merging (it was at {old}); nothing was merged: merge again"
        )
    try:
        await _read_tree(repo, old, new, dry_run=False)
    except MergeRefused:
        back = await git.run(repo, "update-ref", "-m", reason, base_ref, old, new, ok=(0, 1, 128))
        if back.code != 0:  # the user moved it again meanwhile: theirs stays
            log.warning("%s moved during a refused merge; left where it is", base_ref)
        raise
    await git.run(repo, "update-ref", "ORIG_HEAD", old, ok=(0, 1, 128))  # as git merge does


async def _read_tree(repo: str, old: str, new: str, *, dry_run: bool) -> None:
    """The main tree's index and files from `old` to `new`: git's two-tree merge, which
    refuses (whole, before writing) to overwrite a local change or an untracked file."""
    args = ["read-tree", "-m", "-u", *(["-n"] if dry_run else []), old, new]
    try:
        await git.run(repo, *args)
    except git.GitError as exc:
        raise MergeRefused(
            f"a local change or an untracked file in the main working tree {repo} is in the "
            f"way ({exc.stderr or exc}); nothing was merged"
        ) from exc


def _retrieve(task: asyncio.Future[MergeResult]) -> None:
    """A shielded merge whose caller was cancelled still ends; its error is not lost."""
    if not task.cancelled():
        task.exception()
