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
STATUS_X = 0.5  # issue 26: a one-change snapshot at most this many times `git status`
FLAT_X = 1.5  # issue 26: a one-change snapshot of 100,000 files ≤ this × the 1,000-file one
FLAT_FROM = 1_000  # ... measured against this size (the smallest one when absent)
SIZE_X = 2.0  # issue 17: a one-change snapshot of 10,000 files ≤ this × the 100-file one


@dataclass
class Measured:
    snapshots: dict[int, SnapshotRun]  # files in the tree -> run
    rewinds: RewindRun
    turns: TurnRun


Pick = Callable[[SnapshotRun], float]


def _p50(values: list[float]) -> float:
    return Stats.of(values).p50 if values else float("nan")


def _merged(run: SnapshotRun, side: str) -> list[float]:
    """Both halves of every round (empty: a floor not timed at this size)."""
    return run.one.get(side, []) + run.none.get(side, [])


def _flat_from(m: Measured) -> SnapshotRun:
    """The tree issue 26's "flat in the tree's size" is measured against."""
    return m.snapshots.get(FLAT_FROM) or m.snapshots[min(m.snapshots)]


def _rewound(m: Measured) -> SnapshotRun | None:
    """The snapshot run of the tree the rewinds ran in."""
    return m.snapshots.get(m.rewinds.files)


