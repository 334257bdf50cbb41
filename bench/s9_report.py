"""Scenario 9's tables, verdicts and "why not met" notes (bench/s9_search.py measures)."""

from __future__ import annotations

from typing import Any

from bench.core import ScenarioResult, Stats, Table, Target, fmt, fmt_ratio, ratio
from bench.s9_build import INDEX_EVERY, MATCHING, RARE

TARGET_RATIO = 1.2
OPS = {
    "list": "`session/list`, first page (no query)",
    "search": f"`session/list`, `_meta.query` = `{RARE}` ({MATCHING} sessions)",
    "resume": "`session/resume` of a stored session",
    "delete": "`session/delete` of a stored session",
}
QUERIES = ("rare", "two words", "common", "no query", "match")


def result(
    key: str,
    title: str,
    stats: dict[str, Stats],
    sizes: tuple[int, int],
    each: int,
    built: dict[int, dict[str, Any]],
) -> ScenarioResult:
    small, large = sizes
    out = ScenarioResult(key, title)
    growth = {
        op: ratio(stats[f"stdio {op} {large}"].p50, stats[f"stdio {op} {small}"].p50) for op in OPS
    }
    out.tables.append(
        Table(
            f"Over stdio, µs: one sidecar on each library ({small:,} and {large:,} stored "
            f"sessions, {each} messages each), taking turns",
            [
                "request",
                f"{small:,} p50",
                f"{small:,} p99",
                f"{large:,} p50",
                f"{large:,} p99",
                f"{large:,} ÷ {small:,}",
            ],
            [
                [
                    what,
                    *(
                        fmt(getattr(stats[f"stdio {op} {n}"], q))
                        for n in sizes
                        for q in ("p50", "p99")
                    ),
                    fmt_ratio(growth[op]),
                ]
                for op, what in OPS.items()
            ],
        )  # fmt: skip
    )
    rows = []
    for query in QUERIES:
        cells = [
            fmt(stats[f"{state} {query} {n}"].p50) for state in ("built", "merged") for n in sizes
        ]
        rows.append([query, *cells])
    out.tables.append(
        Table(
            "In the store (`SqliteSessionStore.list_page`, first page of 100; `match`: the rare "
            "word's FTS5 MATCH alone), p50 µs, the index as written and after the idle merge",
            [
                "query",
                f"as written {small:,}",
                f"as written {large:,}",
                f"merged {small:,}",
                f"merged {large:,}",
            ],
            rows,
        )  # fmt: skip
    )
    out.tables.append(
        Table(
            f"Data (bulk insert into the store's schema, indexed by the store's pass every "
            f"{INDEX_EVERY} sessions; the idle merge run to the end)",
            [
                "sessions",
                "messages",
                "build s",
                "file MB",
                "segments as written",
                "merge steps",
                "merge s",
                "segments merged",
            ],
            [
                [
                    f"{n:,}",
                    f"{n * each:,}",
                    fmt(b["seconds"]),
                    fmt(b["mb"]),
                    _segments(b["built"]),
                    str(b["steps"]),
                    fmt(b["merge_seconds"], 2),
                    _segments(b["merged"]),
                ]
                for n, b in built.items()
            ],
        )  # fmt: skip
    )
    for op in OPS:
        met = growth[op] <= TARGET_RATIO
        small_p50, large_p50 = stats[f"stdio {op} {small}"].p50, stats[f"stdio {op} {large}"].p50
        out.targets.append(
            Target(
                f"{op}: {large:,} vs {small:,} stored sessions",
                f"≤ {TARGET_RATIO}×",
                f"{fmt_ratio(growth[op])} (p50 {fmt(small_p50)} → {fmt(large_p50)} µs)",
                met,
                "" if met else _why(op, stats, sizes, built),
            )
        )
    search = stats[f"stdio search {large}"].p50
    out.targets.append(
        Target(
            f"search p50 over {large:,} sessions × {each} messages",
            "reported",
            f"{fmt(stats[f'merged rare {large}'].p50)} µs in the store, {fmt(search)} µs over stdio",
            True,
        )
    )
    out.notes.append(
        "`common` (`session`) is in most messages: its search reads every matching row of "
        "the index (FTS5 doclists), so it grows with the transcript text, not the page. The "
        "idle merge is what a sidecar does by itself once it has written nothing for a few "
        "seconds (sidecar/store/search_merge.py); the stdio sidecars start on the merged "
        "files, and their deletes write new segments as they go."
    )
    out.summary = (
        "over stdio, "
        + ", ".join(f"{op} {fmt_ratio(growth[op])}" for op in OPS)
        + f" from {small:,} to {large:,} sessions"
    )
    out.raw = {
        "sizes": list(sizes),
        "messages_each": each,
        "growth": growth,
        "stats": {name: s.as_dict() for name, s in stats.items()},
        "built": {str(n): b for n, b in built.items()},
    }
    return out


def _segments(counts: dict[str, int]) -> str:
    return f"{counts['transcript_search']} + {counts['title_search']} (titles)"


def _why(
    op: str, stats: dict[str, Stats], sizes: tuple[int, int], built: dict[int, dict[str, Any]]
) -> str:
    small, large = sizes
    spread = (
        f"over stdio p99 {fmt(stats[f'stdio {op} {small}'].p99)} and "
        f"{fmt(stats[f'stdio {op} {large}'].p99)} µs"
    )

    def store(name: str) -> str:
        a, b = stats[f"{name} {small}"].p50, stats[f"{name} {large}"].p50
        return f"{fmt(a)} → {fmt(b)} µs ({fmt_ratio(ratio(b, a))})"

    if op == "list":
        return (
            f"the first page is one range of the `(archived, updated_at, seq)` index and the "
            f"100 rows it names: in the store {store('merged no query')}; the rest of the "
            f"request is the 100 summaries, the same work at any size ({spread})"
        )
    if op == "search":
        return (
            f"in the store the search costs {store('merged rare')} after the idle merge "
            f"({store('built rare')} as written) and its transcript MATCH alone "
            f"{store('merged match')}: FTS5 finds a term by descending each segment's b-tree, "
            f"deeper in a bigger index (segments merged: {_segments(built[large]['merged'])}), "
            f"and the title index's prefix query grows likewise; the rest of the request does "
            f"not depend on the library ({spread})"
        )
    if op == "resume":
        return (
            f"resume reads the record by id (a unique index), writes the new generation and "
            f"then `idle` (two transactions) and starts a runtime: none of it reads another "
            f"session, so what grows is each b-tree descent and the page cache's share of a "
            f"bigger file ({spread})"
        )
    return (
        f"delete takes the session's rows out of the search index in its transaction (FTS5 "
        f"writes a segment of deletions, merged into the index later) and its row out of "
        f"`sessions` and its indexes: the work follows the session's own rows, and each "
        f"b-tree descent is deeper in a bigger file ({spread})"
    )
