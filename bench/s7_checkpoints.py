"""Scenario 7: checkpoints -- what a snapshot of the session's working tree costs at 100
to 100,000 files, what a code rewind costs, and what checkpoints add to a turn.

Real files in the scratch dir (bench/s7_trees.py) and the real git, driven through the
sidecar's own code in this process (bench/s7_repo.py: `ShadowRepo` with a watch of the
tree, `TurnCheckpoints`), each figure beside floors and plain git timed in the same
rounds; then two real sidecars over stdio, checkpoints on and off, on the 10,000-file
tree (bench/s7_turns.py). Each tree is written once per run. Tables, targets and plot:
bench/s7_report.py.
"""

from __future__ import annotations

import asyncio
import shutil

from bench import s7_repo, s7_trees, s7_turns
from bench.core import ScenarioResult, Settings
from bench.s7_report import KEY, TITLE, Measured, describe
from sidecar.checkpoints.git import git_binary


def run(settings: Settings) -> ScenarioResult:
    git = git_binary()
    if git is None:
        return ScenarioResult(KEY, TITLE, skipped="git is not installed (checkpoints need it)")
    sizes = settings.pick([20, 200], [100, 1_000, 10_000], [100, 1_000, 10_000, 100_000])
    rewound = settings.pick(200, 10_000, 10_000)  # the tree rewinds and turns run in
    rounds = settings.pick(2, 9, 21)
    # Past 10,000 files every round reads the whole tree (and plain git walks it): fewer.
    big_rounds = settings.pick(2, 5, 9)
    counts = settings.pick([1, 10], [1, 100], [1, 100])
    turn_rounds = settings.pick(2, 8, 20)
    work = settings.work / "s7"
    shutil.rmtree(work, ignore_errors=True)  # a kept --work: every snapshot starts empty
    rng = settings.rng(KEY)
    trees = {
        n: s7_trees.build(work / f"tree-{n}", n, settings.rng(f"{KEY}/tree/{n}")) for n in sizes
    }
    snapshots = asyncio.run(
        s7_repo.snapshots(
            [
                (tree, settings.scratch(f"s7/git-{n}"), rounds if n <= 10_000 else big_rounds,
                 n <= 10_000)
                for n, tree in trees.items()
            ],
            git, rng,
        )
    )  # fmt: skip
    rewinds = asyncio.run(
        s7_repo.rewinds(trees[rewound], git, settings.scratch("s7/git-rewind"), rng, rounds, counts)
    )
    turns = s7_turns.measure(
        settings.scratch("s7/turns"), f"{settings.seed}:{KEY}/tree/{rewound}",
        rewound, turn_rounds, rng,
    )  # fmt: skip
    return describe(settings, Measured(snapshots, rewinds, turns))