def describe(settings: Settings, m: Measured) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    sizes = sorted(m.snapshots)
    small, big = m.snapshots[sizes[0]], m.snapshots[sizes[-1]]
    read = {n: _p50(_merged(run, READ)) for n, run in m.snapshots.items()}
    rewind_read = _p50(_merged(_rewound(m) or big, READ))
    result.tables.append(_snapshot_table(m, sizes, read))
    result.tables.append(_ratio_table(m, sizes))
    result.tables.append(_rewind_table(m.rewinds, _rewound(m), rewind_read))
    result.tables.append(_calls_table(m))
    result.tables.append(_turn_table(m.turns, m.snapshots.get(m.turns.files) or big))
    _targets(result, m, small, big, read)
    result.plots.append(_plot(settings, m, sizes))
    one = _p50(big.one[SNAPSHOT])
    flat = _flat_from(m)
    counts = m.rewinds.counts
    extra = [_p50(m.turns.ms[k][ON]) - _p50(m.turns.ms[k][OFF]) for k in PROMPTS]
    result.summary = (
        f"{big.files:,} files: a one-change snapshot {fmt(one)} ms = "
        f"{fmt_ratio(ratio(one, _p50(_merged(big, GIT_STATUS))))} `git status`, "
        f"{fmt_ratio(ratio(one, _p50(flat.one[SNAPSHOT])))} the {flat.files:,}-file one; "
        f"rewind in {m.rewinds.files:,} files "
        f"{' / '.join(fmt(_p50(m.rewinds.rewind[c])) for c in counts)} ms "
        f"({' / '.join(str(c) for c in counts)} files, the last "
        f"{fmt_ratio(ratio(_p50(m.rewinds.rewind[counts[-1]]), rewind_read))} reading every "
        f"file); with checkpoints a turn takes +{' / '.join(fmt(x) for x in extra)} ms "
        "(no tool / a tool / a file written)"
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
                "from_watch": run.from_watch,
                "walks": run.walks,
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
    base = _flat_from(m).files
    headers = ["what"]
    for n in sizes:
        headers += [f"{n:,} files: p50 ms", "p99 ms", "÷ read all"]
    headers.append(f"{sizes[-1]:,} ÷ {base:,} files")
    table_rows = []
    for name, by_size in rows:
        p50 = {n: _p50(by_size[n]) for n in sizes}
        cells = [name]
        for n in sizes:
            p99 = Stats.of(by_size[n]).p99 if by_size[n] else float("nan")
            cells += [fmt(p50[n]), fmt(p99), fmt_ratio(ratio(p50[n], read[n]))]
        cells.append(fmt_ratio(ratio(p50[sizes[-1]], p50[base])))
        table_rows.append(cells)
    trees = ", ".join(f"{n:,} files ({runs[n].size / 1e6:.1f} MB)" for n in sizes)
    rounds = ", ".join(f"{len(runs[n].one[SNAPSHOT])}" for n in sizes)
    return Table(
        f"Snapshots of a working tree of {trees}, ms: rounds ({rounds}) of one file changed "
        "since the last look, then nothing changed; the first snapshot once; floors and "
        "`git status` over both halves of every round (hashing every file: not past "
        "10,000 files, n/a)",
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
        ("one-change snapshot ÷ plain git status --porcelain", one, floor(GIT_STATUS)),
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


def _rewind_table(run: RewindRun, tree: SnapshotRun | None, read: float) -> Table:
    one = _p50(tree.one[SNAPSHOT]) if tree is not None else float("nan")
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
        'the checkpoint code started, timed in this process; "in git" sums them, and a '
        "rewind runs some of its reads at once, so there it can pass the whole)",
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
            f"write-tree. {_ways(big)}; its git processes at {n:,} files: "
            f"{s7_trace.by_command(big.calls['one'])}.",
        )
    )
    status = ratio(_p50(big.one[SNAPSHOT]), _p50(_merged(big, GIT_STATUS)))
    result.targets.append(
        Target(
            f"one-change snapshot of {n:,} files ÷ plain `git status` on the same tree",
            f"≤ {STATUS_X:g}× (knowing what changed instead of walking the tree)",
            fmt_ratio(status),
            status <= STATUS_X,
            "" if status <= STATUS_X else _why_status(big),
        )
    )
    flat = _flat_from(m)
    if flat is not big:
        grew = ratio(_p50(big.one[SNAPSHOT]), _p50(flat.one[SNAPSHOT]))
        result.targets.append(
            Target(
                f"one-change snapshot, {n:,} ÷ {flat.files:,} files",
                f"≤ {FLAT_X:g}× (flat in the tree's size)",
                fmt_ratio(grew),
                grew <= FLAT_X,
                "" if grew <= FLAT_X else _why_size(flat, big),
            )
        )
    if 100 in m.snapshots and 10_000 in m.snapshots:
        hundred, ten = m.snapshots[100], m.snapshots[10_000]
        grew = ratio(_p50(ten.one[SNAPSHOT]), _p50(hundred.one[SNAPSHOT]))
        result.targets.append(
            Target(
                "one-change snapshot, 10,000 ÷ 100 files",
                f"≤ {SIZE_X:g}× (issue 17)",
                fmt_ratio(grew),
                grew <= SIZE_X,
                "" if grew <= SIZE_X else _why_size(hundred, ten),
            )
        )
    rewind_read = _p50(_merged(_rewound(m) or big, READ))
    for count in m.rewinds.counts:
        value = ratio(_p50(m.rewinds.rewind[count]), rewind_read)
        result.targets.append(
            Target(
                f"rewind of a {count}-file turn in {m.rewinds.files:,} files ÷ reading every file",
                f"≤ {REWIND_BELOW:g}×",
                fmt_ratio(value),
                value <= REWIND_BELOW,
                "" if value <= REWIND_BELOW else _why_rewind(m.rewinds, count),
            )
        )


def _ways(run: SnapshotRun) -> str:
    """How the timed snapshots of a run were taken."""
    timed = run.from_watch + run.walks
    return (
        f"{run.from_watch} of the {timed} timed snapshots at {run.files:,} files came from "
        f"the watch, {run.walks} walked the tree"
    )


