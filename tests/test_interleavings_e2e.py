"""Every pair of session operations, racing, on one real sidecar: the class of bug issue 10
found (a cancel lost behind its prompt, a resume and a close leaving two runtimes), looked
for systematically instead of one case at a time.

For an ordered pair (A, B) of {prompt, cancel, resume, close, load, status, set_mode,
fork, delete}, a fresh session is put in a starting state (idle and live, closed, or
running a turn), then A and B are written to stdin in ONE write, or a few milliseconds
apart (0, 1, 5 ms). Each case then checks:

- exactly one answer per request, by id, and never an internal error (-32603) or a
  refusal of the request's shape;
- a consistent state: `_session/status` against liveness against `_session/http` (live:
  its port accepts and `GET /agent/status` answers with the token; not live: -32044;
  deleted: not found everywhere);
- the session can be brought to a known state (close -> closed, resume -> live idle) and
  prompted, and then no listener any of its runtimes ever had still accepts.

HTTP `send`/`abort` pairs run the same way against one live session's listener, on two
connections written back to back ("one-write") or a few milliseconds apart.

The matrix: all ordered pairs x starting states in one write always run; the spaced
variants (0, 1, 5 ms) run as a seeded random sample (`INTERLEAVINGS_SEED`, default 10;
`INTERLEAVINGS_SAMPLE` cases, default 200). `INTERLEAVINGS_ALL=1` runs the whole matrix.
At the end no process the sidecar started may remain (an environment marker on the
sidecar), its log has no traceback, and every line it wrote parses as strict JSON.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from raw_client import (
    RawClient,
    connectable,
    eventually,
    http,
    key,
    marked,
    parse_response,
    port_of,
    text_prompt,
)

from protocol.errors import ErrorCode

pytestmark = pytest.mark.asyncio(loop_scope="module")

METHODS = ("prompt", "cancel", "resume", "close", "load", "status", "set_mode", "fork", "delete")
STATES = ("idle", "closed", "running")
SPACINGS = ("one-write", "0ms", "1ms", "5ms")
DELAYS = {"0ms": 0.0, "1ms": 0.001, "5ms": 0.005}
HTTP_PAIRS = (("send", "abort"), ("abort", "send"), ("send", "send"), ("abort", "abort"))

SEED = int(os.environ.get("INTERLEAVINGS_SEED", "10"))
SAMPLE = int(os.environ.get("INTERLEAVINGS_SAMPLE", "200"))
RUN_ALL = os.environ.get("INTERLEAVINGS_ALL") == "1"

RUNNING_TURN = "/sleep 0.4"  # the turn a "running" session is in when the pair arrives
ANSWER = 15.0  # bound on any one answer
# Codes that mean the sidecar refused the request's shape or failed: never acceptable here.
NEVER = {
    int(ErrorCode.INTERNAL_ERROR),
    int(ErrorCode.INVALID_REQUEST),
    int(ErrorCode.INVALID_PARAMS),
    int(ErrorCode.METHOD_NOT_FOUND),
    int(ErrorCode.PARSE_ERROR),
}
NOT_FOUND = int(ErrorCode.SESSION_NOT_FOUND)
NOT_LIVE = int(ErrorCode.SESSION_NOT_LIVE)
RUNTIME_LIVE = int(ErrorCode.RUNTIME_LIVE)
SESSION_BUSY = int(ErrorCode.SESSION_BUSY)
TRANSIENT = {"creating", "closing", "running"}
# Lifecycle operations on one session run one at a time, in the order they arrived: for a
# pair of them the outcome is that of running them one after the other.
LIFECYCLE = frozenset({"resume", "close", "load", "delete"})


def sequential(method: str, state: str, generation: int) -> tuple[int | None, str, int]:
    """(error code or None, next state, next generation) of `method` on a session that is
    `live`, `closed` or `gone`."""
    if state == "gone":
        return NOT_FOUND, state, generation
    if method in ("resume", "delete") and state == "live":
        return RUNTIME_LIVE, state, generation
    if method in ("resume", "load"):
        return (None, "live", generation) if state == "live" else (None, "live", generation + 1)
    if method == "close":
        return None, "closed", generation
    return None, "gone", generation  # delete of a closed session


def expected_lifecycle(first: str, second: str, state: str) -> tuple[list[int | None], str, int]:
    current = "closed" if state == "closed" else "live"
    generation = 1
    outcomes = []
    for method in (first, second):
        code, current, generation = sequential(method, current, generation)
        outcomes.append(code)
    return outcomes, current, generation


def _cases() -> list[tuple[str, str, str, str]]:
    pairs = list(itertools.product(METHODS, METHODS))
    always = [(a, b, state, "one-write") for a, b in pairs for state in STATES]
    spaced = [(a, b, state, s) for a, b in pairs for state in STATES for s in SPACINGS[1:]]
    if not RUN_ALL:
        spaced = sorted(random.Random(SEED).sample(spaced, min(SAMPLE, len(spaced))))
    return always + spaced


def _http_cases() -> list[tuple[str, str, str]]:
    return [(a, b, s) for a, b in HTTP_PAIRS for s in SPACINGS]


@dataclass
class Host:
    client: RawClient
    workspace: Path
    marker: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def host(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Host]:
    root = tmp_path_factory.mktemp("interleavings")
    workspace = root / "workspace"
    workspace.mkdir()
    marker = f"INTERLEAVE_MARK_{uuid.uuid4().hex}"
    client = await RawClient.start(
        root / "data",
        "--interrupt-grace",
        "0.2",
        "--kill-grace",
        "0.5",
        log_level="INFO",
        env={marker: "1"},
    )
    running = Host(client, workspace, marker)
    try:
        yield running
    finally:
        code = await client.close()
    assert code == 0, client.stderr_tail()
    assert await eventually(lambda: not marked(marker), 10), (
        f"processes of the sidecar outlived it: {marked(marker)}"
    )
    duplicates = {k: v for k, v in client.replies.items() if len(v) > 1}
    assert not duplicates, f"requests answered more than once: {duplicates}"
    assert client.not_strict == [], client.not_strict[:3]
    log = client.stderr_text()
    for bad in ("Traceback", "never awaited", "never retrieved"):
        assert bad not in log, f"{bad!r} in the sidecar's log:\n{log[-4000:]}"


# ---- requests -----------------------------------------------------------------------------


def request_for(method: str, sid: str, workspace: Path) -> tuple[str, dict[str, Any]]:
    opened = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    return {
        "prompt": ("session/prompt", text_prompt(sid, "/sleep 0.2")),
        "cancel": ("session/cancel", {"sessionId": sid}),
        "resume": ("session/resume", opened),
        "close": ("session/close", {"sessionId": sid}),
        "load": ("session/load", opened),
        "status": ("_session/status", {"sessionId": sid}),
        "set_mode": ("session/set_mode", {"sessionId": sid, "modeId": "plan"}),
        "fork": ("session/fork", opened),
        "delete": ("session/delete", {"sessionId": sid}),
    }[method]


async def answers(host: Host, ids: list[int], what: str) -> list[dict[str, Any]]:
    replies = []
    for request_id in ids:
        try:
            reply = await host.client.reply(request_id, ANSWER)
        except TimeoutError:
            raise AssertionError(
                f"{what}: request {request_id} not answered within {ANSWER} s; log:\n"
                + host.client.stderr_tail()
            ) from None
        error = reply.get("error")
        assert error is None or error.get("code") not in NEVER, (what, reply)
        replies.append(reply)
    return replies


def urls_in(reply: dict[str, Any]) -> list[str]:
    meta = (reply.get("result") or {}).get("_meta")
    found = meta.get("http") if isinstance(meta, dict) else None
    return [found["url"]] if isinstance(found, dict) and found.get("url") else []


async def consistent(host: Host, sid: str, what: str) -> dict[str, Any] | None:
    """The session's state, checked for agreement everywhere; None if it is gone."""
    client = host.client
    reply = await client.request("_session/status", {"sessionId": sid})
    for _ in range(100):  # a state in passing settles (every request is answered already)
        if "error" in reply or reply["result"]["status"] not in TRANSIENT:
            break
        await asyncio.sleep(0.05)
        reply = await client.request("_session/status", {"sessionId": sid})
    access = await client.request("_session/http", {"sessionId": sid})
    if "error" in reply:
        assert reply["error"]["code"] == NOT_FOUND, (what, reply)
        assert access.get("error", {}).get("code") == NOT_FOUND, (what, "deleted", access)
        listed = await client.call("session/list", {})
        assert sid not in [s["sessionId"] for s in listed["sessions"]], (what, "listed")
        return None
    status = reply["result"]
    assert status["status"] not in TRANSIENT, (what, "stuck", status)
    if status["live"]:
        assert status["status"] == "idle", (what, status)
        assert status["http"] and status["http"]["url"], (what, status)
        assert "result" in access, (what, "live but no endpoint", access)
        url, token = access["result"]["url"], access["result"]["token"]
        assert url == status["http"]["url"], (what, url, status["http"])
        try:
            code, body = await http(port_of(url), "GET", "/agent/status", token, timeout=ANSWER)
        except (OSError, TimeoutError) as exc:
            raise AssertionError(f"{what}: live, but its listener {url} fails: {exc!r}") from None
        assert code == 200, (what, code, body)
        assert body["generation"] == status["generation"] and body["live"] is True, (what, body)
    else:
        assert status["status"] in ("closed", "error"), (what, status)
        assert status["http"] is None, (what, status)
        assert access.get("error", {}).get("code") == NOT_LIVE, (what, "not live", access)
    return status


