"""Where a round trip goes: the sidecar's own pieces timed in-process, no pipe.

A whole `session/prompt` through the real dispatcher (`RpcServer._handle`, the real
handlers, runtime and offline model, a writer that only keeps the lines) with each store,
so the pipe and the client are out of the figure; the turn's two store writes alone; and
the pieces of a `_session/status` (its params model, the store read, the summary, the
dispatch around a handler that does nothing). p50 over many calls each.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.core import Stats

Piece = tuple[str, float]
ROTATE = 50  # prompts per session, as the round trips rotate them


class _Lines:
    """The stdio writer's interface, keeping the lines (nothing is written anywhere)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def send(self, line: bytes) -> None:
        self.lines.append(line)

    async def below(self, lines: int) -> None:
        return None


def _p50(fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    return Stats.of(samples).p50


async def _prompts(work: Path, store_kind: str, n: int) -> float:
    """p50 µs of `session/prompt` "hi" through the real dispatcher, sessions made first."""
    from sidecar.acp import preload
    from sidecar.acp.initialize import ClientOptions
    from sidecar.acp.server import RpcServer
    from sidecar.config import open_store, parse_args
    from sidecar.wiring import load_assembly

    data, cwd = work / f"data-{store_kind}", Path(tempfile.mkdtemp(prefix="s1-breakdown-"))
    config = parse_args(["--data-dir", str(data), "--store", store_kind, "--no-checkpoints"])
    store = await open_store(config)
    lines = _Lines()
    server = RpcServer(lines)  # type: ignore[arg-type]  # the writer's interface, kept lines
    preload.ACP.ensure()
    assembly = load_assembly().build(config, store, server, ClientOptions(), lambda: None)
    handlers = assembly.handlers
    ids = iter(range(1, 1 << 30))

    async def call(method: str, params: dict[str, Any]) -> Any:
        lines.lines.clear()
        request = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        await server._handle(json.dumps(request).encode())
        return next(json.loads(line) for line in lines.lines if b'"result"' in line)

    for name, handler in handlers.items():
        server.register(name, handler)
    try:
        sessions = [
            (await call("session/new", {"cwd": str(cwd), "mcpServers": []}))["result"]["sessionId"]
            for _ in range(max(1, n // ROTATE))
        ]
        samples = []
        for i in range(n):
            params = {
                "sessionId": sessions[i // ROTATE % len(sessions)],
                "prompt": [{"type": "text", "text": "hi"}],
            }
            started = time.perf_counter_ns()
            await call("session/prompt", params)
            samples.append((time.perf_counter_ns() - started) / 1000.0)
        return Stats.of(samples[n // 10 :]).p50
    finally:
        await assembly.manager.shutdown()
        await store.close()


async def _writes(store: Any, n: int) -> float:
    """p50 µs of a turn's two record writes (running with the user row; the reply with
    idle and the usage), as `TurnRunner` makes them."""
    from protocol.values import Backend, Mode, Status
    from sidecar.domain.records import SessionRecord, now

    stamp = now()
    record = SessionRecord(
        "sess_writes", "/tmp", "t", Mode.CRAFT, Backend.PIPE, Status.IDLE, 1, stamp, stamp
    )
    await store.insert(record)
    samples = []
    for turn in range(1, n + 1):
        started = time.perf_counter_ns()
        await store.update(
            record.session_id, 1, append={"role": "user", "content": "hi", "turn": turn},
            status=Status.RUNNING, interrupted=False, turns=turn,
        )  # fmt: skip
        await store.update(
            record.session_id, 1, append={"role": "assistant", "content": "Echo: hi"},
            status=Status.IDLE, usage_input=turn, usage_output=turn,
        )  # fmt: skip
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    await store.close()
    return Stats.of(samples).p50


def _status_pieces(work: Path, n: int) -> list[Piece]:
    from protocol.models import StatusParams
    from protocol.values import Backend, Mode
    from sidecar.acp.server import RpcServer
    from sidecar.core.views import SessionView
    from sidecar.domain.records import SessionRecord, SessionState, now
    from sidecar.store.blocking import blocking
    from sidecar.store.sqlite import SqliteSessionStore
    from sidecar.wire.summary import summary as render

    store, close_store = blocking(lambda: SqliteSessionStore(work / "breakdown.db"))
    stamp = now()
    record = SessionRecord(
        "sess_breakdown", str(work), "Breakdown", Mode.CRAFT, Backend.PIPE, SessionState.CLOSED,
        1, stamp, stamp, model="offline-echo",
    )  # fmt: skip
    store.insert(record)
    params = {"sessionId": record.session_id}
    summary = render(SessionView(record, True, "http://127.0.0.1:1", "t" * 43, None))
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "_session/status", "params": params})
    reply = {"jsonrpc": "2.0", "result": summary, "id": 7}

    async def fixed(_params: dict[str, Any]) -> dict[str, Any]:
        return summary

    server = RpcServer(_Lines())  # type: ignore[arg-type]
    server.register("_session/status", fixed)

    async def dispatch() -> None:
        await server._handle(request.encode())

    try:
        return [
            ("JSON parse + serialize (what the floor does)", _p50(lambda: json.dumps(json.loads(request) and reply), n)),
            ("request model (StatusParams.model_validate)", _p50(lambda: StatusParams.model_validate(params), n)),
            ("store read (SqliteSessionStore.get, through a blocking adapter's loop)", _p50(lambda: store.get(record.session_id), n)),
            ("summary (wire.summary: a plain dict, ISO times)", _p50(lambda: render(SessionView(record, True, "http://127.0.0.1:1", "t", None)), n)),
            ("dispatch around a no-op handler (parse, route, reply, encode)", asyncio.run(_loop_p50(dispatch, n))),
        ]  # fmt: skip
    finally:
        close_store()


async def _loop_p50(fn: Callable[[], Awaitable[object]], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await fn()
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    return Stats.of(samples).p50


def measure(work: Path, n: int) -> list[Piece]:
    """p50 µs of each piece."""
    from sidecar.store.memory import MemorySessionStore
    from sidecar.store.sqlite import SqliteSessionStore

    prompts = max(ROTATE, n // 2)
    return [
        ("a prompt in-process, memory store (dispatch, turn, offline model, 3 notifications)", asyncio.run(_prompts(work, "memory", prompts))),
        ("a prompt in-process, SQLite store", asyncio.run(_prompts(work, "sqlite", prompts))),
        ("the turn's two writes alone, memory store", asyncio.run(_writes(MemorySessionStore(), n))),
        ("the turn's two writes alone, SQLite store (two transactions)", asyncio.run(_writes(SqliteSessionStore(work / "writes.db", merge_when_idle=False), n))),
        *_status_pieces(work, n),
    ]  # fmt: skip
