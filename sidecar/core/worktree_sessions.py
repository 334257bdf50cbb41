"""`_session/worktree/*`: a session's branch reviewed, merged back into its base,
exported as patches or thrown away (`sidecar/worktrees` does the git; this module applies
the session's rules: merge while no turn runs, discard only once closed)."""

from __future__ import annotations

from typing import Protocol

from sidecar.core import worktree_orphans
from sidecar.core.registry import KeyedLock
from sidecar.core.runtime import SessionRuntime
from sidecar.core.worktree_changes import WorktreeChanges
from sidecar.core.worktree_orphans import KnownRepos
from sidecar.core.worktree_place import tree
from sidecar.domain.errors import InvalidInput, InvalidState, SessionBusy
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

    def runtime(self, session_id: str) -> SessionRuntime | None: ...

    async def claimable(self, session_id: str, action: str) -> SessionRecord: ...


class SessionWorktrees:
    """`_session/worktree/*`: a session's branch reviewed, merged back, exported or
    thrown away."""

    def __init__(self, owner: WorktreeOwner) -> None:
        self._owner = owner
        self.changes = WorktreeChanges()  # what changed in each live worktree, watched

    async def _info(self, session_id: str) -> tuple[SessionRecord, WorktreeInfo]:
        record = await self._owner.store.get(session_id)
        info = WorktreeInfo.from_json(record.worktree)
        if info is None:
            raise InvalidInput("sessionId", f"session {session_id} has no worktree of its own")
        return record, info

    def _idle(self, session_id: str, action: str) -> None:
        runtime = self._owner.runtime(session_id)
        if runtime is not None and runtime.turns.busy:
            raise SessionBusy(session_id)
        del action

    async def diff(
        self, session_id: str, cursor: int, limit: int
    ) -> tuple[list[FileDiff], int | None, WorktreeInfo]:
        _, info = await self._info(session_id)
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
        async with self._owner.locks.hold(session_id):
            record, info = await self._info(session_id)
            self._idle(session_id, "merge")
            self.changes.forget(session_id)  # its HEAD and base move: looked at afresh
            await worktrees.commit_pending(tree(info), f"{record.title} ({session_id})")
            try:
                return await worktrees.merge(tree(info), strategy, message or record.title)
            finally:
                # Its work was committed, its base moved: the summary's ahead/behind/dirty
                # are asked again, as after a turn (a refused merge committed too).
                runtime = self._owner.runtime(session_id)
                if runtime is not None:
                    await runtime.refresh_worktree()

    async def discard(self, session_id: str) -> SessionRecord:
        """Closed sessions only: their worktree and branch are removed, the record says it
        has none (it keeps its transcript)."""
        async with self._owner.locks.hold(session_id):
            _, info = await self._info(session_id)
            if self._owner.runtime(session_id) is not None:
                raise InvalidState(f"session {session_id} is live: close it before discarding")
            await self._owner.claimable(session_id, "discard the worktree of")  # not live elsewhere
            await worktrees.discard(tree(info))
            return await self._owner.store.update_metadata(session_id, forget_worktree=True)

    async def patch(self, session_id: str, directory: str | None) -> list[str] | str:
        _, info = await self._info(session_id)
        return await worktrees.patch(tree(info), directory)

    async def orphans(self, repo: str | None, *, prune: bool) -> list[worktrees.Worktree]:
        """Worktrees of ours whose session is gone (removed, branches kept, when `prune`)."""
        return await worktree_orphans.find(
            self._owner.store, self._owner.known_repos, repo, prune=prune
        )