async def unreachable(urls: set[str], what: str) -> None:
    """None of these listeners (of runtimes now closed) still accepts connections. A port
    some other program took meanwhile is told apart by not answering like our listener."""
    for url in urls:
        port = port_of(url)
        if not connectable(port):
            continue
        try:
            code, body = await http(port, "GET", "/agent/status", None, timeout=5)
        except (OSError, TimeoutError, ValueError):
            continue
        ours = code == 401 and isinstance(body, dict) and "Bearer" in str(body.get("error"))
        assert not ours, f"{what}: the listener {url} of a closed runtime still answers"


async def known_state(host: Host, sid: str, what: str, urls: set[str]) -> None:
    """close -> closed, resume -> live idle, a prompt answers; closed again at the end."""
    client = host.client
    closed = await client.call("session/close", {"sessionId": sid}, timeout=ANSWER)
    assert closed["_meta"]["status"] == "closed" and closed["_meta"]["live"] is False, (
        what,
        closed,
    )
    await unreachable(urls, what)
    opened = {"sessionId": sid, "cwd": str(host.workspace), "mcpServers": []}
    resumed = await client.call("session/resume", opened, timeout=ANSWER)
    summary = resumed["_meta"]
    assert summary["status"] == "idle" and summary["live"] is True, (what, summary)
    urls.update(urls_in({"result": resumed}))
    await consistent(host, sid, f"{what}, resumed")
    answer = await client.prompt(sid, "ping", timeout=ANSWER)
    assert answer["stopReason"] == "end_turn" and "Echo: ping" in answer["_meta"]["response"]
    await client.call("session/close", {"sessionId": sid}, timeout=ANSWER)
    await unreachable(urls, f"{what}, after the final close")


