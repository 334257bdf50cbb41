"""The operations on a session's worktree: create, inspect, review, merge back, export,
discard, find the ones nobody owns any more, and bring back a deleted directory.

Everything that changes a repository's shared state (its worktree list, its branches,
its main working tree) runs under one asyncio lock per repository, so five sessions on
one repository never race each other's git into a lock error. A merge is all or
nothing: on a conflict or a refusal, the main tree and `base` are put back exactly as
they were, and it runs shielded, so a cancelled caller cannot stop it halfway.
Submodules are not initialized in a new worktree (their directories stay empty); LFS
files stay pointers (no smudge).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from sidecar.domain.errors import InvalidInput, InvalidState
from sidecar.worktrees import git
from sidecar.worktrees.hunks import FileDiff, parse_diff

Strategy = Literal["merge", "squash", "rebase"]

# In a worktree's private admin directory: what its branch started from, and who made it
# (a session id: an orphan is a worktree whose owner is gone).
_BASE_FILE: Final = "acp-base"
_OWNER_FILE: Final = "acp-owner"
# Who commits when the user's git names nobody (a fresh machine, user.useConfigOnly).
_FALLBACK_IDENTITY: Final = ("user.name=acp-session-host", "user.email=sessions@localhost")
_DIFF_ARGS: Final = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "-M",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)

_COMMIT_ID: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_locks: dict[str, asyncio.Lock] = {}


class NotARepository(InvalidInput, ValueError):
    def __init__(self, cwd: str, reason: str = "is not inside a git repository") -> None:
        super().__init__("cwd", f"{cwd} {reason}")
        self.cwd = cwd


class InvalidWorktree(InvalidInput, ValueError):
    """A create argument refused; `field` is "branch", "base" or "path"."""


class MergeRefused(InvalidState):
    """Nothing was touched: the main tree is dirty or elsewhere, or git refused."""

    def __init__(self, reason: str, files: Iterable[str] = ()) -> None:
        self.files = tuple(files)
        shown = f": {', '.join(self.files)}" if self.files else ""
        super().__init__(f"merge refused: {reason}{shown}")


class MergeConflict(InvalidState):
    """The merge was aborted; base and the main tree are as they were."""

    def __init__(self, branch: str, base: str, files: Iterable[str]) -> None:
        self.files = tuple(files)
        super().__init__(
            f"merging {branch} into {base} conflicts in {', '.join(self.files) or '(unknown)'}; "
            "nothing was merged"
        )


@dataclass(frozen=True)
class Worktree:
    repo: str  # the main working tree's top directory
    path: str
    branch: str
    base: str  # a branch name, or a full commit id when it started from a commit
    owner: str = ""  # who made it (`create`'s `owner`), "" when unknown


@dataclass(frozen=True)
class WorktreeStatus:
    ahead: int  # commits on the branch not on base
    behind: int  # commits on base not on the branch
    dirty: bool  # uncommitted changes (untracked files included) in the worktree


@dataclass(frozen=True)
class MergeResult:
    strategy: Strategy
    base: str
    before: str  # base's commit before the merge
    after: str  # and after it (equal: there was nothing to merge)


def _ref(base: str) -> str:
    """A base as git should read it: a branch by its full ref (never a tag of the same
    name), a commit id as is."""
    return base if _COMMIT_ID.fullmatch(base) else f"refs/heads/{base}"


def _lock(repo: str) -> asyncio.Lock:
    return _locks.setdefault(repo, asyncio.Lock())


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
) -> Worktree:
    root = await repo_root(cwd)
    branch = branch if branch is not None else f"acp/{session_short_id}"
    target = _absolute(cwd, path)
    async with _lock(root):
        await _check_branch(root, branch)
        base = await _resolve_base(root, base)
        if _exists(target):
            raise InvalidWorktree("path", f"{target} already exists")
        try:
            await git.run(
                root, "worktree", "add", "--quiet", "--no-track", "-b", branch, target, _ref(base)
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
            f"{_ref(wt.base)}...refs/heads/{wt.branch}",
        ),
        git.run(wt.path, "status", "--porcelain=v1", "-z"),
    )
    behind, ahead = (int(n) for n in counts.stripped.split())
    return WorktreeStatus(ahead=ahead, behind=behind, dirty=bool(dirty.out))


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
        await git.run(wt.path, "merge-base", _ref(wt.base), f"refs/heads/{wt.branch}")
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


async def commit_pending(wt: Worktree, message: str) -> bool:
    """Commit everything uncommitted in the worktree onto its branch; False if nothing."""
    await git.run(wt.path, "add", "-A")
    staged = await git.run(wt.path, "diff", "--cached", "--quiet", ok=(0, 1))
    if staged.code == 0:
        return False
    identity = await _identity(wt.path)
    await git.run(wt.path, "commit", "--quiet", "--no-verify", "-m", message, config=identity)
    return True


async def merge(wt: Worktree, strategy: Strategy, message: str | None = None) -> MergeResult:
    """Merge the branch into base in the main working tree (see the module's doc)."""
    if strategy not in ("merge", "squash", "rebase"):
        raise InvalidInput("strategy", f"unknown merge strategy {strategy!r}")
    task = asyncio.ensure_future(_merge_locked(wt, strategy, message))
    task.add_done_callback(_retrieve)
    return await asyncio.shield(task)


async def discard(wt: Worktree) -> None:
    """Remove the worktree's directory and registration, and delete its branch."""
    async with _lock(wt.repo):
        await _remove_worktree(wt.repo, wt.path)
        if await _is_branch(wt.repo, wt.branch):
            await git.run(wt.repo, "branch", "-D", "--quiet", wt.branch)


async def patch(wt: Worktree, directory: str | None = None) -> list[str] | str:
    """The branch's commits since base as a patch series: files written into `directory`
    (their paths, in order), or the series as one mbox text. Uncommitted work is not in
    it: `commit_pending` first to include it."""
    span = f"{_ref(wt.base)}..refs/heads/{wt.branch}"
    if directory is None:
        out = await git.run(wt.path, "format-patch", "--stdout", "--no-color", span)
        return out.text
    target = _absolute(os.getcwd(), directory)
    out = await git.run(wt.path, "format-patch", "--no-color", "-o", target, span)
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
        async with _lock(root):  # no create of ours is halfway while we look
            here = await _unknown_worktrees(root, known, top)
            if prune:
                for wt in here:
                    await _remove_worktree(root, wt.path)
        found += here
    return found


async def prune(found: Iterable[Worktree]) -> None:
    """Remove these worktrees (directory and registration; their branches are kept)."""
    for wt in found:
        async with _lock(wt.repo):
            await _remove_worktree(wt.repo, wt.path)


async def recreate(wt: Worktree) -> None:
    """Bring back a worktree whose directory was deleted by hand, on its branch."""
    async with _lock(wt.repo):
        if _exists(wt.path):
            raise InvalidWorktree("path", f"{wt.path} exists: nothing to recreate")
        await git.run(wt.repo, "worktree", "prune")
        await git.run(wt.repo, "worktree", "add", "--quiet", wt.path, wt.branch)
        await _write_base(wt)


# -- merging -------------------------------------------------------------------------


async def _merge_locked(wt: Worktree, strategy: Strategy, message: str | None) -> MergeResult:
    async with _lock(wt.repo):
        await _check_main_tree(wt)
        await commit_pending(wt, message or f"Session work on {wt.branch}")
        before = await _head(wt.repo)
        identity = await _identity(wt.repo)
        if strategy == "merge":
            text = message or f"Merge branch '{wt.branch}' into {wt.base}"
            await _merge_or_undo(
                wt,
                before,
                ["merge", "--no-ff", "--no-edit", "-m", text, f"refs/heads/{wt.branch}"],
                identity,
            )
        elif strategy == "squash":
            await _merge_or_undo(
                wt, before, ["merge", "--squash", f"refs/heads/{wt.branch}"], identity
            )
            staged = await git.run(wt.repo, "diff", "--cached", "--quiet", ok=(0, 1))
            if staged.code == 1:
                text = message or f"Squashed branch '{wt.branch}' into {wt.base}"
                try:
                    await git.run(
                        wt.repo, "commit", "--quiet", "--no-verify", "-m", text, config=identity
                    )
                except git.GitError as exc:  # a signing failure, say: nothing stays staged
                    await _restore(wt.repo, before)
                    raise MergeRefused(exc.stderr or str(exc)) from exc
        else:
            await _rebase_or_undo(wt, identity)
            await _merge_or_undo(
                wt, before, ["merge", "--ff-only", f"refs/heads/{wt.branch}"], identity
            )
        return MergeResult(strategy, wt.base, before, await _head(wt.repo))


async def _check_main_tree(wt: Worktree) -> None:
    on = await git.run(wt.repo, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))
    if not await _is_branch(wt.repo, wt.base):
        raise MergeRefused(f"base {wt.base} is a commit, not a branch to merge into")
    if on.stripped != f"refs/heads/{wt.base}":
        current = on.stripped.removeprefix("refs/heads/") or "a detached HEAD"
        raise MergeRefused(f"the main working tree {wt.repo} is on {current}, not on {wt.base}")
    dirty = await _changed_files(wt.repo)
    if dirty:
        raise MergeRefused(f"the main working tree {wt.repo} has uncommitted changes", dirty)


