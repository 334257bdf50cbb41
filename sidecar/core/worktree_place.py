"""A session's worktree on disk: made at session/new, checked before a runtime starts
in it, asked how it stands (`sidecar/worktrees` does the git).

A fork of a worktree session forked in place (the same cwd) gets a worktree of its own
(`make_fork`). Where a worktree goes: next to its repository, `<repo>.worktrees/<short id>` (not under
the data dir: the sandbox hides that from the agent's commands, and checkpoints refuse
it). Close keeps it; resume reuses it, or recreates it from its branch when its
directory was removed by hand; it belongs to the host whose disk holds it (the sidecar's host id, `--host-id`, as in
leases).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Final

from sidecar.domain.errors import InvalidInput, InvalidState
from sidecar.domain.worktree_info import WorktreeInfo, WorktreeState
from sidecar.worktrees import forking
from sidecar.worktrees import manager as worktrees
from sidecar.worktrees.git import GitError, GitNotInstalled

DIRECTORY_SUFFIX: Final = ".worktrees"


@dataclass(frozen=True, slots=True)
class WorktreeRequest:
    """`_meta.worktree` of session/new: a new branch (default `acp/<short id>`) from
    `base` (default: the repository's current branch)."""

    branch: str | None = None
    base: str | None = None


def short_id(session_id: str) -> str:
    return session_id.removeprefix("sess_")[:8]


async def make(cwd: str, session_id: str, request: WorktreeRequest, host: str) -> WorktreeInfo:
    """The session's worktree, made now; InvalidInput naming `worktree` (or its branch,
    base or path) when it cannot be."""
    try:
        root = await worktrees.repo_root(cwd)
    except worktrees.NotARepository as exc:
        raise InvalidInput("worktree", f"{exc.reason}: a worktree needs a git repository") from None
    except GitNotInstalled as exc:
        raise InvalidInput("worktree", str(exc)) from None
    path = os.path.join(root + DIRECTORY_SUFFIX, short_id(session_id))
    try:
        made = await worktrees.create(
            root,
            path=path,
            session_short_id=short_id(session_id),
            branch=request.branch,
            base=request.base,
            owner=session_id,
        )
    except worktrees.InvalidWorktree as exc:
        raise InvalidInput(f"worktree.{exc.field}", exc.reason) from None
    return WorktreeInfo(made.repo, made.path, made.branch, made.base, host)


async def make_fork(source: WorktreeInfo, session_id: str, host: str) -> WorktreeInfo:
    """A fork's own worktree: its branch from the source branch's tip, with the source's
    uncommitted work (see `sidecar/worktrees/forking.py`), merged into the same base."""
    check_host(source, host, "fork")
    path = os.path.join(source.repo + DIRECTORY_SUFFIX, short_id(session_id))
    try:
        made = await forking.fork(
            tree(source), path=path, session_short_id=short_id(session_id), owner=session_id
        )
    except worktrees.InvalidWorktree as exc:
        raise InvalidState(f"the fork's worktree cannot be made: {exc.reason}") from None
    except GitError as exc:
        raise InvalidState(f"the fork's worktree cannot be made: {exc}") from None
    return WorktreeInfo(made.repo, made.path, made.branch, made.base, host)


def tree(info: WorktreeInfo, owner: str = "") -> worktrees.Worktree:
    return worktrees.Worktree(info.repo, info.path, info.branch, info.base, owner)


def check_host(info: WorktreeInfo, host: str, action: str) -> None:
    """A worktree is used only on the host whose disk holds it (InvalidState naming both)."""
    if info.host != host:
        raise InvalidState(
            f"the session's worktree is on host {info.host}, not this one ({host}): "
            f"{action} it there"
        )


async def ensure(info: WorktreeInfo, session_id: str, host: str) -> None:
    """Before a runtime starts in it: on this host, and its directory there (recreated
    from the branch when it was removed by hand)."""
    check_host(info, host, "resume")
    if not await asyncio.to_thread(os.path.isdir, info.path):
        await worktrees.recreate(tree(info, session_id))


async def state(info: WorktreeInfo) -> WorktreeState | None:
    """Ahead, behind, dirty now; None when git cannot say (the directory is gone)."""
    try:
        found = await worktrees.status(tree(info))
    except (GitError, OSError):
        return None
    return WorktreeState(found.ahead, found.behind, found.dirty)


async def release(info: WorktreeInfo, session_id: str, host: str, *, force: bool) -> None:
    """At delete: a worktree with work not merged (commits on its branch not in its base,
    or changes not committed) is refused unless `force`; otherwise the worktree and its
    branch go with the session (nothing of it is lost that was not merged). What is
    unmerged is asked of the repository, not of the worktree's directory: one removed by
    hand still has its branch, and its commits."""
    if info.host != host:
        if force:
            return  # on another host's disk: the record goes, the worktree stays there
        raise InvalidState(
            f"session {session_id}'s worktree is on host {info.host}: delete it there, or "
            "with _meta.removeWorktree to leave the worktree behind"
        )
    if not force:
        try:
            found = await worktrees.unmerged(tree(info))
        except (GitError, OSError) as exc:
            raise InvalidState(
                f"cannot tell whether session {session_id}'s branch {info.branch} has work "
                f"not merged into {info.base} ({exc}): nothing was deleted; delete with "
                "_meta.removeWorktree: true to remove it anyway"
            ) from exc
        if found.commits or found.uncommitted:
            what = ", ".join(
                part
                for part in (
                    f"{found.commits} commit(s) not in {info.base}" if found.commits else "",
                    "changes not committed" if found.uncommitted else "",
                )
                if part
            )
            gone = "" if await asyncio.to_thread(os.path.isdir, info.path) else " (removed)"
            raise InvalidState(
                f"session {session_id} has unmerged work in its worktree {info.path}{gone} "
                f"(branch {info.branch}: {what}): merge or discard it first, or delete with "
                "_meta.removeWorktree: true"
            )
    try:
        await worktrees.discard(tree(info))
    except (GitError, OSError) as exc:
        raise InvalidState(f"the worktree {info.path} could not be removed: {exc}") from exc
