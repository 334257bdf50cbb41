"""Scenario 5: start-up, process start to `initialize` answered.

The sidecar on an empty data dir and on one holding 1,000 closed sessions (written
beforehand with the real store), the floor echo process and the ACP-SDK peer, each
started in turn in a shuffled order per round. The clock starts before the process is
spawned; the `initialize` request is written at once and sits in the pipe until the
child reads it. `python -X importtime` then says where an import-bound start goes.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from bench import plots, transcripts
from bench.core import (
    REPO,
    ScenarioResult,
    Settings,
    Stats,
    Table,
    Target,
    fmt,
    fmt_ratio,
    python,
    ratio,
)
from bench.pipes import PipeClient, floor_argv, initialize, peer_argv, sidecar_argv

KEY = "5"
TITLE = "Start-up"
TARGET_MS = 300.0
FLAT = 1.2
WATCHED = ("sidecar.app", "acp", "acp.schema", "aiohttp", "pydantic", "jsonrpcserver", "sqlite3", "openai", "anthropic")  # fmt: skip


def _start_ms(argv: list[str], log: Path) -> float:
    client = PipeClient(argv, log)
    try:
        initialize(client)
        return (time.perf_counter() - client.started) * 1000.0
    finally:
        client.close()


def import_times() -> dict[str, float]:
    """Cumulative import ms of the watched modules when `sidecar.app` is imported."""
    done = subprocess.run(
        [python(), "-X", "importtime", "-c", "import sidecar.app"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if match and match.group(3) in WATCHED and match.group(3) not in found:
            found[match.group(3)] = int(match.group(1)) / 1000.0
    return found


def run(settings: Settings) -> ScenarioResult:
    reps = settings.pick(2, 10, 20)
    stored = settings.pick(50, 1000, 1000)
    rng = settings.rng(KEY)
    logs = settings.scratch("s5")
    full_dir = settings.scratch("s5/stored")
    transcripts.stored_sessions(full_dir, rng, settings.scratch("s5/ws"), stored)
    sides = {
        "floor": floor_argv(),
        "ACP-SDK peer": peer_argv(),
        "sidecar, 0 sessions": sidecar_argv(settings.scratch("s5/empty")),
        f"sidecar, {stored:,} sessions": sidecar_argv(full_dir),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for argv in sides.values():  # warm the page cache and create the empty db
        _start_ms(argv, logs / "start.log")
    order = list(sides)
    for _ in range(reps):
        rng.shuffle(order)
        for name in order:
            times[name].append(_start_ms(sides[name], logs / "start.log"))
    imports = import_times()
    return _result(settings, times, stored, imports)


def _result(
    settings: Settings, times: dict[str, list[float]], stored: int, imports: dict[str, float]
) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    stats = {name: Stats.of(v) for name, v in times.items()}
    floor, peer = stats["floor"].p50, stats["ACP-SDK peer"].p50
    result.tables.append(
        Table(
            f"Process start to `initialize` answered, ms ({len(times['floor'])} starts each)",
            ["process", "p50 ms", "p99 ms", "min ms", "p50 / floor", "p50 / peer"],
            [
                [name, fmt(s.p50), fmt(s.p99), fmt(s.low), fmt_ratio(ratio(s.p50, floor)), fmt_ratio(ratio(s.p50, peer))]
                for name, s in stats.items()
            ],
        )
    )  # fmt: skip
    if imports:
        result.tables.append(
            Table(
                "Cumulative import time when the sidecar imports `sidecar.app` "
                "(`python -X importtime`, one run, ms)",
                ["module", "ms"],
                [[name, fmt(ms)] for name, ms in sorted(imports.items(), key=lambda kv: -kv[1])],
            )
        )
    empty, full = stats["sidecar, 0 sessions"].p50, stats[f"sidecar, {stored:,} sessions"].p50
    for label, value in (("0 sessions", empty), (f"{stored:,} sessions", full)):
        result.targets.append(
            Target(
                f"start to initialize, {label}",
                f"≤ {TARGET_MS:g} ms",
                f"{fmt(value)} ms",
                value <= TARGET_MS,
                "" if value <= TARGET_MS else _why(imports, stats),
            )
        )
    flat = ratio(full, empty)
    result.targets.append(
        Target(
            f"start with {stored:,} stored sessions vs 0",
            f"flat (≤ {FLAT}×)",
            fmt_ratio(flat),
            flat <= FLAT,
            ""
            if flat <= FLAT
            else "Start-up reconciles live-looking records only; a "
            "slower start with stored sessions means something reads all records.",
        )
    )
    result.plots.append(
        plots.cdfs(
            settings.out / "s5_startup.png", {"start to initialize answered": times}, "ms (log)"
        )
    )
    result.summary = (
        f"{fmt(empty)} ms (0 sessions), {fmt(full)} ms ({stored:,}); floor {fmt(floor)} ms, "
        f"peer {fmt(peer)} ms"
    )
    result.raw = {"stats_ms": {k: v.as_dict() for k, v in stats.items()}, "imports_ms": imports}
    return result


def _why(imports: dict[str, float], stats: dict[str, Stats]) -> str:
    total = imports.get("sidecar.app", float("nan"))
    acp_ms = imports.get("acp", float("nan"))
    schema = imports.get("acp.schema", float("nan"))
    floor, peer = stats["floor"].p50, stats["ACP-SDK peer"].p50
    return (
        f"Start-up is imports: importing `sidecar.app` takes {fmt(total)} ms, of which the "
        f"`agent-client-protocol` SDK is {fmt(acp_ms)} ms ({fmt(schema)} ms in `acp.schema`: "
        f"a few hundred pydantic models built at import, configured with "
        f"`use_attribute_docstrings=True`, which reads and tokenizes their source), then "
        f"aiohttp. The interpreter alone (the floor) starts in {fmt(floor)} ms "
        f"and the SDK peer, which imports the same SDK, in {fmt(peer)} ms. Fix "
        f"(sidecar/handlers.py, acp_updates.py): answer `initialize` before importing the "
        f"SDK -- validate the start-up methods with the small models in protocol/models.py "
        f"and build `session/update` dicts directly, importing `acp.schema` lazily (or in a "
        f"thread right after start) for the methods that need it; import aiohttp on the "
        f"first listener."
    )
