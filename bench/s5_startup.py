"""Scenario 5: start-up, process start to `initialize` answered and to the first
`session/new` answered.

The sidecar on an empty data dir and on ones holding 10,000 and (full size) 100,000 closed
sessions (written beforehand with the real store), the floor echo process and the ACP-SDK
peer, each
started in turn in a shuffled order per round. The clock starts before the process is
spawned; the `initialize` request is written at once and sits in the pipe until the
child reads it; `session/new` is written as soon as `initialize` is answered, as a
client does. `python -X importtime` then says where an import-bound start goes: the
light half (`sidecar.app`, what answers `initialize`) and the heavy half the sidecar
loads in a worker thread meanwhile (`_load_heavy`: the manager, the handlers, our wire
models), which `session/new` waits for; aiohttp (the sessions' listeners serve their
already-bound sockets once it is in: `sidecar/http/deferred.py`) and ACP's schema
(`sidecar/acp/preload.py`) come later, and `session/new` waits for neither.
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
from bench.pipes import PipeClient, floor_argv, initialize, new_session, peer_argv, sidecar_argv

KEY = "5"
TITLE = "Start-up"
INIT_TARGET_MS = 200.0  # issue 26
NEW_TARGET_MS = 400.0
FLAT = 1.2
WATCHED = ("sidecar.app", "sidecar.wiring", "acp", "acp.schema", "aiohttp", "pydantic", "protocol.models", "jsonrpcserver", "mcp", "sqlite3", "openai", "anthropic")  # fmt: skip
HEAVY = "import sidecar.app; sidecar.app._load_heavy()"
ACP = "import sidecar.app; sidecar.app._load_heavy(); sidecar.app.preload.ACP.ensure()"
FLOOR, PEER, EMPTY = "floor", "ACP-SDK peer", "sidecar, 0 sessions"


def _start_ms(argv: list[str], log: Path, workspace: Path) -> tuple[float, float]:
    """(ms to `initialize` answered, ms to the first `session/new` answered), from spawn."""
    client = PipeClient(argv, log)
    try:
        initialize(client)
        ready = (time.perf_counter() - client.started) * 1000.0
        new_session(client, workspace)
        return ready, (time.perf_counter() - client.started) * 1000.0
    finally:
        client.close()


def import_times(code: str = "import sidecar.app") -> dict[str, float]:
    """Cumulative import ms of the watched modules when `code` runs."""
    done = subprocess.run(
        [python(), "-X", "importtime", "-c", code],
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
    sizes = settings.pick([50], [10_000], [10_000, 100_000])
    rng = settings.rng(KEY)
    logs = settings.scratch("s5")
    workspace = settings.scratch("s5/ws")
    sides = {
        FLOOR: floor_argv(),
        PEER: peer_argv(),
        EMPTY: sidecar_argv(settings.scratch("s5/empty")),
    }
    stored: list[str] = []
    for count in sizes:
        data = settings.scratch(f"s5/stored-{count}")
        transcripts.stored_sessions(data, rng, workspace, count, each=2)
        stored.append(f"sidecar, {count:,} sessions")
        sides[stored[-1]] = sidecar_argv(data)
    init: dict[str, list[float]] = {name: [] for name in sides}
    new: dict[str, list[float]] = {name: [] for name in sides}
    for argv in sides.values():  # warm the page cache and create the empty db
        _start_ms(argv, logs / "start.log", workspace)
    order = list(sides)
    for _ in range(reps):
        rng.shuffle(order)
        for name in order:
            ready, created = _start_ms(sides[name], logs / "start.log", workspace)
            init[name].append(ready)
            new[name].append(created)
    light = import_times()
    heavy = import_times(HEAVY)
    heavy["acp.schema"] = import_times(ACP).get("acp.schema", float("nan"))
    return _result(settings, init, new, stored, light, heavy)


def _result(
    settings: Settings,
    init: dict[str, list[float]],
    new: dict[str, list[float]],
    stored: list[str],
    light: dict[str, float],
    heavy: dict[str, float],
) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    stats = {name: Stats.of(v) for name, v in init.items()}
    news = {name: Stats.of(v) for name, v in new.items()}
    floor, peer = stats[FLOOR].p50, stats[PEER].p50
    result.tables.append(
        Table(
            f"Process start to `initialize` answered, and to the first `session/new` answered, ms ({len(init[FLOOR])} starts each)",
            ["process", "initialize p50", "p99", "min", "/ floor", "/ peer", "session/new p50", "p99", "/ peer"],
            [
                [name, fmt(s.p50), fmt(s.p99), fmt(s.low), fmt_ratio(ratio(s.p50, floor)), fmt_ratio(ratio(s.p50, peer)),
                 fmt(news[name].p50), fmt(news[name].p99), fmt_ratio(ratio(news[name].p50, news[PEER].p50))]
                for name, s in stats.items()
            ],
        )
    )  # fmt: skip
    if light or heavy:
        names = sorted({*light, *heavy}, key=lambda n: -max(light.get(n, 0.0), heavy.get(n, 0.0)))
        result.tables.append(
            Table(
                "Cumulative import ms (`python -X importtime`, one run each): the light half "
                "(`import sidecar.app`, before `initialize`) and the heavy half the worker "
                "thread loads (`sidecar.app._load_heavy()`, before `session/new`); blank: not "
                "imported",
                ["module", "light half", "with the heavy half"],
                [[n, fmt(light[n]) if n in light else "", fmt(heavy[n]) if n in heavy else ""] for n in names],
            )
        )  # fmt: skip
    why = _why(light, heavy, stats, news)
    full = stored[-1]  # the most stored sessions of this run
    for key, label in ((EMPTY, "0 sessions"), *((k, k.removeprefix("sidecar, ")) for k in stored)):
        value, created = stats[key].p50, news[key].p50
        result.targets.append(
            Target(
                f"start to initialize, {label}",
                f"≤ {INIT_TARGET_MS:g} ms",
                f"{fmt(value)} ms ({fmt_ratio(ratio(value, floor))} the floor)",
                value <= INIT_TARGET_MS,
                "" if value <= INIT_TARGET_MS else why,
            )
        )
        result.targets.append(
            Target(
                f"start to first session/new, {label}",
                f"≤ {NEW_TARGET_MS:g} ms",
                f"{fmt(created)} ms",
                created <= NEW_TARGET_MS,
                "" if created <= NEW_TARGET_MS else why,
            )
        )
    for what, table in (("initialize", stats), ("session/new", news)):
        flat = ratio(table[full].p50, table[EMPTY].p50)
        result.targets.append(
            Target(
                f"{what} with {full.removeprefix('sidecar, ')} stored ÷ 0",
                f"flat (≤ {FLAT}×)",
                fmt_ratio(flat),
                flat <= FLAT,
                ""
                if flat <= FLAT
                else "Start-up reconciles live-looking records only (an index on status); a "
                "slower start with stored sessions means something reads all records.",
            )
        )
    result.plots.append(
        plots.cdfs(
            settings.out / "s5_startup.png",
            {"start to initialize answered": init, "start to first session/new answered": new},
            "ms (log)",
        )
    )
    result.summary = (
        f"initialize {fmt(stats[EMPTY].p50)} ms (0 sessions), {fmt(stats[full].p50)} ms "
        f"({full.removeprefix('sidecar, ')}); first session/new {fmt(news[EMPTY].p50)} / "
        f"{fmt(news[full].p50)} ms; floor {fmt(floor)} ms, peer {fmt(peer)} ms"
    )
    result.raw = {
        "stats_ms": {k: v.as_dict() for k, v in stats.items()},
        "new_session_ms": {k: v.as_dict() for k, v in news.items()},
        "imports_ms": light,
        "heavy_imports_ms": heavy,
    }
    return result


def _why(
    light: dict[str, float],
    heavy: dict[str, float],
    stats: dict[str, Stats],
    news: dict[str, Stats],
) -> str:
    nan = float("nan")
    floor = stats[FLOOR].p50
    return (
        f"Start-up is the interpreter and imports. The floor (a bare Python process "
        f"answering one line) takes {fmt(floor)} ms on this machine in this run, so "
        f"`initialize` is {fmt(stats[EMPTY].p50 - floor)} ms above what any Python process "
        f"pays. The light half (`sidecar.app`: asyncio, sqlite3, the store, the stdio "
        f"server; no pydantic, no aiohttp, no protocol models) imports in "
        f"{fmt(light.get('sidecar.app', nan))} ms. `session/new` waits for the heavy half, "
        f"imported in a worker thread from the first moment: "
        f"{fmt(heavy.get('sidecar.wiring', nan))} ms, of which our protocol models "
        f"{fmt(heavy.get('protocol.models', nan))} ms with pydantic "
        f"{fmt(heavy.get('pydantic', nan))} ms; aiohttp "
        f"({fmt(heavy.get('aiohttp', nan)) if 'aiohttp' in heavy else 'not'} imported before "
        f"`session/new`: a session's socket is bound at once and served once aiohttp is in) "
        f"and ACP's schema ({fmt(heavy.get('acp.schema', nan))} ms) load later. What would "
        f"close the rest: the manager and the handlers imported lazily per method (most of "
        f"the heavy half serves methods the first `session/new` does not call), and the wire "
        f"models of the first requests as plain dataclasses instead of pydantic."
    )
