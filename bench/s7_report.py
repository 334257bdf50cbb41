"""Scenario 7's tables, targets and plot, from what bench/s7_repo.py and s7_turns.py measured."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench import plots, s7_trace
from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, fmt_ratio, ratio
from bench.s7_repo import (
    GIT_ADD,
    GIT_STATUS,
    HASH,
    READ,
    SNAPSHOT,
    SPAWN,
    SPAWN_ASYNC,
    STAT,
    RewindRun,
    SnapshotRun,
)
from bench.s7_trace import Call
from bench.s7_turns import HI, OFF, ON, PROMPTS, TurnRun

KEY = "7"
TITLE = "Checkpoints: snapshots and rewinds"
FAR_BELOW = 0.5  # "far less than the tree's size": at most half of reading every file
REWIND_BELOW = 1.0  # a rewind that reads more than the whole tree is not using git's caches
GROWTH_SLACK = 1.5  # the snapshot may grow with the tree this much faster than plain git's
STATUS_X = 1.5  # issue 17: a one-change snapshot at most this many times `git status`
SIZE_X = 2.0  # issue 17: a one-change snapshot of 10,000 files ≤ this × the 100-file one


@dataclass
class Measured:
    snapshots: dict[int, SnapshotRun]  # files in the tree -> run
    rewinds: RewindRun
    turns: TurnRun


Pick = Callable[[SnapshotRun], float]


def _p50(values: list[float]) -> float:
    return Stats.of(values).p50


def _merged(run: SnapshotRun, side: str) -> list[float]:
    return run.one[side] + run.none[side]


def describe(settings: Settings, m: Measured) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    sizes = sorted(m.snapshots)
    small, big = m.snapshots[sizes[0]], m.snapshots[sizes[-1]]
    read = {n: _p50(_merged(run, READ)) for n, run in m.snapshots.items()}
    result.tables.append(_snapshot_table(m, sizes, read))
    result.tables.append(_ratio_table(m, sizes))
    result.tables.append(_rewind_table(m.rewinds, big, read[big.files]))
    result.tables.append(_calls_table(m))
    result.tables.append(_turn_table(m.turns, big))
    _targets(result, m, small, big, read)
    result.plots.append(_plot(settings, m, sizes))
    one = _p50(big.one[SNAPSHOT])
    counts = m.rewinds.counts
    extra = [_p50(m.turns.ms[k][ON]) - _p50(m.turns.ms[k][OFF]) for k in PROMPTS]
    result.summary = (
        f"{big.files:,} files: a one-change snapshot {fmt(one)} ms = "
        f"{fmt_ratio(ratio(one, read[big.files]))} reading every file, "
        f"{fmt_ratio(ratio(one, _p50(small.one[SNAPSHOT])))} the {small.files:,}-file one; "
        f"rewind {' / '.join(fmt(_p50(m.rewinds.rewind[c])) for c in counts)} ms "
        f"({' / '.join(str(c) for c in counts)} files); with checkpoints a turn takes "
        f"+{' / '.join(fmt(x) for x in extra)} ms (no tool / a tool / a file written)"
    )
    _notes(result, m)
    result.raw = _raw(m)
    return result


def _raw(m: Measured) -> dict[str, object]:
    return {
        "snapshots_ms": {
            n: {
                "files": run.files,
                "bytes": run.size,
                "build_s": run.build_s,
                "first": run.first_ms,
                "git_first": run.git_first_ms,
                "one_change": {s: Stats.of(v).as_dict() for s, v in run.one.items()},
                "no_change": {s: Stats.of(v).as_dict() for s, v in run.none.items()},
                "git_calls": run.calls,
                "mismatched": run.mismatched,
                "skipped": run.skipped,
            }
            for n, run in m.snapshots.items()
        },
        "rewind_ms": {
            "files": m.rewinds.files,
            **{
                name: {c: Stats.of(v).as_dict() for c, v in by_count.items()}
                for name, by_count in (
                    ("rewind", m.rewinds.rewind),
                    ("git_checkout", m.rewinds.checkout),
                    ("turn_start", m.rewinds.before),
                    ("turn_end", m.rewinds.end),
                )
            },
            "git_calls": m.rewinds.calls,
        },
        "turn_ms": {
            "files": m.turns.files,
            "first": m.turns.first_ms,
            **{
                k: {s: Stats.of(v).as_dict() for s, v in by.items()} for k, by in m.turns.ms.items()
            },
        },
    }


def _snapshot_table(m: Measured, sizes: list[int], read: dict[int, float]) -> Table:
    rows: list[tuple[str, dict[int, list[float]]]] = []
    runs = m.snapshots
    rows.append(
        ("snapshot: the first (every file hashed)", {n: [r.first_ms] for n, r in runs.items()})
    )
    rows.append(("snapshot: one file changed", {n: r.one[SNAPSHOT] for n, r in runs.items()}))
    rows.append(("snapshot: nothing changed", {n: r.none[SNAPSHOT] for n, r in runs.items()}))
    rows.append((GIT_ADD + ": the first", {n: [r.git_first_ms] for n, r in runs.items()}))
    rows.append((GIT_ADD + ": one file changed", {n: r.one[GIT_ADD] for n, r in runs.items()}))
    rows.append((GIT_ADD + ": nothing changed", {n: r.none[GIT_ADD] for n, r in runs.items()}))
    for side in (GIT_STATUS, READ, HASH, STAT, SPAWN, SPAWN_ASYNC):
        rows.append((side, {n: _merged(r, side) for n, r in runs.items()}))
    headers = ["what"]
    for n in sizes:
        headers += [f"{n:,} files: p50 ms", "p99 ms", "÷ read all"]
    headers.append(f"{sizes[-1]:,} ÷ {sizes[0]:,} files")
    table_rows = []
    for name, by_size in rows:
        stats = {n: Stats.of(by_size[n]) for n in sizes}
        cells = [name]
        for n in sizes:
            cells += [fmt(stats[n].p50), fmt(stats[n].p99), fmt_ratio(ratio(stats[n].p50, read[n]))]
        cells.append(fmt_ratio(ratio(stats[sizes[-1]].p50, stats[sizes[0]].p50)))
        table_rows.append(cells)
    trees = ", ".join(f"{n:,} files ({runs[n].size / 1e6:.1f} MB)" for n in sizes)
    rounds = len(runs[sizes[0]].one[SNAPSHOT])
    return Table(
        f"Snapshots of a working tree of {trees}, ms: {rounds} rounds of one file changed "
        "since the last look, then nothing changed; the first snapshot once; floors and "
        "`git status` over both halves of every round",
        headers,
        table_rows,
    )  # fmt: skip


def _ratio_table(m: Measured, sizes: list[int]) -> Table:
    def one(r: SnapshotRun) -> float:
        return _p50(r.one[SNAPSHOT])

    def none(r: SnapshotRun) -> float:
        return _p50(r.none[SNAPSHOT])

    def floor(side: str) -> Pick:
        return lambda r: _p50(_merged(r, side))

    pairs: list[tuple[str, Pick, Pick]] = [
        ("one-change snapshot ÷ reading every file", one, floor(READ)),
        ("no-change snapshot ÷ reading every file", none, floor(READ)),
        ("one-change snapshot ÷ hashing every file", one, floor(HASH)),
        ("no-change snapshot ÷ the first snapshot (every file hashed)", none, lambda r: r.first_ms),
        ("one-change snapshot ÷ plain git add -A + write-tree", one, lambda r: _p50(r.one[GIT_ADD])),
        ("no-change snapshot ÷ plain git add -A + write-tree", none, lambda r: _p50(r.none[GIT_ADD])),
        ("one-change snapshot ÷ lstat of every file", one, floor(STAT)),
        ("one-change snapshot ÷ one git process (as run_git starts it)", one, floor(SPAWN_ASYNC)),
        ("first snapshot ÷ plain git's first add -A + write-tree", lambda r: r.first_ms, lambda r: r.git_first_ms),
    ]  # fmt: skip
    return Table(
        "Snapshot cost as ratios (p50s of the same rounds)",
        ["ratio", *(f"{n:,} files" for n in sizes)],
        [
            [name, *(fmt_ratio(ratio(top(m.snapshots[n]), under(m.snapshots[n]))) for n in sizes)]
            for name, top, under in pairs
        ],
    )


def _rewind_table(run: RewindRun, big: SnapshotRun, read: float) -> Table:
    one = _p50(big.one[SNAPSHOT])
    starts = [ms for count in run.counts for ms in run.before[count]]
    measured: list[tuple[str, list[float], float | None]] = []
    for count in run.counts:
        label = f"{count} file{'s' if count > 1 else ''}"
        git = _p50(run.checkout[count])
        measured += [
            (f"rewind of a turn that changed {label}", run.rewind[count], git),
            (f"plain git: checkout TREE -- {label} (the restore alone)", run.checkout[count], None),
            (f"turn end: after-snapshot + what changed ({label})", run.end[count], None),
        ]
    measured.append(("turn start: the before-snapshot", starts, None))
    rows = []
    for name, values, peer in measured:
        s = Stats.of(values)
        rows.append(
            [name, fmt(s.p50), fmt(s.p99), fmt_ratio(ratio(s.p50, read)), fmt_ratio(ratio(s.p50, one))]
            + [fmt_ratio(ratio(s.p50, peer)) if peer is not None else "--"]
        )  # fmt: skip
    return Table(
        f"Code rewind of one turn in the {run.files:,}-file tree (TurnCheckpoints.rewind), ms, "
        f"{len(run.rewind[run.counts[0]])} of each; the turn's edits change existing files",
        ["what", "p50 ms", "p99 ms", "÷ read all", "÷ one-change snapshot", "÷ git checkout"],
        rows,
    )


def _calls_table(m: Measured) -> Table:
    ops: list[tuple[str, list[float], list[list[Call]]]] = []
    for n, run in sorted(m.snapshots.items()):
        ops.append((f"snapshot, {n:,} files, one changed", run.one[SNAPSHOT], run.calls["one"]))
        ops.append((f"snapshot, {n:,} files, none changed", run.none[SNAPSHOT], run.calls["none"]))
    rw = m.rewinds
    starts = [ms for c in rw.counts for ms in rw.before[c]]
    ops.append(
        (
            f"turn start, {rw.files:,} files",
            starts,
            [x for c in rw.counts for x in rw.calls["start"][c]],
        )
    )
    for c in rw.counts:
        ops.append((f"turn end, {c} changed of {rw.files:,}", rw.end[c], rw.calls["end"][c]))
        ops.append(
            (f"rewind of a {c}-file turn, {rw.files:,} files", rw.rewind[c], rw.calls["rewind"][c])
        )
    rows = []
    for name, times, samples in ops:
        total, git = _p50(times), s7_trace.in_git_ms(samples)
        rows.append(
            [name, fmt(total), f"{s7_trace.processes(samples):g}", fmt(git), fmt(total - git)]
            + [s7_trace.by_command(samples)]
        )
    return Table(
        "Where the time goes: the git processes of each operation (p50 ms; every process "
        "the checkpoint code started, timed in this process)",
        ["operation", "p50 ms", "git processes", "in git", "outside git", "by command: ms"],
        rows,
    )


def _turn_table(run: TurnRun, big: SnapshotRun) -> Table:
    none = _p50(big.none[SNAPSHOT])
    rows = [
        ["the first turn with a tool ($ true)", fmt(run.first_ms[ON]), "--", fmt(run.first_ms[OFF]), "--",
         fmt_ratio(ratio(run.first_ms[ON], run.first_ms[OFF])),
         fmt(run.first_ms[ON] - run.first_ms[OFF]), fmt_ratio(ratio(run.first_ms[ON] - run.first_ms[OFF], none))],
    ]  # fmt: skip
    for kind, by_side in run.ms.items():
        on, off = Stats.of(by_side[ON]), Stats.of(by_side[OFF])
        rows.append(
            [kind, fmt(on.p50), fmt(on.p99), fmt(off.p50), fmt(off.p99), fmt_ratio(ratio(on.p50, off.p50)),
             fmt(on.p50 - off.p50), fmt_ratio(ratio(on.p50 - off.p50, none))]
        )  # fmt: skip
    turns = len(next(iter(run.ms.values()))[ON])
    return Table(
        f"A turn over stdio in a session whose cwd holds {run.files:,} files, `session/prompt` "
        f"to its answer, ms ({turns} of each kind per sidecar)",
        ["prompt", "on p50", "on p99", "off p50", "off p99", "on ÷ off", "on − off ms"]
        + ["(on − off) ÷ no-change snapshot"],
        rows,
    )


def _targets(
    result: ScenarioResult,
    m: Measured,
    small: SnapshotRun,
    big: SnapshotRun,
    read: dict[int, float],
) -> None:
    n = big.files
    for label, values in (("one-change", big.one[SNAPSHOT]), ("no-change", big.none[SNAPSHOT])):
        value = ratio(_p50(values), read[n])
        result.targets.append(
            Target(
                f"{label} snapshot of {n:,} files ÷ reading every file",
                f"≤ {FAR_BELOW:g}× (far less than the tree's size)",
                fmt_ratio(value),
                value <= FAR_BELOW,
                "" if value <= FAR_BELOW else _why_snapshot(big, label),
            )
        )
    grew = ratio(_p50(big.one[SNAPSHOT]), _p50(small.one[SNAPSHOT]))
    git_grew = ratio(_p50(big.one[GIT_ADD]), _p50(small.one[GIT_ADD]))
    result.targets.append(
        Target(
            f"one-change snapshot, {small.files:,} → {n:,} files",
            f"grows ≤ {GROWTH_SLACK:g}× plain git's growth ({fmt_ratio(git_grew)})",
            fmt_ratio(grew),
            grew <= GROWTH_SLACK * git_grew,
            ""
            if grew <= GROWTH_SLACK * git_grew
            else "The snapshot's cost grows faster with the tree than git's own add -A + "
            f"write-tree; its git processes at {n:,} files: {s7_trace.by_command(big.calls['one'])}.",
        )
    )
    status = ratio(_p50(big.one[SNAPSHOT]), _p50(_merged(big, GIT_STATUS)))
    result.targets.append(
        Target(
            f"one-change snapshot of {n:,} files ÷ plain `git status` on the same tree",
            f"≤ {STATUS_X:g}× (the floor)",
            fmt_ratio(status),
            status <= STATUS_X,
            "" if status <= STATUS_X else _why_status(big),
        )
    )
    result.targets.append(
        Target(
            f"one-change snapshot, {n:,} ÷ {small.files:,} files",
            f"≤ {SIZE_X:g}×",
            fmt_ratio(grew),
            grew <= SIZE_X,
            "" if grew <= SIZE_X else _why_size(small, big),
        )
    )
    for count in m.rewinds.counts:
        value = ratio(_p50(m.rewinds.rewind[count]), read[n])
        result.targets.append(
            Target(
                f"rewind of a {count}-file turn in {n:,} files ÷ reading every file",
                f"≤ {REWIND_BELOW:g}×",
                fmt_ratio(value),
                value <= REWIND_BELOW,
                "" if value <= REWIND_BELOW else _why_rewind(m.rewinds, count),
            )
        )


def _why_status(big: SnapshotRun) -> str:
    return (
        f"`git status` is one git process and one pass over the tree; the snapshot is "
        f"{s7_trace.processes(big.calls['one']):g} processes: "
        f"{s7_trace.by_command(big.calls['one'])}. The listing (`ls-files --others "
        "--modified`, ShadowRepo._refresh_skipped) is the pass `git status` makes; "
        "`update-index` (only the listed paths) and `write-tree` each read and write the "
        "whole index again. What would close it: one process that stages and writes the "
        "tree (e.g. a long-lived `git` via libgit2/pygit2 holding the index in memory)."
    )


def _why_size(small: SnapshotRun, big: SnapshotRun) -> str:
    status = ratio(_p50(_merged(big, GIT_STATUS)), _p50(_merged(small, GIT_STATUS)))
    return (
        f"Every snapshot still walks the whole tree: plain `git status` itself grows "
        f"{fmt_ratio(status)} from {small.files:,} to {big.files:,} files here, and at "
        f"{small.files:,} files the snapshot is mostly process starts "
        f"({s7_trace.by_command(small.calls['one'])}). A cost flat in the tree's size "
        "needs change notification instead of a walk: git's fsmonitor hook (its built-in "
        "daemon does not run on Linux; watchman does) or the sidecar's own inotify watch "
        "of the cwd naming the changed paths."
    )


def _why_snapshot(big: SnapshotRun, label: str) -> str:
    half = big.one if label == "one-change" else big.none
    calls = big.calls["one" if label == "one-change" else "none"]
    return (
        f"The snapshot costs {fmt_ratio(ratio(_p50(half[SNAPSHOT]), _p50(half[GIT_ADD])))} "
        f"plain git's add -A + write-tree on the same tree; its git processes: "
        f"{s7_trace.by_command(calls)}. Every one of them reads the index, and the listing "
        "(ShadowRepo._refresh_skipped: ls-files) stats the whole tree; every "
        "32nd snapshot (and one whose exclusions changed) stages with a whole add -A pass."
    )


def _why_rewind(run: RewindRun, count: int) -> str:
    samples = run.calls["rewind"][count]
    plain = _p50(run.checkout[count])
    return (
        f"{s7_trace.processes(samples):g} git processes per rewind, the costliest: "
        f"{s7_trace.by_command(samples, top=4)}. The restore itself is `git checkout TREE "
        f"-- PATHS` of the {count} files (ShadowRepo._apply), and plain git's own checkout "
        f"of them takes {fmt(plain)} ms on the same tree: writing the files back is most of "
        "it. Around it the rewind snapshots the tree first (TurnCheckpoints.rewind: one "
        "listing pass over every file's stat) and writes the tree after."
    )


def _notes(result: ScenarioResult, m: Measured) -> None:
    for n, run in m.snapshots.items():
        if run.mismatched:
            result.notes.append(
                f"**{n:,} files: in {run.mismatched} rounds the snapshot's tree was not plain "
                "git's `write-tree` of the same files.**"
            )
        if run.skipped:
            result.notes.append(f"{n:,} files: the snapshots left {run.skipped} files out.")
        result.notes.append(f"{n:,}-file tree written in {run.build_s:.1f} s.")
    for problem in m.rewinds.problems + m.turns.problems:
        result.notes.append(f"**Problem:** {problem}")
    result.notes.append(
        "Plain git runs with its default config over the same tree, its GIT_DIR (and "
        "index) outside it; the snapshot runs as the sidecar runs it (asyncio subprocesses, "
        "its own settings: untracked cache on, literal pathspecs, no optional locks)."
    )
    hi = _p50(m.turns.ms[HI][ON]) - _p50(m.turns.ms[HI][OFF])
    none = _p50(m.snapshots[max(m.snapshots)].none[SNAPSHOT])
    result.notes.append(
        f"A turn without a tool still waits for its before-snapshot (`hi`: +{fmt(hi)} ms, "
        f"{fmt_ratio(ratio(hi, none))} a no-change snapshot): the answer to `session/prompt` "
        "comes after the turn's end checkpoint, which waits for the before-snapshot; the "
        "first turn's waits for the first snapshot of the whole tree."
    )


def _plot(settings: Settings, m: Measured, sizes: list[int]) -> str:
    runs = m.snapshots
    groups = ["first", "one change", "no change", "git add -A (1 change)", "git status"]
    groups += ["read every file", "hash every file", "lstat every file", "git --version"]
    groups += ["run_git --version"]
    series = {
        f"{n:,} files": [
            runs[n].first_ms,
            _p50(runs[n].one[SNAPSHOT]),
            _p50(runs[n].none[SNAPSHOT]),
            _p50(runs[n].one[GIT_ADD]),
            _p50(_merged(runs[n], GIT_STATUS)),
            _p50(_merged(runs[n], READ)),
            _p50(_merged(runs[n], HASH)),
            _p50(_merged(runs[n], STAT)),
            _p50(_merged(runs[n], SPAWN)),
            _p50(_merged(runs[n], SPAWN_ASYNC)),
        ]
        for n in sizes
    }
    counts = m.rewinds.counts
    turn_groups = [f"rewind, {c} file{'s' if c > 1 else ''}" for c in counts]
    turn_groups += [f"turn: {k.split('(')[-1].rstrip(')')}" for k in PROMPTS]
    sidecar = [_p50(m.rewinds.rewind[c]) for c in counts]
    sidecar += [_p50(m.turns.ms[k][ON]) for k in PROMPTS]
    peer = [_p50(m.rewinds.checkout[c]) for c in counts]
    peer += [_p50(m.turns.ms[k][OFF]) for k in PROMPTS]
    return plots.bar_panels(
        settings.out / "s7_checkpoints.png",
        {
            "Snapshots (p50 ms)": (groups, series, "ms (log)"),
            f"{m.rewinds.files:,} files: rewinds and turns (p50 ms)": (
                turn_groups,
                {"sidecar (checkpoints on)": sidecar, "git checkout / --no-checkpoints": peer},
                "ms (log)",
            ),
        },
    )
