"""The operations on a session's worktree: create, inspect, review, merge back, export,
discard, find the ones nobody owns any more, and bring back a deleted directory.

Everything that changes a repository's shared state (its worktree list, its branches,
its main working tree) runs under one asyncio lock per repository, so five sessions on
one repository never race each other's git into a lock error. Merging is
`merging.py`'s (all or nothing, never touching what it did not make); its names are
re-exported here.
Submodules are not initialized in a new worktree (their directories stay empty); LFS
files stay pointers (no smudge).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from sidecar.domain.errors import InvalidInput
from sidecar.worktrees import git
from sidecar.worktrees.hunks import FileDiff, parse_diff
from sidecar.worktrees.merging import (
    MergeConflict,
    MergeRefused,
    MergeResult,
    Strategy,
    commit_pending,
    merge,
)
from sidecar.worktrees.repository import Worktree, is_branch, ref, repo_lock

__all__ = [
    "InvalidWorktree",
    "MergeConflict",
    "MergeRefused",
    "MergeResult",
    "NotARepository",
    "Strategy",
    "Unmerged",
    "Worktree",
    "WorktreeStatus",
    "commit_pending",
    "create",
    "diff",
    "discard",
    "merge",
    "orphans",
    "patch",
    "prune",
    "recreate",
    "repo_root",
    "status",
    "unmerged",
]

# In a worktree's private admin directory: what its branch started from, and who made it
# (a session id: an orphan is a worktree whose owner is gone).
_BASE_FILE: Final = "acp-base"
_OWNER_FILE: Final = "acp-owner"
_DIFF_ARGS: Final = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "-M",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


class NotARepository(InvalidInput, ValueError):
    def __init__(self, cwd: str, reason: str = "is not inside a git repository") -> None:
        super().__init__("cwd", f"{cwd} {reason}")
        self.cwd = cwd


class InvalidWorktree(InvalidInput, ValueError):
    """A create argument refused; `field` is "branch", "base" or "path"."""


@dataclass(frozen=True)
class WorktreeStatus:
    ahead: int  # commits on the branch not on base
    behind: int  # commits on base not on the branch
    dirty: bool  # uncommitted changes (untracked files included) in the worktree


async def repo_root(cwd: str) -> str:
    """The main working tree of the repository holding `cwd` (also from a linked one)."""
    if not _is_dir(cwd):
        raise NotARepository(cwd, "is not a directory")
    try:
        listed = await git.run(cwd, "worktree", "list", "--porcelain", "-z")
    except git.GitNotInstalled:
        raise
    except git.GitError as exc:
        raise NotARepository(cwd) from exc
    first = _porcelain(listed.text)[0]
    if "bare" in first:
        raise NotARepository(cwd, "is in a bare repository (no main working tree)")
    return first["worktree"]


async def create(
    cwd: str,
    *,
    path: str,
    session_short_id: str,
    branch: str | None = None,
    base: str | None = None,
    owner: str = "",
    start: str | None = None,
    checkout: bool = True,
) -> Worktree:
    """A new branch (default `acp/<short id>`) in a new worktree at `path`, from `start`
    (a commit; default: `base`, itself by default the repository's current branch).
    `checkout=False`: the directory is left empty and the index too, for the caller to
    fill (a fork's files)."""
    root = await repo_root(cwd)
    branch = branch if branch is not None else f"acp/{session_short_id}"
    target = _absolute(cwd, path)
    async with repo_lock(root):
        await _check_branch(root, branch)
        base = await _resolve_base(root, base)
        if _exists(target):
            raise InvalidWorktree("path", f"{target} already exists")
        no_checkout = [] if checkout else ["--no-checkout"]
        try:
            await git.run(
                root,
                "worktree",
                "add",
                "--quiet",
                "--no-track",
                *no_checkout,
                "-b",
                branch,
                target,
                start or ref(base),
            )
        except git.GitError as exc:
            raise InvalidWorktree("path", f"cannot create a worktree at {target}: {exc}") from exc
        made = Worktree(repo=root, path=_real(target), branch=branch, base=base, owner=owner)
        await _write_base(made)
    return made


async def status(wt: Worktree) -> WorktreeStatus:
    counts, dirty = await asyncio.gather(
        git.run(
            wt.path,
            "rev-list",
            "--left-right",
            "--count",
            f"{ref(wt.base)}...refs/heads/{wt.branch}",
        ),
        git.run(wt.path, "status", "--porcelain=v1", "-z"),
    )
    behind, ahead = (int(n) for n in counts.stripped.split())
    return WorktreeStatus(ahead=ahead, behind=behind, dirty=bool(dirty.out))


@dataclass(frozen=True)
class Unmerged:
    """What removing a worktree and its branch would lose."""

    commits: int  # on the branch, not on its base
    uncommitted: bool  # changes in its directory not committed (untracked files too)


async def unmerged(wt: Worktree) -> Unmerged:
    """Judged from the repository -- the branch against its base -- so a directory removed
    by hand hides no commit; uncommitted changes only where the directory still is (with
    it went whatever was not committed). GitError when git cannot tell (the base gone,
    the repository unreadable)."""
    commits = 0
    if await is_branch(wt.repo, wt.branch):
        counted = await git.run(
            wt.repo, "rev-list", "--count", f"{ref(wt.base)}..refs/heads/{wt.branch}"
        )
        commits = int(counted.stripped)
    uncommitted = False
    if _is_dir(wt.path):
        out = await git.run(wt.path, "status", "--porcelain=v1", "-z")
        uncommitted = bool(out.out)
    return Unmerged(commits, uncommitted)


async def diff(
    wt: Worktree, *, cursor: int = 0, limit: int = 100
) -> tuple[list[FileDiff], int | None]:
    """The branch and the worktree's uncommitted work (untracked files too) against the
    merge-base with base, `limit` files from `cursor`. The worktree's own index is not
    touched: the snapshot is staged into a scratch copy of it."""
    if cursor < 0:
        raise InvalidInput("cursor", "must be 0 or more")
    if limit < 1:
        raise InvalidInput("limit", "must be 1 or more")
    merge_base = (
        await git.run(wt.path, "merge-base", ref(wt.base), f"refs/heads/{wt.branch}")
    ).stripped
    # The working tree against the merge-base (committed and uncommitted work of tracked
    # files, one pass, the worktree's index only read) beside the list of untracked
    # files; only when there are some is a scratch copy of the index needed, holding
    # them as intent-to-add so the same diff shows them as new files.
    tracked, untracked = await asyncio.gather(
        git.run(wt.path, "diff", *_DIFF_ARGS, merge_base),
        git.run(wt.path, "ls-files", "--others", "--exclude-standard", "-z"),
    )
    out = tracked
    new_files = [p for p in untracked.text.split("\0") if p]
    if new_files:
        with tempfile.TemporaryDirectory(prefix="acp-diff-") as scratch:
            env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
            await asyncio.to_thread(_copy_index, await _admin_dir(wt.path), scratch)
            for chunk in _chunks(new_files):
                await git.run(wt.path, "add", "--intent-to-add", "--", *chunk, env=env)
            out = await git.run(wt.path, "diff", *_DIFF_ARGS, merge_base, env=env)
    files = parse_diff(out.text)
    end = cursor + limit
    return files[cursor:end], (end if end < len(files) else None)


def _chunks(paths: list[str], size: int = 500) -> list[list[str]]:
    return [paths[i : i + size] for i in range(0, len(paths), size)]


async def discard(wt: Worktree) -> None:
    """Remove the worktree's directory and registration, and delete its branch."""
    async with repo_lock(wt.repo):
        await _remove_worktree(wt.repo, wt.path)
        if await is_branch(wt.repo, wt.branch):
            await git.run(wt.repo, "branch", "-D", "--quiet", wt.branch)


async def patch(wt: Worktree, directory: str | None = None) -> list[str] | str:
    """The branch's commits since base as a patch series: files written into `directory`
    (made if need be; their paths, in order), or the series as one mbox text. Uncommitted
    work is not in it: `commit_pending` first to include it. Asked of the repository, so
    a worktree directory removed by hand still has its series."""
    span = f"{ref(wt.base)}..refs/heads/{wt.branch}"
    if directory is None:
        out = await git.run(wt.repo, "format-patch", "--stdout", "--no-color", span)
        return out.text
    target = _absolute(os.getcwd(), directory)
    try:
        await asyncio.to_thread(os.makedirs, target, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(
            "directory", f"cannot write patches into {target}: {exc.strerror or exc}"
        ) from None
    out = await git.run(wt.repo, "format-patch", "--no-color", "-o", target, span)
    return [line for line in out.text.splitlines() if line]


async def orphans(
    repos: str | Iterable[str], known_paths: set[str], *, under: str, prune: bool = False
) -> list[Worktree]:
    """Worktrees of `repos` whose directory is under `under` but not in `known_paths`.
    `prune`: remove them (directory and registration); their branches are kept, so no
    work is lost -- `discard` deletes a branch."""
    given = [repos] if isinstance(repos, str) else list(repos)
    roots = list(dict.fromkeys([await repo_root(repo) for repo in given]))
    top = _real(under)
    known = {_real(p) for p in known_paths}
    found: list[Worktree] = []
    for root in roots:
        async with repo_lock(root):  # no create of ours is halfway while we look
            here = await _unknown_worktrees(root, known, top)
            if prune:
                for wt in here:
                    await _remove_worktree(root, wt.path)
        found += here
    return found


async def prune(found: Iterable[Worktree]) -> None:
    """Remove these worktrees (directory and registration; their branches are kept)."""
    for wt in found:
        async with repo_lock(wt.repo):
            await _remove_worktree(wt.repo, wt.path)


async def recreate(wt: Worktree) -> None:
    """Bring back a worktree whose directory was deleted by hand, on its branch."""
    async with repo_lock(wt.repo):
        if _exists(wt.path):
            raise InvalidWorktree("path", f"{wt.path} exists: nothing to recreate")
        await git.run(wt.repo, "worktree", "prune")
        await git.run(wt.repo, "worktree", "add", "--quiet", wt.path, wt.branch)
        await _write_base(wt)


# -- helpers ---------------------------------------------------------------------------


async def _check_branch(root: str, branch: str) -> None:
    if not branch or branch.startswith("-"):
        raise InvalidWorktree("branch", f"{branch!r} is not a valid branch name")
    checked = await git.run(root, "check-ref-format", "--branch", branch, ok=(0, 1, 128))
    if checked.code != 0 or checked.stripped != branch:
        raise InvalidWorktree("branch", f"{branch!r} is not a valid branch name")
    if await is_branch(root, branch):
        raise InvalidWorktree("branch", f"branch {branch} already exists")


async def _resolve_base(root: str, base: str | None) -> str:
    """A branch name stays a name (merges go into it); anything else becomes a commit."""
    if base is None:
        on = await git.run(root, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
        if on.code == 0 and await is_branch(root, on.stripped):
            return on.stripped
        base = "HEAD"
    if not base or base.startswith("-"):
        raise InvalidWorktree("base", f"{base!r} is not a branch or commit")
    if await is_branch(root, base):
        return base
    found = await git.run(
        root,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{base}^{{commit}}",
        ok=(0, 1),
    )
    if found.code != 0:
        raise InvalidWorktree("base", f"{base!r} does not name a commit in {root}")
    return found.stripped


async def _unknown_worktrees(root: str, known: set[str], top: str) -> list[Worktree]:
    listed = await git.run(root, "worktree", "list", "--porcelain", "-z")
    common = await git.run(root, "rev-parse", "--path-format=absolute", "--git-common-dir")
    admins = _admin_dirs(common.stripped)
    found: list[Worktree] = []
    for entry in _porcelain(listed.text)[1:]:
        path = _real(entry["worktree"])
        if path in known or not _inside(path, top):
            continue
        branch = entry.get("branch", "").removeprefix("refs/heads/")
        admin = admins.get(path)
        base, owner = _read_admin(admin, _BASE_FILE), _read_admin(admin, _OWNER_FILE)
        found.append(Worktree(root, path, branch, base, owner))
    return found


async def _remove_worktree(repo: str, path: str) -> None:
    """`worktree remove --force`; when git will not (initialized submodules inside), the
    directory is deleted and the registration pruned."""
    try:
        await git.run(repo, "worktree", "remove", "--force", path)
    except git.GitError:
        if _exists(path):
            await asyncio.to_thread(shutil.rmtree, path)
        await git.run(repo, "worktree", "prune")


async def _write_base(wt: Worktree) -> None:
    admin = await _admin_dir(wt.path)
    await asyncio.to_thread(_write_text, os.path.join(admin, _BASE_FILE), wt.base + "\n")
    if wt.owner:
        await asyncio.to_thread(_write_text, os.path.join(admin, _OWNER_FILE), wt.owner + "\n")


async def _admin_dir(path: str) -> str:
    """The git dir of the worktree at `path`: read from its `.git` file (`gitdir: DIR`,
    what `git worktree add` writes) without a git process; asked of git when `.git` is
    anything else (a directory, a missing or unexpected file)."""
    pointer = await asyncio.to_thread(_read_gitdir_pointer, path)
    if pointer is not None:
        return pointer
    return (await git.run(path, "rev-parse", "--absolute-git-dir")).stripped


# Path checks: a few stat calls each, cheap enough for the event loop.


def _absolute(cwd: str, path: str) -> str:
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))


def _real(path: str) -> str:
    return os.path.realpath(path)


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def _inside(path: str, top: str) -> bool:
    return path != top and os.path.commonpath([top, path]) == top


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def _read_gitdir_pointer(path: str) -> str | None:
    try:
        with open(os.path.join(path, ".git"), encoding="utf-8") as dot_git:
            first = dot_git.readline().strip()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError):
        return None
    if not first.startswith("gitdir: "):
        return None
    admin = os.path.normpath(os.path.join(path, first[len("gitdir: ") :]))
    return admin if os.path.isdir(admin) else None


def _copy_index(admin: str, scratch: str) -> str:
    """A scratch copy of the worktree's index (its stat cache makes `add -A` quick). Its
    mtime is kept: git trusts a cached entry only if the file is older than the index
    (racy-git), and a fresh mtime would hide a same-size edit made just before."""
    index = os.path.join(scratch, "index")
    if os.path.exists(os.path.join(admin, "index")):
        shutil.copy2(os.path.join(admin, "index"), index)
    return index


def _read_admin(admin: str | None, name: str) -> str:
    """One of our files in a worktree's admin directory ("" when it has none)."""
    if admin is None:
        return ""
    try:
        with open(os.path.join(admin, name), encoding="utf-8") as found:
            return found.read().strip()
    except FileNotFoundError:
        return ""


def _admin_dirs(common_dir: str) -> dict[str, str]:
    """Each linked worktree's path (real) to its admin directory under `.git/worktrees`."""
    top = os.path.join(common_dir, "worktrees")
    found: dict[str, str] = {}
    if not os.path.isdir(top):
        return found
    for name in os.listdir(top):
        admin = os.path.join(top, name)
        try:
            with open(os.path.join(admin, "gitdir"), encoding="utf-8") as pointer:
                dot_git = pointer.read().strip()
        except (FileNotFoundError, NotADirectoryError):
            continue
        found[os.path.realpath(os.path.dirname(dot_git))] = admin
    return found


def _porcelain(text: str) -> list[dict[str, str]]:
    """`git worktree list --porcelain -z`: records of NUL-ended fields, an empty field
    between records; the main working tree (or the bare repository) first."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for field in text.split("\0"):
        if not field:
            if current:
                records.append(current)
                current = {}
            continue
        key, _, value = field.partition(" ")
        current[key] = value
    if current:
        records.append(current)
    return records
