"""Scenario 10, over stdio: turns with one tool call each, timed from the client's side.

One real sidecar (`python -m sidecar`, SQLite store, the offline provider,
`--no-checkpoints`: a snapshot's git processes would drown a millisecond) with one session
per kind of call, every kind in a shuffled order per round so a noisy neighbour hurts
them alike:

- `$ true` under `approval: ask` (the client is asked, `session/request_permission`, and
  answers "allow once" at once) and under `approval: auto` (nobody asked), both with
  sandbox `workspace`; and under `approval: auto` with sandbox `off`;
- `/write` (a file tool: no process, so a quieter pair) under `ask` and `auto`;
- with an MCP server (bench/s10_mcp_server.py, stdio), `/mcp bench echo {...}` and a plain
  turn ("hi") under `auto` (the tool is read-only: never asked about).

Each turn is timed from the `session/prompt` write to its answer, and inside it, by the
arrival of its messages: the `tool_call` notification, the permission request (and how
long this client took to answer it: reading and parsing the request, writing the
answer), the `in_progress` update and the `completed` one.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core import python
from bench.pipes import (
    PipeClient,
    RpcFailure,
    floor_argv,
    initialize,
    prompt_params,
    sidecar_argv,
)
from bench.s10_direct import SERVER, McpPeer

ALLOW_ONCE = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


@dataclass
class Turn:
    """One turn, µs from the prompt's write; -1 where that message never came."""

    total: float = -1.0
    tool_call: float = -1.0  # the `tool_call` notification arrived
    asked: float = -1.0  # `session/request_permission` arrived
    answered: float = -1.0  # this client's answer written
    answer_us: float = 0.0  # this client's own time to answer (parse + reply)
    in_progress: float = -1.0
    completed: float = -1.0  # `tool_call_update` status completed (or failed)
    status: str = ""  # the tool call's last status
    stop: str = ""

    @property
    def span(self) -> float:
        """The tool call as the client sees it: `tool_call` to its final update."""
        return self.completed - self.tool_call if self.tool_call >= 0 <= self.completed else -1.0


@dataclass
class TurnClient:
    """Drives one sidecar: prompts, answering permission requests at once."""

    client: PipeClient
    problems: list[str] = field(default_factory=list)

    def turn(self, session_id: str, text: str) -> Turn:
        out = self.client._out  # the measuring client's own pipe (bench/pipes.py)
        sink = self.client._in
        request_id = self.client._ids + 1
        started = time.perf_counter_ns()
        self.client.send("session/prompt", prompt_params(session_id, text))
        turn = Turn()

        def now() -> float:
            return (time.perf_counter_ns() - started) / 1000.0

        while True:
            line = out.readline()
            if not line:
                raise RuntimeError(f"{text!r}: the sidecar exited ({self.client.tail()})")
            seen = time.perf_counter_ns()
            message = json.loads(line)
            method = message.get("method")
            if method == "session/request_permission":
                turn.asked = (seen - started) / 1000.0
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": ALLOW_ONCE}
                sink.write(json.dumps(reply).encode() + b"\n")
                sink.flush()
                turn.answered = now()
                turn.answer_us = turn.answered - turn.asked
                continue
            if method == "session/update":
                self._note(turn, message["params"]["update"], (seen - started) / 1000.0)
                continue
            if message.get("id") == request_id and method is None:
                turn.total = now()
                if "error" in message:
                    raise RpcFailure("session/prompt", message["error"])
                turn.stop = str(message.get("result", {}).get("stopReason"))
                if turn.stop != "end_turn":
                    self.problems.append(f"{text!r} ended {turn.stop}")
                return turn

    @staticmethod
    def _note(turn: Turn, update: dict[str, Any], at: float) -> None:
        kind = update.get("sessionUpdate")
        if kind == "tool_call" and turn.tool_call < 0:
            turn.tool_call = at
        elif kind == "tool_call_update":
            status = update.get("status")
            if status == "in_progress" and turn.in_progress < 0:
                turn.in_progress = at
            elif status in ("completed", "failed"):
                turn.completed = at
                turn.status = str(status)


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g} s")
        time.sleep(0.05)


def mcp_connected(client: PipeClient, session_id: str, name: str) -> bool:
    status: dict[str, Any] = client.call("_session/status", {"sessionId": session_id})
    servers = {s.get("name"): s for s in status.get("mcpServers") or []}
    state = servers.get(name, {}).get("status")
    if state == "failed":
        raise RuntimeError(f"MCP server {name} failed: {servers[name].get('error')}")
    return bool(state == "connected")


