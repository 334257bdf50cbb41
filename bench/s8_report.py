"""Scenario 8's tables and plot, from what bench/s8_postgres.py measured."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench import plots
from bench.core import ScenarioResult, Settings, Stats, Table, fmt, fmt_ratio, ratio

KEY = "8"
TITLE = "PostgreSQL vs SQLite store"
OPS = ("create", "append", "close", "resume", "list", "delete")
STORES = ("sqlite", "postgres")
WHAT = {
    "create": "`session/new`",
    "append": '`session/prompt` "hi": user message + reply',
    "close": "`session/close` (twice a cycle)",
    "resume": "`session/resume`",
    "list": "`session/list`, first page",
    "delete": "`session/delete`",
}


@dataclass
class Measured:
    sizes: list[int]
    cycles: int
    server_start_s: float
    messages_each: int  # in every stored session
    # size -> store -> operation -> ms
    times: dict[int, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    floor: dict[int, dict[str, list[float]]] = field(default_factory=dict)  # size -> ms
    fill_s: dict[int, float] = field(default_factory=dict)  # writing the SQLite sessions
    # size -> (how, sessions copied to PostgreSQL, seconds)
    copy: dict[int, tuple[str, int, float]] = field(default_factory=dict)


def describe(settings: Settings, m: Measured) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    stats = {
        size: {s: {op: Stats.of(v) for op, v in ops.items()} for s, ops in by_store.items()}
        for size, by_store in m.times.items()
    }
    small, large = m.sizes[0], m.sizes[-1]

    def pg_over_sqlite(size: int, op: str) -> float:
        return ratio(stats[size]["postgres"][op].p50, stats[size]["sqlite"][op].p50)

    for size in m.sizes:
        rows = []
        for op in OPS:
            sq, pg = stats[size]["sqlite"][op], stats[size]["postgres"][op]
            rows.append(
                [WHAT[op], fmt(sq.p50, 2), fmt(sq.p99, 2), fmt(pg.p50, 2), fmt(pg.p99, 2)]
                + [fmt_ratio(pg_over_sqlite(size, op))]
            )
        result.tables.append(
            Table(
                f"{size:,} stored sessions: over stdio, ms ({m.cycles} cycles per store, "
                "the stores taking turns in a shuffled order)",
                ["operation", "sqlite p50", "sqlite p99", "postgres p50", "postgres p99"]
                + ["postgres / sqlite"],
                rows,
            )
        )
    result.tables.append(
        Table(
            f"Growth: p50 at {large:,} stored sessions ÷ p50 at {small:,}",
            ["operation", *(f"{s} {large:,} / {small:,}" for s in STORES)]
            + [f"postgres / sqlite at {small:,}", f"postgres / sqlite at {large:,}"],
            [
                [op]
                + [
                    fmt_ratio(ratio(stats[large][s][op].p50, stats[small][s][op].p50))
                    for s in STORES
                ]
                + [fmt_ratio(pg_over_sqlite(small, op)), fmt_ratio(pg_over_sqlite(large, op))]
                for op in OPS
            ],
        )
    )
    floor_rows = []
    for name in m.floor[large]:
        values = Stats.of([v for size in m.sizes for v in m.floor[size][name]])
        floor_rows.append([name, fmt(values.p50, 3), fmt(values.p99, 3)])
    result.tables.append(
        Table(
            "Floor: one commit, in the benchmark process (same rounds, ms)",
            ["step", "p50", "p99"],
            floor_rows,
        )
    )
    result.tables.append(
        Table(
            "Setting up the stored sessions (while the sidecars run, between sizes)",
            ["stored sessions", "added to SQLite, s", "copied to PostgreSQL by", "sessions"]
            + ["seconds", "sessions/s"],
            [
                [f"{size:,}", fmt(m.fill_s[size], 2), how, f"{copied:,}", fmt(seconds, 2)]
                + [fmt(ratio(copied, seconds))]
                for size, (how, copied, seconds) in m.copy.items()
            ],
        )
    )
    result.plots.append(
        plots.bar_panels(
            settings.out / "s8_postgres.png",
            {
                f"{size:,} stored sessions, p50 ms": (
                    OPS,
                    {f"{s} p50": [stats[size][s][op].p50 for op in OPS] for s in STORES},
                    "ms",
                )
                for size in m.sizes
            },
        )
    )
    result.summary = f"postgres/sqlite p50 at {large:,} stored: " + ", ".join(
        f"{op} {fmt_ratio(pg_over_sqlite(large, op))}" for op in OPS
    )
    result.notes += [
        "No target: the server is local (loopback TCP, its own throwaway cluster started "
        f"in {m.server_start_s:.1f} s), so what is reported is the ratio of the two stores "
        "measured in the same run, not a latency a networked server would show.",
        "The two stores are measured in the same interleaved rounds, so their ratio is "
        "fair whatever the machine does; the sizes are measured one after the other, so "
        "the growth columns also carry any change in the machine's load between them.",
        "Durability is alike on both sides: SQLite runs WAL with synchronous=NORMAL (no "
        "fsync per commit), the throwaway server fsync=off and synchronous_commit=off; a "
        "production server keeps synchronous_commit=on and pays a WAL flush per commit.",
        f"Each stored session holds {m.messages_each} messages (forks of one seeded "
        "session, written by the SQLite store's own fork); the first size is copied to "
        "PostgreSQL by `python -m sidecar migrate`'s own code (one transaction per session, "
        "read back to verify), the rest by the store's `import_session` several at once.",
    ]
    result.raw = {
        "stats_ms": {
            str(size): {s: {op: v.as_dict() for op, v in ops.items()} for s, ops in by.items()}
            for size, by in stats.items()
        },
        "ratios_p50": {str(size): {op: pg_over_sqlite(size, op) for op in OPS} for size in m.sizes},
        "floor_ms": {
            str(size): {name: Stats.of(v).as_dict() for name, v in floor.items()}
            for size, floor in m.floor.items()
        },
        "fill_s": {str(k): v for k, v in m.fill_s.items()},
        "copy": {
            str(k): {"how": how, "copied": c, "seconds": s} for k, (how, c, s) in m.copy.items()
        },
    }
    return result
