"""A runtime's checkpoints: a snapshot before the first tool of a turn and one after the
turn, and code rewinds.

The before-snapshot is taken when the turn's first tool is about to run (every tool may
change files; the model's replies do not), so a turn that only talks costs nothing, and
what the snapshot holds is the tree exactly as the tool found it. Snapshots are never cut
short by a cancelled turn (they are their own tasks); a failure to checkpoint is logged
and told in the summary's `checkpointProblem`, and the turn goes on.

A directory that is not one to snapshot (`/`, the home directory holding the data dir,
one inside the data dir: known from the path; too many files: known at the first
snapshot) is refused once for the runtime: the refusal is logged once and is the
`checkpointProblem` (so the next `_session/state` carries it), no snapshot is tried again,
and changes and rewind answer it as their error. Closing never waits on a snapshot: `stop`
kills the running git and no new one starts (the end of a turn cut short so is recorded
by the next runtime's open, as for a crash).
"""

from __future__ import annotations

import asyncio
import logging

from sidecar.checkpoints.history import (
    history,
    last_writers,
    next_rewind_number,
    plan_rewind,
    restore_plan,
    turn_changes,
    turn_ref,
    uncovered,
)
from sidecar.checkpoints.shadow import ShadowRepo, TreeRefused
from sidecar.checkpoints.store import CheckpointStore
from sidecar.core import hunk_revert
from sidecar.core.hunk_revert import HunkRevert
from sidecar.domain.errors import CheckpointError, InvalidInput
from sidecar.domain.files import CodeRewind, TurnChanges

log = logging.getLogger(__name__)