def log_path(work: Path, name: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    return work / name


ASK = "$ true, approval ask (sandbox workspace)"
AUTO = "$ true, approval auto (sandbox workspace)"
OFF = "$ true, approval auto, sandbox off"
ASK_WRITE = "/write, approval ask"
AUTO_WRITE = "/write, approval auto"
MCP = "/mcp bench echo (approval auto)"
PLAIN = "hi (no tool), the MCP session"
PEER = "peer: MCP SDK client, call_tool echo"
FLOOR = "floor: one request and its answer over stdio (bench/floor.py --asyncio)"
SESSIONS = {  # kind -> (approval, sandbox)
    ASK: ("ask", "workspace"),
    AUTO: ("auto", "workspace"),
    OFF: ("auto", "off"),
    ASK_WRITE: ("ask", "workspace"),
    AUTO_WRITE: ("auto", "workspace"),
    MCP: ("auto", "workspace"),
}
MCP_NAME = "bench"
MCP_SETTLE = 120.0  # seconds an SDK-built server may take to start on a loaded machine


@dataclass
class TurnsRun:
    turns: dict[str, list[Turn]] = field(default_factory=dict)  # kind -> one per round
    peer_ms: list[float] = field(default_factory=list)
    peer_connect_ms: float = 0.0
    floor_us: list[float] = field(default_factory=list)  # the stdio round trip's floor
    problems: list[str] = field(default_factory=list)


def _text(kind: str, n: int) -> str:
    if kind in (ASK_WRITE, AUTO_WRITE):
        return f"/write notes.txt version {n}\n"
    if kind == MCP:
        return "/mcp " + MCP_NAME + " echo " + json.dumps({"text": f"round {n}"})
    if kind == PLAIN:
        return "hi"
    return "$ true"


def _open(client: PipeClient, cwd: Path, approval: str, sandbox: str, mcp: bool) -> str:
    cwd.mkdir(parents=True, exist_ok=True)
    servers = [{"name": MCP_NAME, "command": python(), "args": [str(SERVER)], "env": []}]
    result: dict[str, Any] = client.call(
        "session/new",
        {
            "cwd": str(cwd),
            "mcpServers": servers if mcp else [],
            "_meta": {"approval": approval, "sandbox": sandbox},
        },
    )
    return str(result["sessionId"])


async def measure(work: Path, rounds: int, warmup: int, rng: random.Random) -> TurnsRun:
    run = TurnsRun()
    kinds = [*SESSIONS, PLAIN, PEER, FLOOR]
    run.turns = {kind: [] for kind in kinds if kind not in (PEER, FLOOR)}
    client = PipeClient(
        sidecar_argv(work / "data", "sqlite", "--no-checkpoints"), log_path(work, "sidecar.log")
    )
    floor = PipeClient(floor_argv(evented=True), log_path(work, "floor.log"))
    driver = TurnClient(client, run.problems)
    try:
        initialize(client)
        sessions = {
            kind: _open(client, work / f"cwd-{i}", *setting, mcp=kind == MCP)
            for i, (kind, setting) in enumerate(SESSIONS.items())
        }
        sessions[PLAIN] = sessions[MCP]
        async with McpPeer() as peer:
            run.peer_connect_ms = peer.connect_ms
            wait_for(
                lambda: mcp_connected(client, sessions[MCP], MCP_NAME),
                MCP_SETTLE, "the sidecar's MCP server did not connect",
            )  # fmt: skip
            for n in range(warmup + rounds):
                rng.shuffle(kinds)
                for kind in kinds:
                    if kind == FLOOR:  # a permission request's size, answered as one
                        took, _ = floor.timed(
                            "session/request_permission",
                            {
                                "sessionId": "s",
                                "toolCall": {
                                    "toolCallId": f"call_{n}",
                                    "title": "true",
                                    "rawInput": {"command": "true"},
                                },
                            },
                        )
                        if n >= warmup:
                            run.floor_us.append(took)
                        continue
                    if kind == PEER:
                        took = await peer.call_ms(f"round {n}")
                        if n >= warmup:
                            run.peer_ms.append(took)
                        continue
                    turn = driver.turn(sessions[kind], _text(kind, n))
                    if kind != PLAIN and turn.status != "completed":
                        run.problems.append(
                            f"{kind}: the tool call ended {turn.status or 'unseen'}"
                        )
                    if n >= warmup:
                        run.turns[kind].append(turn)
    finally:
        client.close()
        floor.close()
    for kind in (ASK, ASK_WRITE):
        if any(t.asked < 0 for t in run.turns[kind]):
            run.problems.append(f"{kind}: some turns were not asked about")
    for kind in (AUTO, OFF, AUTO_WRITE, MCP):
        if any(t.asked >= 0 for t in run.turns[kind]):
            run.problems.append(f"{kind}: some turns were asked about")
    return run
