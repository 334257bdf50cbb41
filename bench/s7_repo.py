"""Scenario 7, in-process part: the sidecar's own checkpoint code on a real tree and git.

Snapshots: `ShadowRepo.snapshot()` (sidecar/checkpoints/shadow.py) over trees from
bench/s7_trees.py, with a watch of the tree as a runtime's checkpoints keep one: the
first one (every file hashed and stored; the watch started) once, then rounds of "one
file changed since the last look" and "nothing changed", the trees' rounds interleaved. In every round, in a shuffled
order, the same tree is also read, hashed (not past 10,000 files: seconds each time)
and `lstat`ed whole, and snapshotted by plain git (`add -A` + `write-tree`, `status
--porcelain`; each with its own index), so each side sees the same change and a noisy
neighbour hurts them alike. The plain repository's tree must be the snapshot's own
(same files, same ignore rules): a difference is counted and reported. How many of the
timed snapshots came from the watch and how many walked the tree is counted too.

Rewinds: `TurnCheckpoints` (sidecar/core/checkpointing.py) as a runtime drives it, a
before-snapshot (`begin`, `ready`), the turn's edits, the after-snapshot (`end`), then
`rewind(turn)` timed; against it, plain git's `checkout TREE -- PATHS` of the same files
(the restore alone), the two taking turns first and the turn's edits written again in
between.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.s7_trace import Call, GitTrace
from bench.s7_trees import PlainGit, Tree, read_tree_ms, stat_tree_ms
from sidecar.checkpoints.git import run_git
from sidecar.checkpoints.shadow import ShadowRepo
from sidecar.checkpoints.store import DEFAULT_MAX_FILE_BYTES, CheckpointStore
from sidecar.core.checkpointing import TurnCheckpoints
from sidecar.fs.tree_watch import WatchBudget

SNAPSHOT = "snapshot (ShadowRepo.snapshot)"
GIT_ADD = "plain git: add -A + write-tree"
GIT_STATUS = "plain git: status --porcelain"
READ = "floor: read every file once"
STAT = "floor: lstat every file"
HASH = "floor: hash every file (git hash-object, nothing stored)"
SPAWN = "floor: one git process (git --version)"
SPAWN_ASYNC = "floor: one git process as the sidecar starts one (run_git)"
SIDES = (SNAPSHOT, GIT_ADD, GIT_STATUS, READ, HASH, STAT, SPAWN, SPAWN_ASYNC)


@dataclass
class SnapshotRun:
    files: int
    size: int  # bytes
    build_s: float
    first_ms: float  # the first snapshot: every file hashed and written
    git_first_ms: float  # plain git's first add -A + write-tree
    one: dict[str, list[float]] = field(default_factory=dict)  # side -> ms
    none: dict[str, list[float]] = field(default_factory=dict)
    # The git processes of every snapshot timed: "one" (one file changed), "none".
    calls: dict[str, list[list[Call]]] = field(default_factory=dict)
    skipped: int = 0  # files the snapshots left out (none are meant to be)
    mismatched: int = 0  # rounds whose snapshot was not plain git's tree
    from_watch: int = 0  # timed snapshots taken from the watch
    walks: int = 0  # timed snapshots that walked the tree


def _ms_since(started: int) -> float:
    return (time.perf_counter_ns() - started) / 1e6


Probe = Callable[[], Awaitable[tuple[float, str | None]]]  # -> (ms, a tree id or None)


def _probes(
    repo: ShadowRepo,
    git: str,
    adder: PlainGit,
    status: PlainGit,
    files: list[str],
    hashing: bool,
) -> dict[str, Probe]:
    root = Path(repo.work_tree)

    async def snapshot() -> tuple[float, str | None]:
        started = time.perf_counter_ns()
        tree = (await repo.snapshot()).tree
        return _ms_since(started), tree

    async def spawn() -> tuple[float, str | None]:
        started = time.perf_counter_ns()
        await run_git(git, repo.git_dir, repo.work_tree, ["--version"])
        return _ms_since(started), None

    async def blocking(fn: Callable[[], float]) -> tuple[float, str | None]:
        return fn(), None

    async def add() -> tuple[float, str | None]:
        return adder.add_ms()

    probes: dict[str, Probe] = {
        SNAPSHOT: snapshot,
        GIT_ADD: add,
        GIT_STATUS: lambda: blocking(status.status_ms),
        READ: lambda: blocking(lambda: read_tree_ms(root)),
        HASH: lambda: blocking(lambda: adder.hash_all_ms(files)),
        STAT: lambda: blocking(lambda: stat_tree_ms(root)),
        SPAWN: lambda: blocking(adder.version_ms),
        SPAWN_ASYNC: spawn,
    }
    if not hashing:
        del probes[HASH]
    return probes


@dataclass
class _Sized:
    """One tree's snapshot measuring: its repositories, its probes, what was measured."""

    tree: Tree
    repo: ShadowRepo
    probes: dict[str, Probe]
    run: SnapshotRun
    rounds: int


