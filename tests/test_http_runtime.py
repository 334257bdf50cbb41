"""The per-session HTTP listener against the real runtime, through a real `python -m sidecar`.

test_http_listener.py checks the listener against a fake target; here every
request reaches a live SessionRuntime in a child process, and what HTTP does is
checked against what the stdio client sees of the same session.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
from harness import Sidecar, eventually

from desktop.client import RpcError
from protocol.errors import ErrorCode

OPENAPI = Path(__file__).resolve().parent.parent / "protocol" / "openapi.json"
BIND_DENIED = Path(__file__).resolve().parent / "bind_denied"
STEP = 5.0  # seconds any single step may take


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def endpoint(sidecar: Sidecar, summary: dict[str, Any]) -> tuple[str, str]:
    """The session's listener URL and token: the token from `_session/http`, never from a
    summary (which carries the URL alone)."""
    http = summary["http"]
    assert http is not None, f"session has no HTTP endpoint: {summary}"
    url, token = await sidecar.endpoint(summary["sessionId"])
    assert http == {"url": url}, f"the summary's http is not the listener's URL alone: {http}"
    return url, token


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session:
        yield session


async def call(
    http: aiohttp.ClientSession,
    method: str,
    url: str,
    token: str | None,
    *,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> tuple[int, Any]:
    """One request; the answer must be JSON (success or error alike)."""
    all_headers = {**(bearer(token) if token is not None else {}), **(headers or {})}
    async with http.request(method, url, headers=all_headers, **kwargs) as resp:
        assert resp.content_type == "application/json", (
            f"{method} {url}: {resp.status} with {resp.content_type}: {await resp.text()!r}"
        )
        return resp.status, await resp.json()


def assert_json_error(status: int, body: Any, expected: int, words: str) -> None:
    assert status == expected, f"expected {expected}, got {status}: {body}"
    assert isinstance(body, dict) and set(body) == {"error"}, f"not an error object: {body}"
    assert isinstance(body["error"], str) and words in body["error"], body


def mark(sidecar: Sidecar) -> int:
    """A position in the notification log; see `wait_state_after`."""
    return len(sidecar.seen)


async def wait_state_after(sidecar: Sidecar, since: int, session_id: str, status: str) -> None:
    """Wait for a `_session/state` notification sent after the `since` mark."""

    def seen() -> bool:
        return status in states_after(sidecar, since, session_id)

    assert await eventually(seen, STEP), (
        f"no {status!r} state for {session_id} after mark {since}; "
        f"saw {states_after(sidecar, since, session_id)}"
    )


def states_after(sidecar: Sidecar, since: int, session_id: str) -> list[str]:
    return [
        p["status"]
        for m, p in sidecar.seen[since:]
        if m == "_session/state" and p.get("sessionId") == session_id
    ]


def updates_after(sidecar: Sidecar, since: int, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [
        p["update"]
        for m, p in sidecar.seen[since:]
        if m == "session/update"
        and p.get("sessionId") == session_id
        and p["update"].get("sessionUpdate") == kind
    ]


async def read_event(resp: aiohttp.ClientResponse) -> dict[str, Any]:
    """One SSE frame as {"id", "event", "data"}, skipping comment lines."""
    frame: dict[str, Any] = {}
    while True:
        raw = await asyncio.wait_for(resp.content.readline(), STEP)
        assert raw, f"event stream ended; partial frame {frame}"
        line = raw.decode().rstrip("\n")
        if line == "" and frame:
            return frame
        if not line or line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        frame[key] = int(value) if key == "id" else json.loads(value) if key == "data" else value


async def read_turn(resp: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """Frames up to and including the turn's `turn_end`."""
    frames = [await read_event(resp)]
    while frames[-1]["event"] != "turn_end":
        frames.append(await read_event(resp))
    return frames


async def refuses_connection(url: str) -> bool:
    host, _, port = url.removeprefix("http://").rpartition(":")
    try:
        _, writer = await asyncio.open_connection(host, int(port))
    except ConnectionRefusedError:
        return True
    writer.close()
    return False


# -- turns over HTTP, seen over stdio --------------------------------------------------


