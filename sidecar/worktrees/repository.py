"""What the worktree operations ask of the user's repository: its one lock, a session's
worktree as a value, how a base is named to git, and a few questions (is this a branch,
which files are changed or unmerged, who commits)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Final

from sidecar.worktrees import git

# Who commits when the user's git names nobody (a fresh machine, user.useConfigOnly).
FALLBACK_IDENTITY: Final = ("user.name=acp-session-host", "user.email=sessions@localhost")

_COMMIT_ID: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

_locks: dict[str, asyncio.Lock] = {}


@dataclass(frozen=True)
class Worktree:
    repo: str  # the main working tree's top directory
    path: str
    branch: str
    base: str  # a branch name, or a full commit id when it started from a commit
    owner: str = ""  # who made it (`create`'s `owner`), "" when unknown


def repo_lock(repo: str) -> asyncio.Lock:
    """One per repository: whatever changes its shared state (its worktree list, its
    branches, its main working tree) runs under it, one at a time."""
    return _locks.setdefault(repo, asyncio.Lock())


def ref(base: str) -> str:
    """A base as git should read it: a branch by its full ref (never a tag of the same
    name), a commit id as is."""
    return base if _COMMIT_ID.fullmatch(base) else f"refs/heads/{base}"


async def is_branch(root: str, name: str) -> bool:
    shown = await git.run(root, "show-ref", "--verify", "--quiet", f"refs/heads/{name}", ok=(0, 1))
    return shown.code == 0


async def commit_of(repo: str, name: str) -> str:
    """The commit `name` (a full ref or a commit id) is at now."""
    found = await git.run(repo, "rev-parse", "--verify", "--end-of-options", f"{name}^{{commit}}")
    return found.stripped


async def head(repo: str) -> str:
    return (await git.run(repo, "rev-parse", "--verify", "HEAD")).stripped


async def changed_files(repo: str) -> list[str]:
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


async def unmerged_paths(repo: str) -> list[str]:
    out = await git.run(repo, "diff", "--name-only", "--diff-filter=U", "-z", ok=(0, 1, 128))
    return sorted({name for name in out.text.split("\0") if name})


async def identity(cwd: str) -> list[str]:
    """Extra `-c` settings naming a committer, only when the user's git names none."""
    author, committer = await asyncio.gather(
        git.run(cwd, "var", "GIT_AUTHOR_IDENT", ok=(0, 1, 128)),
        git.run(cwd, "var", "GIT_COMMITTER_IDENT", ok=(0, 1, 128)),
    )
    return [] if author.code == 0 and committer.code == 0 else list(FALLBACK_IDENTITY)