async def snapshots(
    trees: list[tuple[Tree, Path, int, bool]], git: str, rng: random.Random
) -> dict[int, SnapshotRun]:
    """Each (tree, scratch dir, rounds, hashing) set up, then their rounds interleaved: a
    round of every tree in turn (shuffled), so a load that drifts over the run weighs on
    each size alike and a ratio between sizes stays fair. `hashing`: time the "hash every
    file" floor too (seconds a round past 10,000 files)."""
    with GitTrace().installed() as trace:
        sized: list[_Sized] = []
        try:
            for tree, scratch, rounds, hashing in trees:
                sized.append(await _prepared(tree, git, scratch, rounds, hashing, rng, trace))
            counts = {id(s): (s.repo.walks, s.repo.from_watch) for s in sized}
            for n in range(max(s.rounds for s in sized)):
                order = [s for s in sized if n < s.rounds]
                rng.shuffle(order)
                for one in order:
                    run = one.run
                    one.tree.edit(rng.choice(one.tree.files))
                    run.mismatched += await _round(
                        one.probes, rng, run.one, run.calls["one"], trace
                    )
                    run.mismatched += await _round(
                        one.probes, rng, run.none, run.calls["none"], trace
                    )
            for one in sized:
                walks, watched = counts[id(one)]
                one.run.walks = one.repo.walks - walks
                one.run.from_watch = one.repo.from_watch - watched
            return {s.run.files: s.run for s in sized}
        finally:
            for one in sized:
                one.repo.stop()  # its watch closed


async def _prepared(
    tree: Tree,
    git: str,
    scratch: Path,
    rounds: int,
    hashing: bool,
    rng: random.Random,
    trace: GitTrace,
) -> _Sized:
    repo = ShadowRepo(
        scratch / "shadow", str(tree.root), DEFAULT_MAX_FILE_BYTES, git, watch=WatchBudget()
    )
    await repo.open()
    started = time.perf_counter_ns()
    first = await repo.snapshot()
    first_ms = _ms_since(started)
    adder = PlainGit(git, scratch / "plain-add.git", tree.root)
    git_first_ms, _ = adder.add_ms()
    # Its index filled as the adder's is: status compares against it.
    status = adder.copy(scratch / "plain-status.git")
    run = SnapshotRun(len(tree.files), tree.size, tree.build_s, first_ms, git_first_ms)
    run.skipped = len(first.skipped)
    probes = _probes(repo, git, adder, status, [*tree.files, ".gitignore"], hashing)
    run.one = {side: [] for side in probes}
    run.none = {side: [] for side in probes}
    run.calls = {"one": [], "none": []}
    await _round(probes, rng, {side: [] for side in probes}, [], trace)  # warm-up
    return _Sized(tree, repo, probes, run, rounds)


async def _round(
    probes: dict[str, Probe],
    rng: random.Random,
    into: dict[str, list[float]],
    calls: list[list[Call]],
    trace: GitTrace,
) -> int:
    """Every side once, in a shuffled order; 1 if the snapshot was not git's tree."""
    order = list(probes)
    rng.shuffle(order)
    trees: dict[str, str | None] = {}
    for side in order:
        trace.take()
        took, trees[side] = await probes[side]()
        into[side].append(took)
        if side == SNAPSHOT:
            calls.append(trace.take())
    return int(trees[SNAPSHOT] != trees[GIT_ADD])


