"""Scenario 12: a session's git worktree -- what making one costs beside plain `git
worktree add`, and what the branch's diff (parsed into files and hunks) costs beside plain
`git diff base...branch`.

One real repository of 10,000 files (bench/s7_trees.py's source-like files, one commit;
the smoke size 300) and the real git. Our side is the sidecar's own code in this process:
`sidecar.worktrees.manager.create` (the call `session/new` with `_meta.worktree` makes) and
`manager.diff` of the whole branch; the peer is git itself from this process
(`subprocess.run`, output read whole), in alternated rounds whose order is shuffled, so a
noisy neighbour hurts both sides alike. Each worktree is removed (untimed) before the next
is made. Then one traced round of each operation counts its git processes. Tables,
targets and plot: bench/s12_report.py.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import time
from pathlib import Path

from bench import s7_trees
from bench.core import ScenarioResult, Settings
from bench.s12_report import KEY, OURS, PLAIN, STATUS, TITLE, Measured, describe
from bench.s12_trace import GitTrace
from sidecar.worktrees import manager
from sidecar.worktrees.git import git_binary

WHO = ("-c", "user.name=bench", "-c", "user.email=bench@localhost")


def run(settings: Settings) -> ScenarioResult:
    if shutil.which("git") is None:
        return ScenarioResult(KEY, TITLE, skipped="git is not installed (worktrees need it)")
    files = settings.pick(300, 10_000, 10_000)
    changed = settings.pick(10, 100, 100)
    work = settings.work / "s12"
    shutil.rmtree(work, ignore_errors=True)  # a kept --work: every repository starts afresh
    work.mkdir(parents=True)
    measured = Measured(files=files, changed=changed)
    repo = _repository(work / "repo", files, settings.rng(f"{KEY}/tree"), measured)
    asyncio.run(
        _measure(
            repo,
            work,
            settings.rng(KEY),
            measured,
            creations=settings.pick(3, 5, 9),
            diffs=settings.pick(5, 15, 31),
        )
    )
    return describe(settings, measured)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [git_binary(), *args], cwd=cwd, capture_output=True, check=True, text=True
    )
    return done.stdout


def _repository(root: Path, files: int, rng: random.Random, m: Measured) -> Path:
    started = time.perf_counter()
    tree = s7_trees.build(root, files, rng)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, *WHO, "commit", "-q", "--no-verify", "-m", "the tree")
    m.tree_bytes = tree.size
    m.build_s = time.perf_counter() - started
    return root


async def _measure(
    repo: Path, work: Path, rng: random.Random, m: Measured, *, creations: int, diffs: int
) -> None:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    trees = work / "trees"
    trees.mkdir()
    for r in range(creations):
        sides = [OURS, PLAIN]
        rng.shuffle(sides)
        for side in sides:
            name = f"{'ours' if side == OURS else 'plain'}{r:03d}"
            took, branch = await _create(side, repo, trees / name, name, commit)
            m.create_ms[side].append(took)
            _remove(repo, trees / name, branch)
    m.floor_ms = [_version_ms() for _ in range(max(5, creations))]
    wt = _changed_branch(repo, work / "change", m.changed, m)
    for _ in range(diffs):
        sides = [OURS, PLAIN, STATUS]
        rng.shuffle(sides)
        for side in sides:
            if side == OURS:
                took = await _diff_ours(wt, m)
            else:
                took = _diff_plain(wt, m) if side == PLAIN else _status_ms(wt)
            m.diff_ms[side].append(took)
    with GitTrace().installed() as trace:
        name = "traced"
        m.create_traced_ms, branch = await _create(OURS, repo, trees / name, name, commit)
        m.create_trace = trace.take()
        _remove(repo, trees / name, branch)
        m.diff_traced_ms = await _diff_ours(wt, m)
        m.diff_trace = trace.take()


async def _create(side: str, repo: Path, path: Path, name: str, commit: str) -> tuple[float, str]:
    """(ms, its branch) to make a worktree of `repo` at `path` on a new branch, one
    side's way."""
    started = time.perf_counter_ns()
    if side == OURS:
        made = await manager.create(str(repo), path=str(path), session_short_id=name)
        branch = made.branch
    else:
        branch = f"plain/{name}"
        _git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), commit)
    return (time.perf_counter_ns() - started) / 1e6, branch


def _remove(repo: Path, path: Path, branch: str) -> None:
    _git(repo, "worktree", "remove", "--force", str(path))
    _git(repo, "branch", "-D", "--quiet", branch)


def _changed_branch(repo: Path, path: Path, count: int, m: Measured) -> manager.Worktree:
    """A worktree whose branch changes `count` files spread over the tree (a line
    replaced in the middle and one appended: two hunks a file), committed."""
    _git(repo, "worktree", "add", "--quiet", "-b", "change", str(path), "main")
    files = sorted(p for p in path.rglob("*.py"))
    step = max(1, len(files) // count)
    for file in files[::step][:count]:
        lines = file.read_text().splitlines(keepends=True)
        middle = len(lines) // 2
        lines[middle] = "    changed_by_the_session = True\n"
        file.write_text("".join(lines) + "# appended by the session\n")
    _git(path, "add", "-A")
    _git(path, *WHO, "commit", "-q", "--no-verify", "-m", "the session's change")
    m.changed_hunks = _git(path, "diff", "main...change").count("\n@@ ")
    return manager.Worktree(repo=str(repo), path=str(path), branch="change", base="main")


async def _diff_ours(wt: manager.Worktree, m: Measured) -> float:
    """ms for the branch's whole diff against its base, parsed into files and hunks."""
    started = time.perf_counter_ns()
    files, following = await manager.diff(wt, cursor=0, limit=1_000_000)
    took = (time.perf_counter_ns() - started) / 1e6
    hunks = sum(len(f.hunks) for f in files)
    if len(files) != m.changed or following is not None or hunks != m.changed_hunks:
        m.problems.append(
            f"manager.diff gave {len(files)} files and {hunks} hunks; the change has "
            f"{m.changed} files and {m.changed_hunks} hunks"
        )
    return took


def _diff_plain(wt: manager.Worktree, m: Measured) -> float:
    """ms for plain `git diff base...branch`, its output read whole."""
    started = time.perf_counter_ns()
    done = subprocess.run(
        [git_binary(), "diff", f"{wt.base}...{wt.branch}"],
        cwd=wt.path,
        capture_output=True,
        check=True,
    )
    took = (time.perf_counter_ns() - started) / 1e6
    m.plain_diff_bytes = len(done.stdout)
    return took


def _status_ms(wt: manager.Worktree) -> float:
    """ms for `git status --porcelain` in the worktree: one pass over its files."""
    started = time.perf_counter_ns()
    subprocess.run(
        [git_binary(), "status", "--porcelain"], cwd=wt.path, capture_output=True, check=True
    )
    return (time.perf_counter_ns() - started) / 1e6


def _version_ms() -> float:
    """One git process started and waited for: the least any git call costs."""
    started = time.perf_counter_ns()
    subprocess.run([git_binary(), "--version"], capture_output=True, check=True)
    return (time.perf_counter_ns() - started) / 1e6
