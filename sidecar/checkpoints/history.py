"""A session's checkpoints as an ordered history, and what a rewind may do with it.

Refs name the checkpoints: `refs/turns/<n>/before` and `/after` around turn n, and
`refs/rewinds/<turns>/<k>/before` and `/after` around the k-th code rewind (made when
the session had `<turns>` turns). Ordered, they are the session's steps; every change
the session made to a file is some step's before -> after.

A rewind to a point restores each file the steps since that point changed, unless the
file changed again outside the session since the session last changed it (a user's
edit): that is a conflict, left alone unless forced. What was left out (skipped files, a
data dir of ours that an older snapshot took in) is never listed as changed or restored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from sidecar.checkpoints.shadow import RestorePlan, ShadowRepo
from sidecar.domain.errors import CheckpointError
from sidecar.domain.files import Conflict, FileStatus, Skipped, TurnChanges

MAX_FILES: Final = 1000  # files listed per turn (the total is always given)
READS_AT_ONCE: Final = 4  # git processes a rewind's plan runs at once
CHANGED_OUTSIDE: Final = "changed outside the session since the session last changed it"

T = TypeVar("T")
StepKey = tuple[int, int, int]  # (turn, 0, 0) for a turn; (turns, 1, k) for a rewind


def turn_ref(turn: int, end: str) -> str:
    return f"refs/turns/{turn}/{end}"


def rewind_ref(turns: int, number: int) -> str:
    return f"refs/rewinds/{turns}/{number}"


@dataclass(frozen=True, slots=True)
class Step:
    key: StepKey
    before: str | None
    after: str | None

    @property
    def is_rewind(self) -> bool:
        return self.key[1] == 1


def steps(refs: dict[str, str]) -> list[Step]:
    """The steps the refs describe, in the order they happened."""
    ends: dict[StepKey, dict[str, str]] = {}
    for name, oid in refs.items():
        parts = name.split("/")
        if len(parts) == 4 and parts[1] == "turns" and parts[2].isdigit():
            key: StepKey = (int(parts[2]), 0, 0)
        elif (
            len(parts) == 5 and parts[1] == "rewinds" and parts[2].isdigit() and parts[3].isdigit()
        ):
            key = (int(parts[2]), 1, int(parts[3]))
        else:
            continue
        ends.setdefault(key, {})[parts[-1]] = oid
    return [
        Step(key, found.get("before"), found.get("after")) for key, found in sorted(ends.items())
    ]


async def history(repo: ShadowRepo) -> list[Step]:
    return steps(await repo.refs("refs/turns/", "refs/rewinds/"))


def end_of(ordered: list[Step], index: int, current: str | None) -> str | None:
    """A step's after tree; for one cut short (a crash), the next step's before, or now."""
    step = ordered[index]
    if step.after is not None:
        return step.after
    for later in ordered[index + 1 :]:
        if later.before is not None:
            return later.before
    return current


def uncovered(turn: int, first: int) -> str:
    return (
        f"turn {turn} has no checkpoints: this session's checkpoints begin at turn {first} "
        "(it was forked into another directory, or is older than checkpoints)"
    )


async def turn_changes(
    repo: ShadowRepo, turn: int, *, current: str | None, with_diff: bool
) -> TurnChanges:
    """What turn `turn` changed: its before checkpoint against its end. A turn without
    checkpoints ran no tool (they are taken before the first one): it changed nothing."""
    if turn < repo.first_turn():
        raise CheckpointError(uncovered(turn, repo.first_turn()))
    ordered = await history(repo)
    index = next((i for i, s in enumerate(ordered) if s.key == (turn, 0, 0)), None)
    if index is None or ordered[index].before is None:
        return TurnChanges(turn, (), 0, "" if with_diff else None)
    before = ordered[index].before
    assert before is not None
    after = end_of(ordered, index, current)
    if after is None:
        raise CheckpointError(
            f"turn {turn} has no end checkpoint yet (it is running, or was interrupted: "
            "resuming the session records it)"
        )
    files = await repo.changes(before, after)
    skipped = repo.skipped()
    # A file that grew past the size limit left the snapshots: not a deletion. A data dir
    # of ours (an older snapshot's) is never a change of the session's.
    ours = repo.stores()
    files = [
        f
        for f in files
        if not (f.status is FileStatus.DELETED and f.path in skipped)
        and not f.path.startswith(ours)
    ]
    diff, cut = (await repo.diff(before, after)) if with_diff else (None, False)
    left_out = tuple(Skipped(path, reason) for path, reason in sorted(skipped.items()))
    return TurnChanges(turn, tuple(files[:MAX_FILES]), len(files), diff, cut, left_out[:MAX_FILES])


@dataclass(frozen=True, slots=True)
class RewindPlan:
    restore: tuple[str, ...]
    delete: tuple[str, ...]
    conflicts: tuple[Conflict, ...]
    wanted: dict[str, str] = field(default_factory=dict)  # restored path -> "mode oid"


async def last_writers(
    repo: ShadowRepo, ordered: list[Step], since: StepKey, current: str | None
) -> tuple[dict[str, str], bool]:
    """path -> the tree of the session's last change to it, for the steps from `since` on;
    and whether every step's end was known (without `current`, a step cut short by a crash
    has none: it is left out, and False says so)."""
    steps_since: list[tuple[str, str]] = []  # (before, after) of each step that changed files
    whole = True
    for index, step in enumerate(ordered):
        if step.key < since or step.before is None:
            continue
        after = end_of(ordered, index, current)
        whole = whole and after is not None
        if after is not None and after != step.before:
            steps_since.append((step.before, after))
    changed = await _together([repo.changed_paths(b, a) for b, a in steps_since])
    last_writer: dict[str, str] = {}
    for (_before, after), paths in zip(steps_since, changed, strict=True):
        for path in paths:
            last_writer[path] = after
    return last_writer, whole


async def plan_rewind(
    repo: ShadowRepo,
    last_writer: dict[str, str],
    target: str,
    current: str,
    *,
    force: bool,
) -> RewindPlan:
    """Bring back `target` for every file the steps since changed (`last_writers`)."""
    skipped = repo.skipped()
    ours = repo.stores()
    touched = sorted(p for p in last_writer if p not in skipped and not p.startswith(ours))
    by_tree: dict[str, list[str]] = {}
    for path in touched:
        by_tree.setdefault(last_writer[path], []).append(path)
    now, wanted, *left = await _together(
        [
            repo.entries(current, touched),
            repo.entries(target, touched),
            *(repo.entries(tree, paths) for tree, paths in by_tree.items()),
        ]
    )
    session_left: dict[str, str] = {}
    for found in left:
        session_left.update(found)
    restore: list[str] = []
    delete: list[str] = []
    conflicts: list[Conflict] = []
    for path in touched:
        if now.get(path) == wanted.get(path):
            continue  # already as it was
        if now.get(path) != session_left.get(path):
            conflicts.append(Conflict(path, CHANGED_OUTSIDE))
            if not force:
                continue
        (restore if path in wanted else delete).append(path)
    return RewindPlan(
        tuple(restore), tuple(delete), tuple(conflicts), {p: wanted[p] for p in restore}
    )


async def _together(reads: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Independent reads of the repository (a git process each), a few at a time: a
    rewind waits for the slowest, not for their sum."""
    room = asyncio.Semaphore(READS_AT_ONCE)

    async def one(read: Coroutine[Any, Any, T]) -> T:
        async with room:
            return await read

    return list(await asyncio.gather(*(one(read) for read in reads)))


def next_rewind_number(ordered: list[Step]) -> int:
    return 1 + max((s.key[2] for s in ordered if s.is_rewind), default=0)


def restore_plan(
    plan: RewindPlan, target: str, turns: int, number: int, before: str
) -> RestorePlan:
    """`before`: the tree now (what the restore changes, recorded as `<ref>/before`)."""
    return RestorePlan(
        target, plan.restore, plan.delete, rewind_ref(turns, number), before, plan.wanted
    )