@dataclass
class RewindRun:
    files: int  # in the tree
    counts: list[int]  # files a turn changed
    rewind: dict[int, list[float]] = field(default_factory=dict)  # count -> ms
    checkout: dict[int, list[float]] = field(default_factory=dict)  # plain git, ms
    before: dict[int, list[float]] = field(default_factory=dict)  # begin + ready, ms
    end: dict[int, list[float]] = field(default_factory=dict)  # end (snapshot + changes)
    # The git processes of each timed operation: "rewind" / "start" / "end" -> count -> ...
    calls: dict[str, dict[int, list[list[Call]]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


async def rewinds(
    tree: Tree, git: str, scratch: Path, rng: random.Random, rounds: int, counts: list[int]
) -> RewindRun:
    with GitTrace().installed() as trace:
        return await _rewinds(tree, git, scratch, rng, rounds, counts, trace)


async def _rewinds(
    tree: Tree,
    git: str,
    scratch: Path,
    rng: random.Random,
    rounds: int,
    counts: list[int],
    trace: GitTrace,
) -> RewindRun:
    store = CheckpointStore(scratch / "checkpoints", DEFAULT_MAX_FILE_BYTES, git)
    checkpoints = TurnCheckpoints(store, "bench-rewind", str(tree.root))
    checkpoints.start_opening(0)
    peer = PlainGit(git, scratch / "plain-rewind.git", tree.root)
    peer.add_ms()
    run = RewindRun(len(tree.files), counts)
    for into in (run.rewind, run.checkout, run.before, run.end):
        into.update({count: [] for count in counts})
    run.calls = {op: {count: [] for count in counts} for op in ("rewind", "start", "end")}
    # Turn 1 takes the first snapshot (every file hashed): not what is measured here.
    checkpoints.begin(1)
    await checkpoints.ready()
    await checkpoints.end(1)
    turn = 1
    order = list(counts)
    try:
        for _ in range(rounds):
            rng.shuffle(order)
            for count in order:
                turn += 1
                await _rewound_turn(checkpoints, peer, tree, rng, turn, count, run, trace)
    finally:
        await checkpoints.aclose()
    if checkpoints.problem:
        run.problems.append(f"the checkpoints report: {checkpoints.problem}")
    return run


async def _rewound_turn(
    checkpoints: TurnCheckpoints,
    peer: PlainGit,
    tree: Tree,
    rng: random.Random,
    turn: int,
    count: int,
    run: RewindRun,
    trace: GitTrace,
) -> None:
    trace.take()
    started = time.perf_counter_ns()
    checkpoints.begin(turn)
    await checkpoints.ready()
    run.before[count].append(_ms_since(started))
    run.calls["start"][count].append(trace.take())
    _, peer_before = peer.add_ms()
    paths = sorted(rng.sample(tree.files, count))
    edited = {path: tree.edit(path) for path in paths}
    trace.take()
    started = time.perf_counter_ns()
    changes = await checkpoints.end(turn)
    run.end[count].append(_ms_since(started))
    run.calls["end"][count].append(trace.take())
    if changes is None or changes.total != count:
        seen = changes.total if changes is not None else "no change"
        run.problems.append(f"turn {turn}: {count} files changed, the checkpoints saw {seen}")
    sides = ["sidecar", "git"]
    rng.shuffle(sides)
    for index, side in enumerate(sides):
        if index:  # the first side undid the turn: its edits again, for the second
            for path, content in edited.items():
                (tree.root / path).write_bytes(content)
        if side == "git":
            run.checkout[count].append(peer.checkout_ms(peer_before, paths))
            continue
        trace.take()
        started = time.perf_counter_ns()
        done = await checkpoints.rewind(turn, turn, force=False, dry_run=False)
        run.rewind[count].append(_ms_since(started))
        run.calls["rewind"][count].append(trace.take())
        if len(done.restored) != count or done.conflicts or done.removed:
            run.problems.append(
                f"turn {turn}: rewind restored {len(done.restored)} of {count} files "
                f"({len(done.conflicts)} conflicts, {len(done.removed)} removed)"
            )