class TurnCheckpoints:
    def __init__(self, store: CheckpointStore, session_id: str, cwd: str) -> None:
        self._session_id = session_id
        self._repo: ShadowRepo | None = None
        self._refused = False  # for the rest of this runtime: `problem` says why
        self._stopped = False
        self.problem: str | None = store.problem
        if self.problem is None:
            refusal = store.refusal(cwd)
            if refusal is None:
                self._repo = store.repo(session_id, cwd)
            else:
                self._refuse(refusal)
        self._turn: int | None = None  # the running turn
        self._before: asyncio.Task[None] | None = None  # its before-snapshot, once a tool came
        self._opening: asyncio.Task[None] | None = None
        self._after: asyncio.Task[TurnChanges | None] | None = None

    @property
    def available(self) -> bool:
        return self._repo is not None and self.problem is None

    def _refuse(self, reason: str) -> None:
        self._refused, self.problem = True, reason
        log.warning("session %s: %s", self._session_id, reason)

    def _failed(self, what: str, exc: CheckpointError | OSError) -> None:
        if self._stopped:
            return  # killed by `stop`: not a problem of the checkpoints
        if isinstance(exc, TreeRefused):
            self._refuse(str(exc))
            return
        self.problem = f"{what} failed: {exc}"
        log.warning("session %s: %s", self._session_id, self.problem)

    @property
    def _taking(self) -> bool:
        """Whether snapshots are taken (not refused, not stopped)."""
        return self._repo is not None and not self._refused and not self._stopped

    def _require(self) -> ShadowRepo:
        if self._repo is None or self._refused:
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
            await self._repo.open(first_turn=turns + 1)
            ordered = await history(self._repo)
            last = ordered[-1] if ordered else None
            if last is not None and not last.is_rewind and last.after is None:
                snapshot = await self._repo.snapshot()
                await self._repo.write_ref(turn_ref(last.key[0], "after"), snapshot.tree)
            if not self._refused:
                self.problem = None
        except (CheckpointError, OSError) as exc:
            self._failed("opening the checkpoints", exc)

    def begin(self, turn: int) -> None:
        """A turn starts; its before-snapshot waits for its first tool (`ready`)."""
        self._turn, self._before = turn, None

    async def ready(self) -> None:
        """Right before a tool runs: the turn's before-snapshot, taken the first time (a
        cancelled waiter leaves; the snapshot itself finishes)."""
        if not self._taking or self._repo is None or self._turn is None:
            return
        if self._before is None:
            self._before = asyncio.create_task(self._take_before(self._repo, self._turn))
        await asyncio.shield(self._before)

    async def _take_before(self, repo: ShadowRepo, turn: int) -> None:
        await self._opened()
        if not self._taking:
            return  # refused while opening, or closing
        try:
            snapshot = await repo.snapshot()
            await repo.write_ref(turn_ref(turn, "before"), snapshot.tree)
            self.problem = None
        except (CheckpointError, OSError) as exc:
            self._failed(f"the checkpoint before turn {turn}", exc)

    async def end(self, turn: int) -> TurnChanges | None:
        """The after-snapshot of `turn` and what it changed (None: no tool ran, nothing
        changed, or no checkpoints)."""
        before_task, self._before, self._turn = self._before, None, None
        if self._repo is None or before_task is None:
            return None
        await asyncio.shield(before_task)
        if not self._taking:
            return None
        # Its own task, so `stop` finds it (a close never waits on it).
        self._after = asyncio.create_task(self._take_after(self._repo, turn))
        return await asyncio.shield(self._after)

    async def _take_after(self, repo: ShadowRepo, turn: int) -> TurnChanges | None:
        try:
            before = await repo.read_ref(turn_ref(turn, "before"))
            if before is None:
                return None
            after = (await repo.snapshot()).tree
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
            started = await repo.read_ref(turn_ref(turn, "before")) is not None
            if started and await repo.read_ref(turn_ref(turn, "after")) is None:
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
            # The first checkpoint from this turn on: turns that ran no tool have none, and
            # changed nothing, so the tree before them is the tree before that one.
            if turn < repo.first_turn():
                raise CheckpointError(uncovered(turn, repo.first_turn()))
            start = next(
                (s for s in ordered if s.key >= (turn, 0, 0) and s.before is not None), None
            )
            if start is None:
                return CodeRewind((), (), (), None)  # the session changed nothing since
            since, target = start.key, start.before
        assert target is not None
        writers, whole = await last_writers(repo, ordered, since, None)
        # The files the rewind may write are looked at again whatever the watch says: a
        # change no event reported is still seen as the user's (a conflict).
        current = (await repo.snapshot(look_again=writers)).tree
        if not whole:  # a step cut short ends as the tree is now
            writers, _ = await last_writers(repo, ordered, since, current)
        plan = await plan_rewind(repo, writers, target, current, force=force)
        if dry_run:
            return CodeRewind(plan.restore, plan.delete, plan.conflicts, None)
        number = next_rewind_number(ordered)
        # The rewind is a checkpointed step of its own (`current` to what the restore
        # leaves): undoing it is rewinding it.
        await repo.restore(restore_plan(plan, target, turns, number, current))
        return CodeRewind(plan.restore, plan.delete, plan.conflicts, number)

    async def revert(
        self, turn: int, turns: int, path: str, hunks: tuple[str, ...], *, force: bool
    ) -> HunkRevert:
        """Hunks of one file of `turn` taken back, as a step `rewind(None)` undoes."""
        await self._opened()
        repo = self._require()
        if repo.restore_pending:
            await repo.open()  # finish a restore a crash cut short first
        ordered = await history(repo)
        return await hunk_revert.revert(repo, ordered, turn, turns, path, hunks, force=force)

    def stop(self) -> None:
        """The runtime is closing: kill the git processes running for it, start no more."""
        self._stopped = True
        if self._repo is not None:
            self._repo.stop()

    async def aclose(self) -> None:
        """Stop, then wait for the snapshots in flight to see it (their git is gone already:
        this is a moment, not the rest of a snapshot)."""
        self.stop()
        pending = [t for t in (self._opening, self._before, self._after) if t is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