async def _merge_or_undo(wt: Worktree, before: str, args: list[str], identity: list[str]) -> None:
    """Run a merge in the main tree; on failure put it back at `before` and say why."""
    try:
        await git.run(wt.repo, *args, config=identity)
    except git.GitError as exc:
        conflicted = await _unmerged(wt.repo)
        await _restore(wt.repo, before)
        if conflicted:
            raise MergeConflict(wt.branch, wt.base, conflicted) from exc
        raise MergeRefused(exc.stderr or str(exc)) from exc


async def _rebase_or_undo(wt: Worktree, identity: list[str]) -> None:
    """Rebase the branch onto base in the worktree; on a conflict abort (the branch is as
    it was, base never moved)."""
    try:
        await git.run(
            wt.path, "rebase", "--quiet", "--no-autostash", _ref(wt.base), config=identity
        )
    except git.GitError as exc:
        conflicted = await _unmerged(wt.path)
        await git.run(wt.path, "rebase", "--abort", ok=(0, 1, 128))
        if conflicted:
            raise MergeConflict(wt.branch, wt.base, conflicted) from exc
        raise MergeRefused(exc.stderr or str(exc)) from exc


async def _restore(repo: str, before: str) -> None:
    """Undo a failed merge: abort it, and if anything is left (a squash has no merge to
    abort), reset the tracked files to `before` (the tree was clean before we began)."""
    merging = await git.run(repo, "rev-parse", "-q", "--verify", "MERGE_HEAD", ok=(0, 1))
    if merging.code == 0:
        await git.run(repo, "merge", "--abort", ok=(0, 1, 128))
    if await _head(repo) != before or await _changed_files(repo) or await _unmerged(repo):
        await git.run(repo, "reset", "--hard", "--quiet", before)


