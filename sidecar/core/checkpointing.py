"""A runtime's checkpoints: a snapshot before each turn and after it, and code rewinds.

The before-snapshot runs alongside the turn's first model call (which changes no file)
and every tool waits for it (`ready`), so a large tree's first snapshot does not hold
the turn up. Snapshots are never cancelled half way by a cancelled turn (they are
their own tasks); a failure to checkpoint is logged and told in the summary's
`checkpointProblem`, and the turn goes on: an agent that cannot be undone is worse than
one that cannot act, but only slightly, and the user can see it.
"""

from __future__ import annotations

import asyncio
import logging

from sidecar.checkpoints.history import (
    history,
    next_rewind_number,
    plan_rewind,
    restore_plan,
    turn_changes,
    turn_ref,
)
from sidecar.checkpoints.shadow import ShadowRepo
from sidecar.checkpoints.store import CheckpointStore
from sidecar.domain.errors import CheckpointError, InvalidInput
from sidecar.domain.files import CodeRewind, TurnChanges

log = logging.getLogger(__name__)


class TurnCheckpoints:
    def __init__(self, store: CheckpointStore, session_id: str, cwd: str) -> None:
        self._session_id = session_id
        self._repo: ShadowRepo | None = None
        self.problem: str | None = store.problem
        if self.problem is None:
            self._repo = store.repo(session_id, cwd)
        self._before: asyncio.Task[None] | None = None
        self._opening: asyncio.Task[None] | None = None

    @property
    def available(self) -> bool:
        return self._repo is not None and self.problem is None

    def _failed(self, what: str, exc: CheckpointError | OSError) -> None:
        self.problem = f"{what} failed: {exc}"
        log.warning("session %s: %s", self._session_id, self.problem)

    def _require(self) -> ShadowRepo:
        if self._repo is None:
            raise CheckpointError(self.problem or "no checkpoints")
        return self._repo

    def start_opening(self, turns: int) -> None:
        """At runtime start, in the background (every use waits for it)."""
        if self._repo is not None:
            self._opening = asyncio.create_task(self._open(turns))

    async def _opened(self) -> None:
        if self._opening is not None:
            await asyncio.shield(self._opening)

    async def _open(self, turns: int) -> None:
        """The repository ready, a crash's leftovers cleaned up, and the end of a turn a
        crash cut short recorded (as the tree is now)."""
        if self._repo is None:
            return
        try:
            await self._repo.open()
            if turns and await self._repo.read_ref(turn_ref(turns, "before")) is not None:
                if await self._repo.read_ref(turn_ref(turns, "after")) is None:
                    snapshot = await self._repo.snapshot()
                    await self._repo.write_ref(turn_ref(turns, "after"), snapshot.tree)
            self.problem = None
        except (CheckpointError, OSError) as exc:
            self._failed("opening the checkpoints", exc)

    def begin(self, turn: int) -> None:
        """Start the before-snapshot of `turn` (tools wait for it: `ready`)."""
        if self._repo is None:
            return
        repo = self._repo

        async def take() -> None:
            await self._opened()
            try:
                snapshot = await repo.snapshot()
                await repo.write_ref(turn_ref(turn, "before"), snapshot.tree)
                self.problem = None
            except (CheckpointError, OSError) as exc:
                self._failed(f"the checkpoint before turn {turn}", exc)

        self._before = asyncio.create_task(take())

    async def ready(self) -> None:
        """Wait for the before-snapshot (never cancels it: a cancelled waiter just leaves)."""
        if self._before is not None:
            await asyncio.shield(self._before)

    async def end(self, turn: int, acted: bool) -> TurnChanges | None:
        """The after-snapshot of `turn` and what the turn changed (None: nothing, or no
        checkpoints). A turn that ran no tool changed nothing: its before is its after."""
        before_task, self._before = self._before, None
        if self._repo is None or before_task is None:
            return None
        repo = self._repo
        await asyncio.shield(before_task)
        try:
            before = await repo.read_ref(turn_ref(turn, "before"))
            if before is None:
                return None
            after = (await repo.snapshot()).tree if acted else before
            await repo.write_ref(turn_ref(turn, "after"), after)
            if after == before:
                return None
            return await turn_changes(repo, turn, current=None, with_diff=False)
        except (CheckpointError, OSError) as exc:
            self._failed(f"the checkpoint after turn {turn}", exc)
            return None

    async def changes(self, turn: int, *, idle: bool) -> TurnChanges:
        await self._opened()
        repo = self._require()
        current = None
        if idle and not repo.restore_pending:
            # A turn left without an end (interrupted) ends as the tree is now.
            if await repo.read_ref(turn_ref(turn, "after")) is None:
                current = (await repo.snapshot()).tree
        return await turn_changes(repo, turn, current=current, with_diff=True)

    async def rewind(
        self, turn: int | None, turns: int, *, force: bool, dry_run: bool
    ) -> CodeRewind:
        """The working tree back to before `turn` (None: undo the last code rewind)."""
        await self._opened()
        repo = self._require()
        if repo.restore_pending:
            await repo.open()  # finish a rewind a crash cut short first
        ordered = await history(repo)
        if turn is None:
            rewinds = [s for s in ordered if s.is_rewind and s.before is not None]
            if not rewinds:
                raise InvalidInput("undo", "there is no code rewind to undo")
            since, target = rewinds[-1].key, rewinds[-1].before
        else:
            start = next((s for s in ordered if s.key == (turn, 0, 0)), None)
            if start is None or start.before is None:
                raise CheckpointError(f"turn {turn} has no checkpoint to rewind to")
            since, target = start.key, start.before
        assert target is not None
        current = (await repo.snapshot()).tree
        plan = await plan_rewind(repo, ordered, since, target, current, force=force)
        if dry_run:
            return CodeRewind(plan.restore, plan.delete, plan.conflicts, None)
        number = next_rewind_number(ordered)
        restore = restore_plan(plan, target, turns, number)
        # The rewind is a checkpointed step of its own: undoing it is rewinding it.
        await repo.write_ref(restore.ref + "/before", current)
        await repo.restore(restore)
        return CodeRewind(plan.restore, plan.delete, plan.conflicts, number)

    async def aclose(self) -> None:
        """Let a snapshot in flight finish (it holds git's index lock) before the runtime goes."""
        pending = [t for t in (self._opening, self._before) if t is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
