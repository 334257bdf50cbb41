"""Where a `_session/status` round trip goes: the sidecar's pieces timed in-process.

Each piece is the real code (the sidecar's store, summary builder, request model,
JSON-RPC wrapper and validator) called directly, p50 over many calls, so the report
can say which part of the gap to the floor is what. The serve loop's per-line
asyncio work (one long-lived read loop, a task per request) is emulated with the same
calls, since it cannot be called on its own.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.core import Stats

Piece = tuple[str, float]


def _p50(fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    return Stats.of(samples).p50


async def _ap50(fn: Callable[[], Awaitable[object]], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await fn()
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    return Stats.of(samples).p50


async def _serve_loop_emulation() -> None:
    """What `RpcServer` does per line besides dispatching it: a task per request."""

    async def handle() -> None:
        return None

    await asyncio.create_task(handle())


def measure(work: Path, n: int) -> list[Piece]:
    """p50 µs of each piece of the sidecar's status path."""
    from jsonrpcserver import async_dispatch

    from protocol.framing import encode_message
    from protocol.models import StatusParams
    from protocol.values import Backend, Mode
    from sidecar.acp.server import Handler, _direct, call_handler, validate_request, wrap
    from sidecar.core.views import SessionView
    from sidecar.domain.records import SessionRecord, SessionState, now
    from sidecar.store.blocking import blocking
    from sidecar.store.sqlite import SqliteSessionStore
    from sidecar.wire.summary import summary as render

    def build_summary(record: SessionRecord, **live: Any) -> dict[str, Any]:
        view = SessionView(record, True, live["url"], live["token"], None)
        return render(view)

    store, close_store = blocking(lambda: SqliteSessionStore(work / "breakdown.db"))
    stamp = now()
    record = SessionRecord(
        "sess_breakdown", str(work), "Breakdown", Mode.CRAFT, Backend.PIPE, SessionState.CLOSED,
        1, stamp, stamp, model="offline-echo",
    )  # fmt: skip
    store.insert(record)
    params = {"sessionId": record.session_id}
    summary = build_summary(record, live=True, url="http://127.0.0.1:1", token="t" * 43)
    request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "_session/status", "params": params})
    reply = {"jsonrpc": "2.0", "result": summary, "id": 7}

    async def fixed(_params: dict[str, Any]) -> dict[str, Any]:
        return summary

    method = wrap(fixed)
    methods = {"_session/status": method}

    async def dispatch() -> object:
        return await async_dispatch(request, methods=methods, validator=validate_request)

    handlers: dict[str, Handler] = {"_session/status": fixed}

    async def direct() -> object:
        parsed = json.loads(request)
        found = _direct(parsed, handlers)
        assert found is not None
        result, _ = await call_handler(*found)
        return encode_message({"jsonrpc": "2.0", "result": result, "id": parsed["id"]})

    pieces: list[Piece] = [
        ("JSON parse + serialize (what the floor does)", _p50(lambda: json.dumps(json.loads(request) and reply), n)),
        ("request model (StatusParams.model_validate)", _p50(lambda: StatusParams.model_validate(params), n)),
        ("store read (SqliteSessionStore.get, through a blocking adapter's loop)", _p50(lambda: store.get(record.session_id), n)),
        ("summary (wire.summary: a plain dict, ISO times)", _p50(lambda: build_summary(record, live=True, url="http://127.0.0.1:1", token="t"), n)),
        ("direct dispatch around a no-op handler (parse, route, reply, encode)", asyncio.run(_ap50(direct, n))),
        ("jsonrpcserver's whole pipeline around it (batches and errors only)", asyncio.run(_ap50(dispatch, n))),
        ("serve loop per line (a task per request), emulated", asyncio.run(_ap50(_serve_loop_emulation, n))),
    ]  # fmt: skip
    close_store()
    return pieces
