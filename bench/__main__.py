"""`python -m bench`: run the scenarios, write report.md, results.json and PNG plots.

    python -m bench [--seed N] [--size small|full] [--scenarios 1,2,...] [--out DIR]
    python -m bench --smoke --out DIR    # tiny sizes, every scenario, well under a minute

Exit status: 0 when every scenario ran (targets met or not: misses are findings, not
failures), 1 when a scenario itself broke (the report says which and how), 2 on a bad
command line.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import report
from bench.core import REPO, ScenarioResult, Settings, machine

SCENARIOS = {
    "1": "bench.s1_roundtrip",
    "2": "bench.s2_lifecycle",
    "3": "bench.s3_scale",
    "4": "bench.s4_transcript",
    "5": "bench.s5_startup",
    "6": "bench.s6_desktop",
    "7": "bench.s7_checkpoints",
    "8": "bench.s8_postgres",
    "9": "bench.s9_search",
    "10": "bench.s10_features",
    "11": "bench.s11_agents",
    "12": "bench.s12_worktrees",
    "13": "bench.s13_mentions",
    "14": "bench.s14_queue",
}
TITLES = {
    "1": "Round trip over stdio",
    "2": "Lifecycle latency",
    "3": "Scale: live sessions in one sidecar",
    "4": "Transcript growth",
    "5": "Start-up",
    "6": "Desktop: start and Rebuild UI",
    "7": "Checkpoints: snapshots and rewinds",
    "8": "PostgreSQL vs SQLite store",
    "9": "Library scale: list, search, resume, delete",
    "10": "New features: approvals, sandbox, MCP",
    "11": "External ACP agents: through the sidecar vs direct",
    "12": "Worktrees: a session's worktree and its branch diff vs plain git",
    "13": "@ completion over a large repository",
    "14": "The queue: a queued turn vs a plain one",
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="seeds every random choice (default 1)")
    parser.add_argument("--size", choices=("small", "full"), default="small")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help="e.g. 1,3,5 (default: all)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and few iterations")
    parser.add_argument("--work", type=Path, help="scratch dir to keep (default: a temp dir)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SCENARIOS]
    if unknown or not keys:
        parser.error(f"unknown scenario(s) {unknown or keys}; choose from {', '.join(SCENARIOS)}")
    args.keys = keys
    return args


def run_one(key: str, settings: Settings) -> ScenarioResult:
    started = time.perf_counter()
    print(f"[{key}] {TITLES[key]} ...", file=sys.stderr, flush=True)
    try:
        module = importlib.import_module(SCENARIOS[key])
        result: ScenarioResult = module.run(settings)
    except Exception:  # noqa: BLE001 (reported; the other scenarios still run)
        result = ScenarioResult(key, TITLES[key], error=traceback.format_exc())
        result.summary = "the benchmark failed; see the report"
    result.seconds = time.perf_counter() - started
    state = "failed" if result.error else "skipped" if result.skipped else "done"
    print(f"[{key}] {state} in {result.seconds:.1f} s", file=sys.stderr, flush=True)
    return result


def compiled() -> None:
    """Our packages byte-compiled first, as an install leaves them: a checkout run with
    PYTHONDONTWRITEBYTECODE (this machine sets it) would otherwise compile every module
    at every start it times, which the peers installed by pip never do."""
    for package in ("protocol", "sidecar", "desktop", "bench"):
        compileall.compile_dir(REPO / package, quiet=2)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-"))
    work.mkdir(parents=True, exist_ok=True)
    settings = Settings(args.seed, args.size, args.smoke, args.out.resolve(), work.resolve())
    facts = machine()
    compiled()
    started = time.perf_counter()
    results = [run_one(key, settings) for key in args.keys]
    facts["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    path = report.write(settings, results, facts, command, time.perf_counter() - started)
    print(report.printed(results))
    print(f"report: {path}")
    failed = [r.key for r in results if r.error]
    if failed:
        print(f"scenario(s) {', '.join(failed)} failed; scratch kept in {work}", file=sys.stderr)
        return 1
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
