"""`_session/worktree/*`: a session's branch reviewed, merged back into its base,
exported as patches or thrown away (`sidecar/worktrees` does the git; this module applies
the session's rules: merge on the worktree's host under the turn lock, discard only once
closed)."""

from __future__ import annotations

from typing import Protocol

from sidecar.core import worktree_orphans
from sidecar.core.registry import KeyedLock
from sidecar.core.runtime import SessionRuntime
from sidecar.core.worktree_changes import WorktreeChanges
from sidecar.core.worktree_orphans import KnownRepos
from sidecar.core.worktree_place import check_host, tree
from sidecar.domain.errors import InvalidInput, InvalidState
from sidecar.domain.records import SessionRecord
from sidecar.domain.worktree_info import WorktreeInfo
from sidecar.store.base import SessionStore
from sidecar.worktrees import manager as worktrees
from sidecar.worktrees.hunks import FileDiff


class WorktreeOwner(Protocol):
    """What these operations use of the manager."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def locks(self) -> KeyedLock: ...

    @property
    def known_repos(self) -> KnownRepos: ...

    @property
    def host(self) -> str: ...

    def runtime(self, session_id: str) -> SessionRuntime | None: ...

    async def claimable(self, session_id: str, action: str) -> SessionRecord: ...


class SessionWorktrees:
    """`_session/worktree/*`: a session's branch reviewed, merged back, exported or
    thrown away."""

    def __init__(self, owner: WorktreeOwner) -> None:
        self._owner = owner
        self.changes = WorktreeChanges()  # what changed in each live worktree, watched

    async def _info(self, session_id: str, action: str) -> tuple[SessionRecord, WorktreeInfo]:
        """The session's worktree, on this host only (its directory is on its host's disk;
        the same path here is not it)."""
        record = await self._owner.store.get(session_id)
        info = WorktreeInfo.from_json(record.worktree)
        if info is None:
            raise InvalidInput("sessionId", f"session {session_id} has no worktree of its own")
        check_host(info, self._owner.host, action)
        return record, info

    async def diff(
        self, session_id: str, cursor: int, limit: int
    ) -> tuple[list[FileDiff], int | None, WorktreeInfo]:
        _, info = await self._info(session_id, "review")
        if cursor < 0:
            raise InvalidInput("cursor", "must be 0 or more")
        runtime = self._owner.runtime(session_id)
        generation = runtime.generation if runtime is not None else None
        files = await self.changes.diff(session_id, generation, tree(info))
        end = cursor + limit
        return files[cursor:end], (end if end < len(files) else None), info

    async def merge(
        self, session_id: str, strategy: worktrees.Strategy, message: str | None
    ) -> worktrees.MergeResult:
        """Only on the worktree's host; for a live session under its turn lock, like a
        revert (a prompt meanwhile is busy, a queued one waits), so no turn edits the
        worktree while its work is committed and merged."""
        async with self._owner.locks.hold(session_id):
            record, info = await self._info(session_id, "merge")
            runtime = self._owner.runtime(session_id)
            if runtime is None:
                return await self._merge(record, info, strategy, message, None)
            done = await runtime.turns.hold(
                lambda: self._merge(record, info, strategy, message, runtime)
            )
            if done is None:
                raise InvalidState(
                    f"the merge of session {session_id} was cancelled before it began"
                )
            return done

    async def _merge(
        self,
        record: SessionRecord,
        info: WorktreeInfo,
        strategy: worktrees.Strategy,
        message: str | None,
        runtime: SessionRuntime | None,
    ) -> worktrees.MergeResult:
        session_id = record.session_id
        self.changes.forget(session_id)  # its HEAD and base move: looked at afresh
        try:
            await worktrees.commit_pending(tree(info), f"{record.title} ({session_id})")
            return await worktrees.merge(tree(info), strategy, message or record.title)
        finally:
            # Its work was committed, its base moved: the summary's ahead/behind/dirty
            # are asked again, as after a turn (a refused merge committed too).
            if runtime is not None:
                await runtime.refresh_worktree()

    async def discard(self, session_id: str) -> SessionRecord:
        """Closed sessions only: their worktree and branch are removed, the record says it
        has none (it keeps its transcript)."""
        async with self._owner.locks.hold(session_id):
            _, info = await self._info(session_id, "discard")
            if self._owner.runtime(session_id) is not None:
                raise InvalidState(f"session {session_id} is live: close it before discarding")
            await self._owner.claimable(session_id, "discard the worktree of")  # not live elsewhere
            await worktrees.discard(tree(info))
            return await self._owner.store.update_metadata(session_id, forget_worktree=True)

    async def patch(self, session_id: str, directory: str | None) -> list[str] | str:
        _, info = await self._info(session_id, "export")
        return await worktrees.patch(tree(info), directory)

    async def orphans(self, repo: str | None, *, prune: bool) -> list[worktrees.Worktree]:
        """Worktrees of ours whose session is gone (removed, branches kept, when `prune`)."""
        return await worktree_orphans.find(
            self._owner.store, self._owner.known_repos, repo, prune=prune
        )