async def test_send_runs_a_turn_visible_over_stdio(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    sid = (summary := await sidecar.new_session(workspace))["sessionId"]
    url, token = await endpoint(sidecar, summary)
    since = mark(sidecar)

    status, body = await call(http, "POST", f"{url}/agent/send", token, json={"message": "hello"})
    assert status == 200, body
    assert body == {"response": "Echo: hello", "stopReason": "end_turn"}

    over_stdio = await sidecar.messages(sid)
    status, over_http = await call(http, "GET", f"{url}/agent/messages?offset=0&limit=10", token)
    assert status == 200, over_http
    assert over_http == over_stdio
    assert over_http["total"] == 2
    assert [(m["type"], m["text"]) for m in over_http["messages"]] == [
        ("user", "hello"),
        ("assistant", "Echo: hello"),
    ]
    status, page = await call(http, "GET", f"{url}/agent/messages?offset=1&limit=10", token)
    assert page == {"messages": over_stdio["messages"][1:], "total": 2}

    # The stdio client saw the HTTP-started turn like one of its own.
    await wait_state_after(sidecar, since, sid, "idle")
    assert states_after(sidecar, since, sid) == ["running", "idle"]
    users = updates_after(sidecar, since, sid, "user_message_chunk")
    assert [u["content"]["text"] for u in users] == ["hello"]
    chunks = updates_after(sidecar, since, sid, "agent_message_chunk")
    assert "".join(u["content"]["text"] for u in chunks) == "Echo: hello"
    assert (await sidecar.status(sid))["messageCount"] == 2


async def test_http_status_is_the_stdio_summary_without_the_token(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    summary = await sidecar.new_session(workspace, title="Status check", mode="plan")
    sid = summary["sessionId"]
    url, token = await endpoint(sidecar, summary)
    await sidecar.prompt(sid, "one turn so the counts move")

    over_stdio = await sidecar.status(sid)
    status, over_http = await call(http, "GET", f"{url}/agent/status", token)
    assert status == 200, over_http
    assert over_stdio["http"] == {"url": url}, "the stdio summary carries the token"
    assert token not in json.dumps(over_stdio)
    assert over_http["http"] == {"url": url}
    assert "token" not in over_http["http"], "the listener handed out its own token"
    assert token not in json.dumps(over_http)
    assert over_http == over_stdio
    assert (over_http["status"], over_http["messageCount"], over_http["mode"]) == (
        "idle",
        2,
        "plan",
    )


async def test_http_responses_match_the_openapi_schemas(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    doc = json.loads(OPENAPI.read_text())

    def check(name: str, instance: Any) -> None:
        root = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        errors = list(jsonschema.Draft202012Validator(root).iter_errors(instance))
        assert not errors, (
            f"real runtime's response breaks protocol/openapi.json {name}: "
            + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
        )

    summary = await sidecar.new_session(workspace)
    url, token = await endpoint(sidecar, summary)
    _, sent = await call(http, "POST", f"{url}/agent/send", token, json={"message": "hi"})
    check("SendResponse", sent)
    _, page = await call(http, "GET", f"{url}/agent/messages", token)
    check("MessagesResponse", page)
    _, aborted = await call(http, "POST", f"{url}/agent/abort", token)
    check("AbortResponse", aborted)
    _, refused = await call(http, "GET", f"{url}/agent/status", None)
    check("Error", refused)
    _, status = await call(http, "GET", f"{url}/agent/status", token)
    assert status["http"] == {"url": url}, (
        "GET /agent/status must carry http = {url} alone (openapi.json HttpEndpoint: the "
        f"bearer token is never in a summary). Got http={status['http']}"
    )
    check("SessionSummary", status)


async def test_a_turns_changes_over_http_are_the_acp_body_with_hunk_ids(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    """`GET /agent/changes` is the HTTP twin of `_session/changes`: the same body, each
    file's hunks with the ids `_session/revert` takes; a turn not there is 404."""
    doc = json.loads(OPENAPI.read_text())
    schema = {"$ref": "#/components/schemas/TurnChanges", "components": doc["components"]}
    summary = await sidecar.new_session(workspace, approval="auto")
    sid = summary["sessionId"]
    url, token = await endpoint(sidecar, summary)
    status, body = await call(http, "GET", f"{url}/agent/changes", token)
    assert_json_error(status, body, 404, "no turns yet")
    (workspace / "kept.py").write_text("".join(f"line {i}\n" for i in range(20)))
    await sidecar.prompt(sid, "/write notes.txt hello")
    await sidecar.prompt(sid, "/edit kept.py 'line 2' 'line two'")
    for query, turn in (("", 2), ("?turn=1", 1), ("?turn=2", 2)):
        status, body = await call(http, "GET", f"{url}/agent/changes{query}", token)
        assert status == 200, body
        over_acp = await sidecar.call("_session/changes", {"sessionId": sid, "turn": turn})
        assert body == over_acp
        jsonschema.Draft202012Validator(schema).validate(body)
    (changed,) = body["files"]
    assert changed["path"] == "kept.py" and changed["hunks"][0]["id"]
    assert "+line two" in changed["hunks"][0]["lines"]
    status, body = await call(http, "GET", f"{url}/agent/changes?turn=3", token)
    assert_json_error(status, body, 404, "no turn 3: the session has 2 turn(s)")
    for bad in ("0", "x", "-1"):
        status, body = await call(http, "GET", f"{url}/agent/changes?turn={bad}", token)
        assert_json_error(status, body, 400, "turn")


# -- one turn at a time, whichever door it came through ------------------------------------


async def test_busy_is_shared_between_http_and_stdio(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    sid = (summary := await sidecar.new_session(workspace))["sessionId"]
    url, token = await endpoint(sidecar, summary)

    # A stdio turn is running: HTTP send is 409.
    since = mark(sidecar)
    stdio_turn = sidecar.prompt_task(sid, "/sleep 1.5 via stdio")
    await wait_state_after(sidecar, since, sid, "running")
    status, body = await call(
        http, "POST", f"{url}/agent/send", token, json={"message": "refused over http"}
    )
    assert_json_error(status, body, 409, "busy")
    result = await asyncio.wait_for(stdio_turn, STEP)
    assert (result["stopReason"], result["_meta"]["response"]) == (
        "end_turn",
        "Slept 1.5 s. via stdio",
    )

    # An HTTP turn is running: a stdio prompt is -32042 (busy).
    since = mark(sidecar)
    http_turn = asyncio.ensure_future(
        call(http, "POST", f"{url}/agent/send", token, json={"message": "/sleep 1.5 via http"})
    )
    await wait_state_after(sidecar, since, sid, "running")
    with pytest.raises(RpcError) as refused:
        await sidecar.prompt(sid, "refused over stdio")
    assert refused.value.code == ErrorCode.SESSION_BUSY == -32042, refused.value
    assert "busy" in refused.value.message
    status, body = await asyncio.wait_for(http_turn, STEP)
    assert (status, body) == (200, {"response": "Slept 1.5 s. via http", "stopReason": "end_turn"})

    users = [m["text"] for m in (await sidecar.messages(sid))["messages"] if m["type"] == "user"]
    assert users == ["/sleep 1.5 via stdio", "/sleep 1.5 via http"]  # refusals were not queued
    assert (await sidecar.status(sid))["status"] == "idle"


async def test_http_abort_cancels_a_stdio_turn(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    sid = (summary := await sidecar.new_session(workspace))["sessionId"]
    url, token = await endpoint(sidecar, summary)
    since = mark(sidecar)
    turn = sidecar.prompt_task(sid, "/sleep 30 never answered")
    await wait_state_after(sidecar, since, sid, "running")

    started = time.monotonic()
    status, body = await call(http, "POST", f"{url}/agent/abort", token)
    assert (status, body) == (200, {"status": "abort_requested", "running": True})
    result = await asyncio.wait_for(turn, STEP)
    assert result["stopReason"] == "cancelled", result
    assert time.monotonic() - started < STEP

    await wait_state_after(sidecar, since, sid, "idle")
    assert states_after(sidecar, since, sid) == ["running", "idle"]
    assert (await sidecar.status(sid))["status"] == "idle"
    _, over_http = await call(http, "GET", f"{url}/agent/status", token)
    assert over_http["status"] == "idle" and over_http["live"] is True
    contents = [m["text"] for m in (await sidecar.messages(sid))["messages"]]
    assert contents[0] == "/sleep 30 never answered"
    assert not any("Slept" in str(c) for c in contents)
    # Nothing left to abort; the session takes the next turn.
    assert await call(http, "POST", f"{url}/agent/abort", token) == (
        200,
        {"status": "abort_requested", "running": False},
    )
    assert (await sidecar.prompt(sid, "after"))["_meta"]["response"] == "Echo: after"


# -- server-sent events ------------------------------------------------------------------


async def test_sse_streams_a_real_turn_and_replays_after_last_event_id(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    summary = await sidecar.new_session(workspace)
    url, token = await endpoint(sidecar, summary)
    async with http.get(f"{url}/agent/events", headers=bearer(token)) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        status, body = await call(
            http, "POST", f"{url}/agent/send", token, json={"message": "$ echo x"}
        )
        assert status == 200 and body["stopReason"] == "end_turn", body
        frames = await read_turn(resp)

    ids = [f["id"] for f in frames]
    assert ids == list(range(ids[0], ids[0] + len(ids))), f"ids not consecutive: {ids}"
    kinds = [f["event"] for f in frames]
    # The turn opens with the running state and the user's message (in either order).
    opening = sorted(
        (f["event"], f["data"].get("status") or f["data"].get("text")) for f in frames[:2]
    )
    assert opening == [("state", "running"), ("user_message", "$ echo x")], frames[:2]
    states = [f["data"]["status"] for f in frames if f["event"] == "state"]
    assert states == ["running", "idle"], states
    assert kinds[-1] == "turn_end" and frames[-1]["data"]["stopReason"] == "end_turn"

    tool_calls = [f["data"] for f in frames if f["event"] == "tool_call"]
    assert len(tool_calls) == 1 and tool_calls[0]["command"] == "echo x", tool_calls
    call_id = tool_calls[0]["toolCallId"]
    tool_updates = [f["data"] for f in frames if f["event"] == "tool_call_update"]
    assert tool_updates and all(u["toolCallId"] == call_id for u in tool_updates)
    assert tool_updates[0]["status"] == "in_progress"
    assert tool_updates[-1]["status"] == "completed" and tool_updates[-1]["exitCode"] == 0
    assert "x" in "".join(u.get("output", "") for u in tool_updates)
    assert kinds.index("tool_call") < kinds.index("tool_call_update")
    text = "".join(f["data"]["text"] for f in frames if f["event"] == "agent_message_chunk")
    assert text == body["response"] and text.startswith("`echo x` exited with status 0")
    assert kinds.index("tool_call_update") < kinds.index("agent_message_chunk")

    # Reconnect after the turn's opening: exactly the later events, then live ones.
    last = frames[1]["id"]
    async with http.get(
        f"{url}/agent/events", headers={**bearer(token), "Last-Event-ID": str(last)}
    ) as resp:
        assert resp.status == 200
        replayed = [await read_event(resp) for _ in frames[2:]]
        assert replayed == frames[2:]
        status, body = await call(http, "POST", f"{url}/agent/send", token, json={"message": "z"})
        assert status == 200, body
        live = await read_event(resp)
    assert live["id"] == frames[-1]["id"] + 1, f"gap or duplicate after the replay: {live}"
    assert (live["event"], live["data"]["status"]) == ("state", "running")


# -- generations ----------------------------------------------------------------------


async def test_close_and_resume_replace_the_listener_and_the_token(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    sid = (first := await sidecar.new_session(workspace))["sessionId"]
    old_url, old_token = await endpoint(sidecar, first)
    status, _ = await call(http, "POST", f"{old_url}/agent/send", old_token, json={"message": "a"})
    assert status == 200

    async with http.get(f"{old_url}/agent/events", headers=bearer(old_token)) as stream:
        closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
        assert closed["status"] == "closed" and closed["http"] is None
        with pytest.raises(RpcError) as not_live:
            await sidecar.endpoint(sid)
        assert not_live.value.code == ErrorCode.SESSION_NOT_LIVE
        ended = await asyncio.wait_for(stream.content.read(), STEP)
        assert ended.endswith(b"\n\n"), ended  # ended between frames
        # The stream says why it ends: the closing state is flushed before the listener stops.
        assert b"event: state" in ended and b'"status":"closing"' in ended.replace(b" ", b""), ended
    assert await refuses_connection(old_url), f"closed session's listener still accepts: {old_url}"

    resumed = (await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
        "_meta"
    ]
    new_url, new_token = await endpoint(sidecar, resumed)
    assert resumed["generation"] == 2 and resumed["status"] == "idle"
    assert new_token != old_token
    if new_url != old_url:  # the OS may (rarely) hand the freed port out again
        assert await refuses_connection(old_url), f"old listener came back: {old_url}"

    status, body = await call(http, "GET", f"{new_url}/agent/status", old_token)
    assert_json_error(status, body, 401, "token")
    status, body = await call(http, "GET", f"{new_url}/agent/status", new_token)
    assert status == 200, body
    assert (body["generation"], body["status"], body["live"]) == (2, "idle", True)
    assert body["http"]["url"] == new_url
    assert body == await sidecar.status(sid)
    _, page = await call(http, "GET", f"{new_url}/agent/messages", new_token)
    assert page["total"] == 2 and [m["text"] for m in page["messages"]] == ["a", "Echo: a"]


# -- refusals stay local ---------------------------------------------------------------


async def test_refused_requests_are_json_and_leave_other_sessions_alone(
    sidecar: Sidecar, workspace: Path, http: aiohttp.ClientSession
) -> None:
    a_sid = (a := await sidecar.new_session(workspace, title="A"))["sessionId"]
    b_sid = (b := await sidecar.new_session(workspace, title="B"))["sessionId"]
    a_url, a_token = await endpoint(sidecar, a)
    b_url, b_token = await endpoint(sidecar, b)
    assert a_url != b_url and a_token != b_token
    port = a_url.rsplit(":", 1)[1]

    status, body = await call(
        http, "GET", f"{a_url}/agent/status", a_token, headers={"Host": f"evil.example:{port}"}
    )
    assert_json_error(status, body, 403, "Host")
    status, body = await call(
        http,
        "POST",
        f"{a_url}/agent/send",
        a_token,
        headers={"Origin": "http://evil.example"},
        json={"message": "from a web page"},
    )
    assert_json_error(status, body, 403, "Origin")
    status, body = await call(http, "GET", f"{a_url}/agent/status", None)
    assert_json_error(status, body, 401, "Authorization")
    status, body = await call(http, "GET", f"{a_url}/agent/status", b_token)
    assert_json_error(status, body, 401, "token")  # one session's token opens no other
    big = b'{"message": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    status, body = await call(
        http,
        "POST",
        f"{a_url}/agent/send",
        a_token,
        data=big,
        headers={"Content-Type": "application/json"},
    )
    assert_json_error(status, body, 413, "too large")
    assert (await sidecar.status(a_sid))["messageCount"] == 0  # nothing got through to a turn

    # The other session is untouched and works, over HTTP and stdio.
    status, b_status = await call(http, "GET", f"{b_url}/agent/status", b_token)
    assert status == 200
    assert b_status == await sidecar.status(b_sid)
    assert b_status["status"] == "idle"
    status, body = await call(
        http, "POST", f"{b_url}/agent/send", b_token, json={"message": "still fine"}
    )
    assert (status, body) == (200, {"response": "Echo: still fine", "stopReason": "end_turn"})
    assert (await sidecar.prompt(b_sid, "and here"))["_meta"]["response"] == "Echo: and here"
    # And so does the session that was hammered.
    status, body = await call(http, "POST", f"{a_url}/agent/send", a_token, json={"message": "ok"})
    assert (status, body) == (200, {"response": "Echo: ok", "stopReason": "end_turn"})
    assert (await sidecar.status(a_sid))["status"] == "idle"


# -- no socket binding allowed ----------------------------------------------------------


async def test_session_works_without_http_when_binding_is_not_permitted(
    data_dir: Path, workspace: Path
) -> None:
    assert (BIND_DENIED / "sitecustomize.py").is_file()
    pythonpath = os.pathsep.join(p for p in (str(BIND_DENIED), os.environ.get("PYTHONPATH")) if p)
    sidecar = await Sidecar.start(data_dir, env={"PYTHONPATH": pythonpath})
    try:
        stderr = sidecar.client.stderr_tail
        assert await eventually(lambda: "bind_denied sitecustomize active" in stderr, STEP), (
            "the child did not load tests/bind_denied/sitecustomize.py: " + "\n".join(stderr)
        )
        summary = await sidecar.new_session(workspace)
        sid = summary["sessionId"]
        assert summary["status"] == "idle" and summary["live"] is True, summary
        assert summary["http"] is None, summary
        assert await eventually(
            lambda: any("socket binding unavailable" in line for line in stderr), STEP
        ), "no 'socket binding unavailable' warning on stderr:\n" + "\n".join(stderr)

        result = await sidecar.prompt(sid, "hello")
        assert (result["stopReason"], result["_meta"]["response"]) == ("end_turn", "Echo: hello")
        status = await sidecar.status(sid)
        assert (status["status"], status["http"], status["messageCount"]) == ("idle", None, 2)
    finally:
        assert await sidecar.close() == 0