async def fresh_session(host: Host, state: str) -> tuple[str, list[int], set[str]]:
    """A new session in `state`; the ids of requests still in flight, listener URLs seen."""
    client = host.client
    summary = await client.new_session(host.workspace, approval="auto")
    sid = summary["sessionId"]
    urls = {summary["http"]["url"]} if summary.get("http") else set()
    pending: list[int] = []
    if state == "closed":
        await client.call("session/close", {"sessionId": sid})
    elif state == "running":
        (turn,) = await client.together(("session/prompt", text_prompt(sid, RUNNING_TURN)))
        pending.append(turn)

        async def running() -> None:
            while (await client.status(sid))["status"] != "running":
                await asyncio.sleep(0.01)

        await asyncio.wait_for(running(), ANSWER)
    return sid, pending, urls


async def fire(
    host: Host, first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]], spacing: str
) -> list[int | None]:
    if spacing == "one-write":
        return await host.client.together(first, second)
    (a,) = await host.client.together(first)
    await asyncio.sleep(DELAYS[spacing])
    (b,) = await host.client.together(second)
    return [a, b]


# ---- the stdio matrix -------------------------------------------------------------------


@pytest.mark.parametrize(("first", "second", "state", "spacing"), _cases())
async def test_two_operations_racing(
    host: Host, first: str, second: str, state: str, spacing: str
) -> None:
    what = f"{first} + {second} on a {state} session ({spacing})"
    sid, pending, urls = await fresh_session(host, state)
    ids = await fire(
        host,
        request_for(first, sid, host.workspace),
        request_for(second, sid, host.workspace),
        spacing,
    )
    replies = await answers(host, [*ids, *pending], what)
    for method, reply in zip((first, second), replies, strict=False):
        if method in ("resume", "load"):  # a fork's reply names the fork's listener
            urls.update(urls_in(reply))
        if method == "prompt" and "result" in reply:
            assert reply["result"]["stopReason"] in ("end_turn", "cancelled"), (what, reply)
    codes = [reply.get("error", {}).get("code") for reply in replies[:2]]
    if state == "idle" and (first, second) == ("prompt", "cancel"):
        # The cancel arrived after the prompt: it finds the turn and ends it.
        assert codes == [None, None], (what, replies)
        assert replies[0]["result"]["stopReason"] == "cancelled", (what, replies)
        assert replies[1]["result"] == {"cancelled": True}, (what, replies)
    if state == "idle" and (first, second) == ("cancel", "prompt"):
        assert replies[0]["result"] == {"cancelled": False}, (what, replies)
        assert replies[1]["result"]["stopReason"] == "end_turn", (what, replies)
    if state == "running" and second == "cancel" and first not in ("close", "cancel"):
        # Nothing before it ended the turn: the cancel finds it.
        assert replies[1].get("result") == {"cancelled": True}, (what, replies)
    if state == "running" and first == "prompt":
        assert codes[0] == SESSION_BUSY, (what, replies)
    if state == "running" and second == "prompt" and first not in ("close", "cancel"):
        assert codes[1] == SESSION_BUSY, (what, replies)
    if state == "running" and (first, second) == ("close", "prompt"):
        assert codes[1] == NOT_LIVE, (what, replies)
    expected = None
    if first in LIFECYCLE and second in LIFECYCLE:
        expected = expected_lifecycle(first, second, state)
        assert codes == expected[0], (what, "expected", expected, "got", replies)
    forks = [
        (r["result"]["sessionId"], set(urls_in(r)))
        for m, r in zip((first, second), replies, strict=False)
        if m == "fork" and "result" in r
    ]
    status = await consistent(host, sid, what)
    if expected is not None:
        _, final, generation = expected
        got = "gone" if status is None else "live" if status["live"] else "closed"
        assert got == final, (what, "expected", final, "got", status)
        if status is not None:
            assert status["generation"] == generation, (what, generation, status)
    if status is not None:
        await known_state(host, sid, what, urls)
    else:
        await unreachable(urls, f"{what}, deleted")
    for fork, fork_urls in forks:
        fork_status = await consistent(host, fork, f"{what}: the fork")
        if fork_status is not None and fork_status["live"]:
            fork_urls.add(fork_status["http"]["url"])
        await host.client.call("session/close", {"sessionId": fork}, timeout=ANSWER)
        await unreachable(fork_urls, f"{what}: the fork, closed")
    for request_id in ids:
        assert len(host.client.replies[key(request_id)]) == 1, (what, request_id)


