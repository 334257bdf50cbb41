"""Scenario 7, over stdio: what checkpoints add to a turn, end to end.

Two sidecars (`python -m sidecar`, SQLite store, the offline provider), one with
checkpoints and one with `--no-checkpoints`, each with one session (`approval: auto`)
whose cwd is its own copy of the same seeded tree (bench/s7_trees.py). The first turn
that runs a tool (`$ true`) is timed on its own (with checkpoints it hashes the whole
tree); then rounds of three prompts, kinds and sidecars in a shuffled order: "hi" (no
tool: no checkpoint at all, they are taken before a turn's first tool), `$ true` (a tool
that changes nothing: two snapshots) and `/write notes.txt N` (one file changed: two
snapshots and the list of changes). Timed from the `session/prompt` write to its answer, which comes after the
turn's after-checkpoint.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.pipes import PipeClient, initialize, new_session, prompt_params, sidecar_argv
from bench.s7_trees import build

ON = "checkpoints on"
OFF = "--no-checkpoints"
HI = "no tool (hi)"
TRUE = "a tool, nothing changed ($ true)"
WRITE = "one file written (/write)"
PROMPTS = (HI, TRUE, WRITE)


@dataclass
class TurnRun:
    files: int
    first_ms: dict[str, float] = field(default_factory=dict)  # side -> ms
    ms: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # prompt -> side -> ms
    problems: list[str] = field(default_factory=list)


def _text(kind: str, n: int) -> str:
    return {HI: "hi", TRUE: "$ true", WRITE: f"/write notes.txt version {n}\n"}[kind]


def _turn(client: PipeClient, session_id: str, text: str, problems: list[str]) -> float:
    took, result = client.timed("session/prompt", prompt_params(session_id, text))
    if not isinstance(result, dict) or result.get("stopReason") != "end_turn":
        problems.append(f"{text.strip()!r} ended {result!r}")
    return took / 1000.0


def measure(work: Path, tree_seed: str, files: int, rounds: int, rng: random.Random) -> TurnRun:
    run = TurnRun(files, ms={kind: {ON: [], OFF: []} for kind in PROMPTS})
    clients: dict[str, PipeClient] = {}
    sessions: dict[str, str] = {}
    try:
        for side, extra, slug in ((ON, [], "on"), (OFF, ["--no-checkpoints"], "off")):
            root = work / slug
            shutil.rmtree(root, ignore_errors=True)
            tree = build(root / "cwd", files, random.Random(tree_seed))
            (root / "data").mkdir()
            client = PipeClient(sidecar_argv(root / "data", "sqlite", *extra), root / "log")
            clients[side] = client
            initialize(client)
            sessions[side] = new_session(client, tree.root, approval="auto")["sessionId"]
        for side, client in clients.items():
            run.first_ms[side] = _turn(client, sessions[side], "$ true", run.problems)
        kinds, sides = list(PROMPTS), list(clients)
        for n in range(rounds):
            rng.shuffle(kinds)
            for kind in kinds:
                rng.shuffle(sides)
                for side in sides:
                    took = _turn(clients[side], sessions[side], _text(kind, n), run.problems)
                    run.ms[kind][side].append(took)
        run.problems += _checkpoint_problems(clients[ON], sessions[ON])
        for slug in ("on", "off"):
            if rounds and not (work / slug / "cwd" / "notes.txt").is_file():
                run.problems.append(f"the {slug} side's /write wrote no file")
    finally:
        for client in clients.values():
            client.close()
    return run


def _checkpoint_problems(client: PipeClient, session_id: str) -> list[str]:
    """The checkpointed side must really have checkpointed (or the ratio means nothing)."""
    status: dict[str, Any] = client.call("_session/status", {"sessionId": session_id})
    problem = status.get("checkpointProblem")
    return [f"the checkpointed sidecar reports: {problem}"] if problem else []