def _retrieve(task: asyncio.Future[MergeResult]) -> None:
    """A shielded merge whose caller was cancelled still ends; its error is not lost."""
    if not task.cancelled():
        task.exception()


# -- helpers ---------------------------------------------------------------------------


async def _check_branch(root: str, branch: str) -> None:
    if not branch or branch.startswith("-"):
        raise InvalidWorktree("branch", f"{branch!r} is not a valid branch name")
    checked = await git.run(root, "check-ref-format", "--branch", branch, ok=(0, 1, 128))
    if checked.code != 0 or checked.stripped != branch:
        raise InvalidWorktree("branch", f"{branch!r} is not a valid branch name")
    if await _is_branch(root, branch):
        raise InvalidWorktree("branch", f"branch {branch} already exists")


async def _resolve_base(root: str, base: str | None) -> str:
    """A branch name stays a name (merges go into it); anything else becomes a commit."""
    if base is None:
        on = await git.run(root, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
        if on.code == 0 and await _is_branch(root, on.stripped):
            return on.stripped
        base = "HEAD"
    if not base or base.startswith("-"):
        raise InvalidWorktree("base", f"{base!r} is not a branch or commit")
    if await _is_branch(root, base):
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


async def _is_branch(root: str, name: str) -> bool:
    shown = await git.run(root, "show-ref", "--verify", "--quiet", f"refs/heads/{name}", ok=(0, 1))
    return shown.code == 0


async def _head(repo: str) -> str:
    return (await git.run(repo, "rev-parse", "--verify", "HEAD")).stripped


async def _changed_files(repo: str) -> list[str]:
    """Tracked files with uncommitted changes (untracked ones do not stop a merge: git
    refuses by itself to overwrite one, before touching anything)."""
    out = await git.run(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    entries = out.text.split("\0")
    files: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        if entry:
            files.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # a rename's second record is its old path
        i += 1
    return files


async def _unmerged(repo: str) -> list[str]:
    out = await git.run(repo, "diff", "--name-only", "--diff-filter=U", "-z", ok=(0, 1, 128))
    return sorted({name for name in out.text.split("\0") if name})


async def _identity(cwd: str) -> list[str]:
    """Extra `-c` settings naming a committer, only when the user's git names none."""
    author, committer = await asyncio.gather(
        git.run(cwd, "var", "GIT_AUTHOR_IDENT", ok=(0, 1, 128)),
        git.run(cwd, "var", "GIT_COMMITTER_IDENT", ok=(0, 1, 128)),
    )
    return [] if author.code == 0 and committer.code == 0 else list(_FALLBACK_IDENTITY)


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