# ---- the HTTP pair --------------------------------------------------------------------------


def _http_bytes(port: int, token: str, which: str) -> bytes:
    path, body = (
        ("/agent/send", {"message": "/sleep 0.2"}) if which == "send" else ("/agent/abort", {})
    )
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data


@pytest.mark.parametrize(("first", "second", "spacing"), _http_cases())
async def test_two_http_requests_racing(host: Host, first: str, second: str, spacing: str) -> None:
    what = f"HTTP {first} + {second} ({spacing})"
    client = host.client
    sid = (await client.new_session(host.workspace, approval="auto"))["sessionId"]
    url, token = await client.endpoint(sid)
    port = port_of(url)
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    try:
        for (_, writer), which in zip(conns, (first, second), strict=True):
            writer.write(_http_bytes(port, token, which))
            if spacing != "one-write":
                await writer.drain()
                await asyncio.sleep(DELAYS[spacing])
        results = []
        for (reader, writer), which in zip(conns, (first, second), strict=True):
            await writer.drain()
            try:
                raw = await asyncio.wait_for(reader.read(), ANSWER)
            except TimeoutError:
                raise AssertionError(f"{what}: {which} not answered within {ANSWER} s") from None
            assert raw.count(b"HTTP/1.1 ") == 1, (what, which, raw[:300])
            results.append((which, *parse_response(raw)))
    finally:
        for _, writer in conns:
            writer.close()
    for which, code, body in results:
        assert code in (200, 409), (what, which, code, body)
        if which == "send" and code == 200:
            assert body["stopReason"] in ("end_turn", "cancelled"), (what, body)
        if which == "abort":
            assert code == 200 and body["status"] == "abort_requested", (what, body)
    sends = [c for w, c, _ in results if w == "send"]
    assert not sends or sends.count(200) >= 1, (what, results)
    if (first, second) == ("send", "abort"):
        # The abort was sent after the send: it must find that turn and end it.
        assert results[1][2]["running"] is True, (what, "the abort was lost", results)
        assert results[0][2]["stopReason"] == "cancelled", (what, results)
    if (first, second) == ("abort", "send"):
        assert results[0][2]["running"] is False, (what, results)
        assert results[1][2]["stopReason"] == "end_turn", (what, results)
    status = await consistent(host, sid, what)
    assert status is not None and status["live"] and status["status"] == "idle", (what, status)
    code, body = await http(port, "POST", "/agent/send", token, {"message": "after"})
    assert code == 200 and body["stopReason"] == "end_turn", (what, body)
    await known_state(host, sid, what, {url})