def _why_status(big: SnapshotRun) -> str:
    return (
        f"`git status` is one git process and one pass over the tree; the snapshot is "
        f"{s7_trace.processes(big.calls['one']):g} processes: "
        f"{s7_trace.by_command(big.calls['one'])}. {_ways(big)}. From the watch a "
        "snapshot is `ls-tree` of the directories above the changed paths, `update-index "
        "--index-info` + `add` + `ls-files` on a scratch index (checkpoints/watched.py) and "
        "`mktree --batch` (checkpoints/tree_edit.py): none reads the whole index, so what "
        "is left is process starts; a walk (no watch, the watch lost track, a `.gitignore` "
        "changed, every 64th) is `ls-files --others --modified` over the tree, the pass "
        "`git status` makes, plus `update-index` and `write-tree` of the whole index."
    )


def _why_size(small: SnapshotRun, big: SnapshotRun) -> str:
    return (
        f"At {small.files:,} files: {s7_trace.by_command(small.calls['one'])}; at "
        f"{big.files:,}: {s7_trace.by_command(big.calls['one'])}. {_ways(small)}; "
        f"{_ways(big)}. A snapshot from the watch reads only the directories on the way "
        "to the changed file (`ls-tree`) and writes only those (`mktree`): what grows with "
        "the tree is the size of those directories (src/ holds a directory per package) "
        "and any walk among the timed snapshots."
    )


def _why_snapshot(big: SnapshotRun, label: str) -> str:
    half = big.one if label == "one-change" else big.none
    calls = big.calls["one" if label == "one-change" else "none"]
    return (
        f"The snapshot costs {fmt_ratio(ratio(_p50(half[SNAPSHOT]), _p50(half[GIT_ADD])))} "
        f"plain git's add -A + write-tree on the same tree; its git processes: "
        f"{s7_trace.by_command(calls)}. {_ways(big)}: a walk reads the index and stats the "
        "whole tree (ShadowRepo: no watch, the watch lost track, every 64th snapshot)."
    )


def _why_rewind(run: RewindRun, count: int) -> str:
    samples = run.calls["rewind"][count]
    plain = _p50(run.checkout[count])
    return (
        f"{s7_trace.processes(samples):g} git processes per rewind, the costliest: "
        f"{s7_trace.by_command(samples, top=4)}. The restore itself is `git checkout TREE "
        f"-- PATHS` of the {count} files on a scratch index (checkpoints/restore.py), and "
        f"plain git's own checkout of them takes {fmt(plain)} ms on the same tree: writing "
        "the files back is most of it. Around it the rewind snapshots the tree first "
        "(from the watch), reads what each step changed (`diff-tree`, `ls-tree`) and "
        "writes the tree after (`ls-tree` + `mktree` of the directories it touched)."
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
        result.notes.append(f"{n:,}-file tree written in {run.build_s:.1f} s; {_ways(run)}.")
    for problem in m.rewinds.problems + m.turns.problems:
        result.notes.append(f"**Problem:** {problem}")
    result.notes.append(
        "Plain git runs with its default config over the same tree, its GIT_DIR (and "
        "index) outside it; the snapshot runs as the sidecar runs it (asyncio subprocesses, "
        "its own settings: untracked cache on, literal pathspecs, no optional locks), with "
        "a watch of the tree (inotify) as a live session's checkpoints keep one: the first "
        "snapshot walks the tree and starts the watch, later ones look again only at what "
        "the watch saw change, and every 64th walks again."
    )
    hi = _p50(m.turns.ms[HI][ON]) - _p50(m.turns.ms[HI][OFF])
    none = _p50(m.snapshots[max(m.snapshots)].none[SNAPSHOT])
    result.notes.append(
        f"A turn without a tool takes no snapshot (`hi`: +{fmt(hi)} ms, "
        f"{fmt_ratio(ratio(hi, none))} a no-change snapshot): the before-snapshot is taken "
        "when a turn's first tool is about to run. The first turn with a tool waits for "
        "the runtime's first snapshot: a walk of the whole tree (every file hashed in a new "
        "session) and the start of the watch."
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
