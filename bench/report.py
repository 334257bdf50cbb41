"""The Markdown report, the JSON of every number, and the short table printed at the end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.core import ScenarioResult, Settings, Table, Target


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def verdict(target: Target) -> str:
    return {True: "met", False: "**not met**", None: "not measured"}[target.met]


def tally(result: ScenarioResult) -> str:
    if result.error:
        return "failed"
    if result.skipped:
        return "skipped"
    met = sum(1 for t in result.targets if t.met)
    return f"{met}/{len(result.targets)}" if result.targets else "no target"


def summary_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    return [[r.key, r.title, r.summary or "", tally(r)] for r in results]


def target_rows(results: Sequence[ScenarioResult]) -> list[list[str]]:
    return [[r.key, t.name, t.goal, t.measured, verdict(t)] for r in results for t in r.targets]


def _section(result: ScenarioResult) -> list[str]:
    lines = [f"## {result.key}. {result.title}", ""]
    if result.error:
        return lines + ["**The benchmark failed:**", "", "```", result.error.strip(), "```", ""]
    if result.skipped:
        return lines + [f"Skipped: {result.skipped}.", ""]
    if result.summary:
        lines += [f"In short: {result.summary} ({result.seconds:.0f} s to measure).", ""]
    for table in result.tables:
        lines += [f"**{table.title}**", "", *markdown_table(table.headers, table.rows), ""]
    if result.targets:
        lines += ["**Targets**", ""]
        lines += markdown_table(
            ["target", "goal", "measured", "verdict"],
            [[t.name, t.goal, t.measured, verdict(t)] for t in result.targets],
        )
        lines.append("")
        for target in result.targets:
            if target.met is False and target.why:
                lines += [f"- *{target.name}, why not met:* {target.why}"]
        lines.append("")
    for plot in result.plots:
        lines += [f"![{result.title}]({plot})", ""]
    for note in result.notes:
        lines += [f"- {note}"]
    return [*lines, ""]


def write(
    settings: Settings,
    results: Sequence[ScenarioResult],
    machine: dict[str, Any],
    command: str,
    seconds: float,
) -> Path:
    out = settings.out
    lines = [
        "# Sidecar benchmarks",
        "",
        f"Command: `{command}`  ",
        f"Seed {settings.seed}, size `{settings.size}`{' (smoke)' if settings.smoke else ''}, "
        f"{seconds:.0f} s in all.  ",
        f"Machine: {machine['cores']} cores, {machine['implementation']} {machine['python']}, "
        f"{machine['platform']}; load average at start {machine['load_average']}, at the end "
        f"{machine.get('load_average_end')}.",
        "",
        "This machine is shared and noisy, so absolute times are not comparable between "
        "runs: every figure below is set beside a floor (and a peer, where there is one) "
        "measured in the same run, mostly interleaved in shuffled batches, and given as a "
        "median (p50) with its tail (p99).",
        "",
        "## Summary",
        "",
        *markdown_table(["#", "scenario", "headline", "targets met"], summary_rows(results)),
        "",
        *markdown_table(["#", "target", "goal", "measured", "verdict"], target_rows(results)),
        "",
    ]
    for result in results:
        lines += _section(result)
    path = out / "report.md"
    path.write_text("\n".join(lines))
    raw = {
        "command": command,
        "seed": settings.seed,
        "size": settings.size,
        "smoke": settings.smoke,
        "machine": machine,
        "scenarios": {
            r.key: {**asdict(r), "tables": [asdict(t) for t in r.tables]} for r in results
        },
    }
    (out / "results.json").write_text(json.dumps(raw, indent=1, default=str))
    return path


def printed(results: Sequence[ScenarioResult]) -> str:
    """The short table for the terminal."""
    rows = summary_rows(results)
    widths = [
        max(len(r[i]) for r in [["#", "scenario", "headline", "met"], *rows]) for i in range(4)
    ]
    lines = []
    for row in [["#", "scenario", "headline", "met"], *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    misses = [f"  not met: [{r.key}] {t.name}: {t.measured} (goal {t.goal})"
              for r in results for t in r.targets if t.met is False]  # fmt: skip
    return "\n".join(lines + misses)


__all__ = ["Table", "markdown_table", "printed", "write"]
