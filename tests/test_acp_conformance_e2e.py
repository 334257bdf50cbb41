"""ACP conformance end to end (issue 11): a real `python -m sidecar` over its pipes.

Each test drives the sidecar the way an ACP client does and checks what the protocol
(and the README's Protocol, Sessions and Consent sections) promise: recovery after a
provider failure, -32002 for unknown sessions everywhere, client responses never
answered, a clean exit whatever signal lands during shutdown, the listener token only
where it is asked for, live command output in standard `content`, titles, slash
commands, usage, stop reasons, config options, reasoning, and our extension
notifications only for a client that asked for them.

The offline provider serves most of them; where a real provider API is needed the
loopback fakes (tests/fake_chat_server.py, tests/fake_anthropic_server.py) run as their
own processes, as in tests/test_openai_e2e.py. Small in-process subclasses add what
these tests watch or the fakes cannot script: `ModelsChatServer` counts `GET /v1/models`
listings and `ThinkingAnthropicServer` streams Anthropic thinking blocks (the Chat
Completions fake streams a reply's `reasoning` as `reasoning_content` itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import fake_anthropic_server
import pytest
from aiohttp import web
from fake_anthropic_server import FakeAnthropicServer
from fake_chat_server import FakeChatServer
from fake_process import FakeServerProcess
from harness import INITIALIZE, Sidecar, eventually, marked_processes
from raw_client import RawClient, frame, http, port_of, text_prompt

from desktop.client import RpcError
from protocol.errors import ErrorCode
from protocol.models import SessionSummary

MODEL = "test-model"
WAIT = 20.0
SUMMARY_KEYS = set(SessionSummary.model_json_schema(by_alias=True)["properties"])
SIDECAR_COMMANDS = {"compact", "rename"}
OFFLINE_COMMANDS = {"bash", "sleep", "fail"}


# --------------------------------------------------------------------------- helpers


async def rpc_error(call: Any) -> RpcError:
    """The RpcError an awaitable raises (fails if it succeeds)."""
    with pytest.raises(RpcError) as failed:
        await call
    return failed.value


def updates_of(sidecar: Sidecar, session_id: str, kind: str, since: int = 0) -> list[dict]:
    return [
        p["update"]
        for m, p in sidecar.seen[since:]
        if m == "session/update"
        and p.get("sessionId") == session_id
        and p["update"].get("sessionUpdate") == kind
    ]


def content_text(update: dict[str, Any]) -> str | None:
    """The text of a tool_call_update's standard ACP content, or None without content."""
    content = update.get("content")
    if not content:
        return None
    assert isinstance(content, list) and len(content) == 1, content
    (item,) = content
    assert item["type"] == "content" and item["content"]["type"] == "text", item
    text: str = item["content"]["text"]
    return text


async def raw_client(
    data_dir: Path, *args: str, extensions: bool, env: dict[str, str] | None = None
) -> RawClient:
    """A raw-pipes client; `extensions` asks for our notifications at initialize."""
    client = await RawClient.start(data_dir, *args, env=env, initialize=False)
    params = INITIALIZE if extensions else {"protocolVersion": 1}
    client.initialized = await client.call("initialize", params)
    return client


def raw_updates(client: RawClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [
        n["params"]["update"]
        for n in client.notifications
        if n["method"] == "session/update"
        and n["params"].get("sessionId") == session_id
        and n["params"]["update"].get("sessionUpdate") == kind
    ]


def line_index(client: RawClient, match: Callable[[dict[str, Any]], bool]) -> int:
    for index, line in enumerate(client.lines):
        with contextlib.suppress(ValueError):
            message = json.loads(line)
            if isinstance(message, dict) and match(message):
                return index
    raise AssertionError("no such line on stdout")


def reply_line(client: RawClient, request_id: int) -> int:
    return line_index(client, lambda m: "method" not in m and m.get("id") == request_id)


def commands_line(client: RawClient, session_id: str, after: int) -> int:
    for index, line in enumerate(client.lines):
        if index <= after:
            continue
        message = json.loads(line)
        params = message.get("params") or {}
        if (
            message.get("method") == "session/update"
            and params.get("sessionId") == session_id
            and params["update"].get("sessionUpdate") == "available_commands_update"
        ):
            return index
    raise AssertionError(f"no available_commands_update for {session_id} after line {after}")


async def wait_commands(client: RawClient, session_id: str, after: int) -> int:
    deadline = time.monotonic() + WAIT
    while True:
        with contextlib.suppress(AssertionError):
            return commands_line(client, session_id, after)
        assert time.monotonic() < deadline, "no available_commands_update arrived"
        await asyncio.sleep(0.02)


async def status_of(client: RawClient | Sidecar, session_id: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.call("_session/status", {"sessionId": session_id})
    return result


async def wait_status(
    client: RawClient | Sidecar, session_id: str, status: str, timeout: float = WAIT
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = await status_of(client, session_id)
        if current["status"] == status:
            return current
        assert time.monotonic() < deadline, f"{session_id} never became {status}: {current}"
        await asyncio.sleep(0.02)


def stored_records(data_dir: Path, session_ids: list[str]) -> dict[str, Any]:
    """The records as the sidecar left them in sessions.db, read without a sidecar (no
    start-up reconciliation that would mark leftovers closed)."""
    from sidecar.store.blocking import blocking
    from sidecar.store.sqlite import SqliteSessionStore

    store, close = blocking(lambda: SqliteSessionStore(data_dir / "sessions.db"))
    try:
        return {sid: store.get(sid) for sid in session_ids}
    finally:
        close()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
async def fake_openai(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "openai.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def fake_anthropic(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_anthropic_server.py", tmp_path / "anthropic.port", base_path=""
    )
    try:
        yield server
    finally:
        await server.stop()


async def start_openai(data_dir: Path, base_url: str, *args: str) -> Sidecar:
    return await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        base_url,
        *args,
        env={"OPENAI_API_KEY": "test"},
    )


async def start_anthropic(data_dir: Path, base_url: str, *args: str) -> Sidecar:
    return await Sidecar.start(
        data_dir,
        "--provider",
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        base_url,
        *args,
        env={"ANTHROPIC_API_KEY": "test"},
    )


# --- What the fakes cannot script yet, added in-process (the fakes stay unchanged). ---


class ModelsChatServer(FakeChatServer):
    """The fake Chat Completions server serving `GET /v1/models`, counting the listings."""

    def __init__(self, models: list[str]) -> None:
        super().__init__(models=models)
        self.model_listings = 0

    async def _list_models(self, request: web.Request) -> web.Response:
        self.model_listings += 1
        return await super()._list_models(request)


class ThinkingAnthropicServer(FakeAnthropicServer):
    """The fake Messages API; a reply's `"thinking": [pieces]` and `"signature"` stream as
    a thinking block (thinking_delta + signature_delta) before its other blocks, as the
    API does with extended thinking (the fake cannot script them)."""

    def _events(self, body: dict[str, Any], reply: dict[str, Any]) -> list[tuple[str, str]]:
        out = super()._events(body, reply)
        pieces = reply.get("thinking")
        if not pieces:
            return out
        start = {"type": "thinking", "thinking": "", "signature": ""}
        thinking: list[dict[str, Any]] = [
            {"type": "content_block_start", "index": 0, "content_block": start}
        ]
        for piece in pieces:
            delta = {"type": "thinking_delta", "thinking": piece}
            thinking.append({"type": "content_block_delta", "index": 0, "delta": delta})
        signature = {"type": "signature_delta", "signature": reply["signature"]}
        thinking.append({"type": "content_block_delta", "index": 0, "delta": signature})
        thinking.append({"type": "content_block_stop", "index": 0})
        shifted = []
        for name, data in out[1:]:
            event = json.loads(data)
            if "index" in event:
                event["index"] += 1
            shifted.append((name, json.dumps(event)))
        return [out[0], *((e["type"], json.dumps(e)) for e in thinking), *shifted]


# =========================================================================== 1. recovery


async def test_a_provider_failure_is_recovered_by_the_next_prompt(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    url1, token1 = await sidecar.endpoint(sid)

    failed = await rpc_error(sidecar.prompt(sid, "/fail boom"))
    assert failed.code == ErrorCode.PROVIDER_ERROR == -32050
    assert "boom" in failed.message
    broken = await sidecar.status(sid)
    assert broken["status"] == "error" and "boom" in broken["lastError"], broken
    assert broken["generation"] == 1

    result = await sidecar.prompt(sid, "hello again")
    assert result["stopReason"] == "end_turn"
    assert result["_meta"]["response"] == "Echo: hello again"
    status = await sidecar.status(sid)
    assert (status["status"], status["generation"], status["lastError"]) == ("idle", 2, None)
    assert status["live"] is True

    url2, token2 = await sidecar.endpoint(sid)
    assert token2 != token1
    assert url2 != url1, "the recovered generation kept the failed one's listener"
    code, body = await http(port_of(url2), "GET", "/agent/status", token2)
    assert code == 200 and body["generation"] == 2 and body["lastError"] is None
    # The failed generation's listener and token are gone.
    with contextlib.suppress(OSError, ConnectionError):
        code, _ = await http(port_of(url1), "GET", "/agent/status", token1, timeout=5)
        assert code != 200, "the failed generation's listener still answers its token"
    code, _ = await http(port_of(url2), "GET", "/agent/status", token1)
    assert code == 401

    # The transcript kept the failed turn's user message, then the recovered turn.
    users = [m["text"] for m in (await sidecar.messages(sid))["messages"] if m["type"] == "user"]
    assert users == ["/fail boom", "hello again"]


@pytest.mark.parametrize("how", ["session/resume", "session/load"])
async def test_resume_or_load_of_a_session_in_error_recovers_in_one_step(
    sidecar: Sidecar, workspace: Path, how: str
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await rpc_error(sidecar.prompt(sid, "/fail boom"))
    assert (await sidecar.status(sid))["status"] == "error"
    _, token1 = await sidecar.endpoint(sid)

    params: dict[str, Any] = {"sessionId": sid, "cwd": str(workspace)}
    if how == "session/load":
        params["mcpServers"] = []
    opened = await sidecar.call(how, params)
    summary = opened["_meta"]
    assert (summary["status"], summary["generation"], summary["lastError"]) == ("idle", 2, None)
    assert summary["live"] is True
    _, token2 = await sidecar.endpoint(sid)
    assert token2 != token1

    result = await sidecar.prompt(sid, "after recovery")
    assert result["stopReason"] == "end_turn"
    status = await sidecar.status(sid)
    assert (status["status"], status["generation"], status["lastError"]) == ("idle", 2, None)


async def test_close_and_resume_of_a_session_in_error_still_works(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await rpc_error(sidecar.prompt(sid, "/fail boom"))
    closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["status"] == "closed" and closed["live"] is False
    resumed = (await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
        "_meta"
    ]
    assert (resumed["status"], resumed["generation"], resumed["lastError"]) == ("idle", 2, None)
    assert (await sidecar.prompt(sid, "fine now"))["_meta"]["response"] == "Echo: fine now"


# =========================================================================== 2. unknown ids


async def test_every_method_that_takes_a_session_id_answers_32002_for_an_unknown_one(
    sidecar: Sidecar, workspace: Path
):
    unknown = f"sess_{uuid.uuid4().hex}"
    cwd = str(workspace)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("session/prompt", {"prompt": [{"type": "text", "text": "hi"}]}),
        ("session/cancel", {}),
        ("session/close", {}),
        ("session/resume", {"cwd": cwd}),
        ("session/load", {"cwd": cwd, "mcpServers": []}),
        ("session/delete", {}),
        ("session/set_mode", {"modeId": "plan"}),
        ("session/set_config_option", {"configId": "mode", "value": "plan"}),
        ("session/fork", {"cwd": cwd}),
        ("_session/status", {}),
        ("_session/messages", {}),
        ("_session/http", {}),
        ("_session/rename", {"title": "renamed"}),
        ("_session/permissions", {}),
        ("_session/compact", {}),
        ("_session/resize", {"rows": 30, "cols": 100}),
    ]
    wrong = {}
    for method, params in calls:
        try:
            result = await sidecar.call(method, {"sessionId": unknown, **params})
        except RpcError as exc:
            if exc.code != ErrorCode.SESSION_NOT_FOUND or not (
                isinstance(exc.data, dict) and exc.data.get("sessionId") == unknown
            ):
                wrong[method] = (exc.code, exc.message, exc.data)
        else:
            wrong[method] = ("success", result)
    assert wrong == {}, f"not -32002 with data.sessionId: {wrong}"
    # Nothing was created by any of them.
    listed = await sidecar.call("session/list", {})
    assert [s["sessionId"] for s in listed["sessions"]] == []


# =========================================================================== 3. responses


RESPONSES = {
    "result": b'{"jsonrpc":"2.0","id":7,"result":{}}',
    "error": b'{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"no"}}',
    "null-id": b'{"jsonrpc":"2.0","id":null,"result":{}}',
    # A notification has no id, so an answer to one has none either.
    "answers-a-notification": b'{"jsonrpc":"2.0","result":{}}',
    "sidecar-shaped-id": b'{"jsonrpc":"2.0","id":"sidecar-1","result":{}}',
}


@pytest.mark.parametrize("kind", list(RESPONSES))
async def test_a_client_response_is_never_answered(data_dir: Path, kind: str):
    client = await RawClient.start(data_dir)
    try:
        before = len(client.lines)
        await client.write(RESPONSES[kind] + b"\n")
        # Two round trips behind it: anything written in reply to it came first.
        first = await client.call("session/list", {})
        second = await client.call("session/list", {})
        assert first == second == {"sessions": []}
        new = [json.loads(line) for line in client.lines[before:]]
        replies = [m for m in new if "method" not in m]
        assert len(new) == 2 and [m["result"] for m in replies] == [first, second], (
            f"the sidecar answered a response ({kind}): {new}"
        )
        assert client.process.returncode is None
    finally:
        code = await client.close()
    assert code == 0
    log = client.stderr_text()
    assert "dropped a response" in log, f"the log does not say it dropped it:\n{log[-2000:]}"


async def test_a_second_answer_to_a_permission_request_is_dropped(data_dir: Path, workspace: Path):
    client = await RawClient.start(data_dir)
    try:
        sid = (await client.new_session(workspace))["sessionId"]
        result = await client.prompt(sid, "$ echo asked")
        assert result["stopReason"] == "end_turn"
        (asked,) = [m for m in client.asked if m["method"] == "session/request_permission"]
        before = len(client.lines)
        again = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        }
        await client.write(json.dumps(again).encode() + b"\n")
        await client.call("session/list", {})
        await client.call("session/list", {})
        new = [json.loads(line) for line in client.lines[before:]]
        assert len(new) == 2 and all("result" in m for m in new), new
    finally:
        await client.close()
    assert f"dropped a response to no request of ours (id {asked['id']!r})" in client.stderr_text()


# =========================================================================== 4. clean exit


DELAYS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)


async def _exit_run(
    base: Path, workspace: Path, how: signal.Signals, delay: float, busy: bool
) -> dict[str, Any]:
    mark = uuid.uuid4().hex
    data_dir = base / f"data-{how.name}-{delay}-{busy}"
    client = await RawClient.start(
        data_dir,
        "--interrupt-grace",
        "0.2",
        "--kill-grace",
        "0.5",
        env={"EXIT_MARKER": mark},
        log_level="INFO",
    )
    try:
        return await _exit_after_eof(client, data_dir, workspace, mark, how, delay, busy)
    finally:
        if client.process.returncode is None:  # something above failed before the exit
            client.sigkill()
            await client.process.wait()


async def _exit_after_eof(
    client: RawClient,
    data_dir: Path,
    workspace: Path,
    mark: str,
    how: signal.Signals,
    delay: float,
    busy: bool,
) -> dict[str, Any]:
    sids = [(await client.new_session(workspace))["sessionId"]]
    if busy:
        sleeper = (await client.new_session(workspace))["sessionId"]
        runner = (await client.new_session(workspace, approval="auto"))["sessionId"]
        sids += [sleeper, runner]
        await client.together(
            ("session/prompt", text_prompt(sleeper, "/sleep 5")),
            ("session/prompt", text_prompt(runner, "$ echo started; sleep 100")),
        )
        await wait_status(client, sleeper, "running")
        assert await eventually(
            lambda: any(
                u.get("status") == "in_progress"
                for u in raw_updates(client, runner, "tool_call_update")
            ),
            timeout=WAIT,
        ), "the command never started"
        # The sidecar, bash, sleep (and bubblewrap): the command really runs.
        assert await eventually(lambda: len(marked_processes("EXIT_MARKER", mark)) >= 3)
    stdin = client.process.stdin
    assert stdin is not None
    stdin.close()
    await asyncio.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.kill(client.pid, how)
    code = await client.wait_exit(timeout=WAIT)
    gone = await eventually(lambda: marked_processes("EXIT_MARKER", mark) == [], timeout=3)
    records = await asyncio.to_thread(stored_records, data_dir, sids)
    return {
        "code": code,
        "left": marked_processes("EXIT_MARKER", mark) if not gone else [],
        "records": {sid: (r.status.value, r.interrupted) for sid, r in records.items()},
        "not_strict": client.not_strict,
        "log": client.stderr_tail(15) if code != 0 or not gone else "",
    }


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "turn-and-command-open"])
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_stdin_eof_then_a_signal_at_any_moment_exits_cleanly(
    tmp_path: Path, workspace: Path, how: signal.Signals, busy: bool
):
    runs = await asyncio.gather(
        *(_exit_run(tmp_path, workspace, how, d, busy) for d in DELAYS), return_exceptions=True
    )
    bad: dict[str, Any] = {}
    for delay, run in zip(DELAYS, runs, strict=True):
        if isinstance(run, BaseException):
            bad[f"{int(delay * 1000)} ms"] = f"the run failed: {run!r}"
            continue
        problems = []
        if run["code"] != 0:
            problems.append(f"exit code {run['code']}")
        if run["left"]:
            problems.append(f"processes left: {run['left']}")
        not_closed = {s: r for s, r in run["records"].items() if r != ("closed", False)}
        if not_closed:
            problems.append(f"records not closed cleanly: {not_closed}")
        if run["not_strict"]:
            problems.append(f"non-JSON on stdout: {run['not_strict']}")
        if problems:
            bad[f"{int(delay * 1000)} ms"] = (problems, run["log"])
    assert bad == {}, json.dumps(bad, indent=1)


# =========================================================================== 5. the token


async def test_the_listener_token_is_only_given_to_the_client_that_asks(
    data_dir: Path, workspace: Path
):
    client = await raw_client(data_dir, extensions=True)
    tokens: set[str] = set()
    http_ids: set[int] = set()

    async def endpoint(session_id: str) -> tuple[str, str]:
        request_id = client.new_id()
        http_ids.add(request_id)
        waiter = client.expect(request_id)
        await client.write(frame("_session/http", {"sessionId": session_id}, request_id))
        reply = await asyncio.wait_for(waiter, WAIT)
        url, token = reply["result"]["url"], reply["result"]["token"]
        assert isinstance(token, str) and len(token) >= 16
        tokens.add(token)
        code, body = await http(port_of(url), "GET", "/agent/status", token)
        assert code == 200 and body["sessionId"] == session_id, (code, body)
        assert token not in json.dumps(body)
        code, _ = await http(port_of(url), "GET", "/agent/status", "not-the-token")
        assert code == 401
        return url, token

    try:
        cwd = str(workspace)
        created = await client.call("session/new", {"cwd": cwd, "mcpServers": []})
        sid = created["sessionId"]
        await endpoint(sid)
        assert (await client.prompt(sid, "hello"))["stopReason"] == "end_turn"
        await client.call("_session/status", {"sessionId": sid})
        forked = await client.call("session/fork", {"sessionId": sid, "cwd": cwd})
        await endpoint(forked["sessionId"])
        await client.call("session/list", {})
        await client.call("session/close", {"sessionId": sid})
        await client.call("session/resume", {"sessionId": sid, "cwd": cwd})
        await endpoint(sid)
        await client.call("session/close", {"sessionId": sid})
        await client.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        await endpoint(sid)
        await client.call("_session/status", {"sessionId": sid})
        await client.call("session/list", {})
        await client.call("session/close", {"sessionId": forked["sessionId"]})
        await client.call("session/close", {"sessionId": sid})
        assert any(n["method"] == "_session/state" for n in client.notifications)
    finally:
        await client.close()
    assert len(tokens) == 4, "each generation has its own token"
    leaks = []
    for line in client.lines:
        message = json.loads(line)
        if "method" not in message and message.get("id") in http_ids:
            continue
        for token in tokens:
            if token in line.decode():
                leaks.append(line[:300])
    assert leaks == [], f"a token appeared outside _session/http: {leaks}"
    log = client.stderr_text()
    assert not [t for t in tokens if t in log], "a token appeared in the log"


# =========================================================================== 6. live output


LIVE_COMMAND = "for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done"


def tool_updates(sidecar: Sidecar, session_id: str) -> list[dict[str, Any]]:
    return updates_of(sidecar, session_id, "tool_call_update")


async def test_live_command_output_is_standard_acp_content_that_grows(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    result = await sidecar.prompt(sid, f"$ {LIVE_COMMAND}")
    assert result["stopReason"] == "end_turn"
    (start,) = updates_of(sidecar, sid, "tool_call")
    call_id = start["toolCallId"]
    updates = [u for u in tool_updates(sidecar, sid) if u["toolCallId"] == call_id]
    final_at = next(i for i, u in enumerate(updates) if u.get("status") == "completed")
    assert final_at == len(updates) - 1, "updates after the final one"
    live = [
        text
        for u in updates[:final_at]
        if u.get("status") == "in_progress" and (text := content_text(u)) is not None
    ]
    assert len(live) >= 3, f"expected several live content updates, got {live}"
    for earlier, later in zip(live, live[1:], strict=False):
        assert later.startswith(earlier) and len(later) > len(earlier), (earlier, later)
    assert any("line3" in text and "line5" not in text for text in live), (
        f"no live update showed line3 while the command still ran: {live}"
    )
    assert live[-1] == "".join(f"line{i}\n" for i in range(1, 6)), "the last live one is whole"
    final = updates[final_at]
    assert final["rawOutput"] == {"exitCode": 0, "cancelled": False}
    assert "line5" in (content_text(final) or "")
    # This client asked for our extensions: each chunk also rides in `_meta.output`.
    chunks = [u["_meta"]["output"] for u in updates if "output" in (u.get("_meta") or {})]
    assert "".join(chunks) == "".join(f"line{i}\n" for i in range(1, 6))


async def test_live_content_is_plain_text_even_when_an_escape_is_cut_between_chunks(
    sidecar: Sidecar, workspace: Path
):
    command = (
        "printf '\\033[1;3'; sleep 0.3; printf '1mred\\033[0m\\r'; sleep 0.3; "
        "printf '\\nx\\033]0;a title\\007y\\n'"
    )
    sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
    result = await sidecar.prompt(sid, f"$ {command}")
    assert result["stopReason"] == "end_turn"
    updates = tool_updates(sidecar, sid)
    live = [content_text(u) for u in updates if u.get("status") == "in_progress"]
    live = [text for text in live if text is not None]
    assert live and live[-1] == "red\nxy\n", live
    assert not [text for text in live if "\x1b" in text or "\r" in text or "[1;3" in text]
    # Our own chunks keep what the command printed (the window draws the colours).
    chunks = "".join(u["_meta"]["output"] for u in updates if "output" in (u.get("_meta") or {}))
    assert chunks == "\x1b[1;31mred\x1b[0m\r\nx\x1b]0;a title\x07y\n"


async def test_a_flooding_command_gets_at_most_about_ten_content_updates_a_second(
    sidecar: Sidecar, workspace: Path
):
    stamps: list[tuple[float, dict[str, Any]]] = []

    def stamp(method: str, params: dict[str, Any]) -> None:
        if method == "session/update" and params["update"]["sessionUpdate"] == "tool_call_update":
            stamps.append((time.monotonic(), params["update"]))

    sidecar.client.on_notification(stamp)
    sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
    result = await sidecar.prompt(sid, "$ yes | head -c 2000000")
    assert result["stopReason"] == "end_turn"
    running = next(t for t, u in stamps if u.get("status") == "in_progress")
    final_at, final = next((t, u) for t, u in stamps if u.get("status") == "completed")
    wall = final_at - running
    live = [u for t, u in stamps if u.get("status") == "in_progress" and content_text(u)]
    assert live, "no live content update"
    allowed = 12 * wall + 2
    assert len(live) <= allowed, f"{len(live)} content updates in {wall:.3f} s"
    # The accumulated output stops at the stream cap (1 MiB by default) and the last live
    # update is complete up to it.
    assert content_text(live[-1]) == "y\n" * (1048576 // 2)
    assert final["rawOutput"] == {"exitCode": 0, "cancelled": False}
    # The chunks themselves (`_meta.output`) are many more than the content updates.
    chunks = [u for _, u in stamps if "output" in (u.get("_meta") or {})]
    assert len(chunks) > len(live)


@pytest.mark.parametrize(
    "capabilities",
    [None, {"_meta": {"acp-session-host": {"notifications": False}}}, {"fs": {}}],
    ids=["no-capabilities", "notifications-false", "other-capabilities"],
)
async def test_a_client_that_did_not_ask_gets_no_extension_notifications(
    data_dir: Path, workspace: Path, capabilities: dict[str, Any] | None
):
    client = await RawClient.start(data_dir, initialize=False)
    try:
        params: dict[str, Any] = {"protocolVersion": 1}
        if capabilities is not None:
            params["clientCapabilities"] = capabilities
        await client.call("initialize", params)
        sid = (await client.new_session(workspace))["sessionId"]
        result = await client.prompt(sid, f"$ {LIVE_COMMAND}")
        assert result["stopReason"] == "end_turn"
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await client.call("session/close", {"sessionId": sid})
    finally:
        await client.close()
    methods = {n["method"] for n in client.notifications}
    assert methods == {"session/update"}, methods
    updates = raw_updates(client, sid, "tool_call_update")
    assert not [u for u in updates if "_meta" in u], (
        "`_meta.output` went to a client that did not ask"
    )
    # It still sees the live output, in standard content.
    live = [content_text(u) for u in updates if u.get("status") == "in_progress"]
    assert any(text and "line3" in text for text in live), live


# =========================================================================== 7. titles


LONG_FIRST_LINE = (
    "Please refactor the session manager so that every lifecycle operation runs in order"
)


async def test_an_untitled_session_is_named_after_its_first_prompt_once(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    assert (await sidecar.status(sid))["title"] == "Untitled session"
    await sidecar.prompt(sid, f"\n   \n  {LONG_FIRST_LINE}  \nand a second line")
    expected = "Please refactor the session manager so that every lifecycle…"
    assert len(expected) <= 61
    status = await sidecar.status(sid)
    assert status["title"] == expected
    (info,) = updates_of(sidecar, sid, "session_info_update")
    assert info["title"] == expected
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", info["updatedAt"])
    (entry,) = (await sidecar.call("session/list", {}))["sessions"]
    assert entry["title"] == expected and entry["_meta"]["title"] == expected

    await sidecar.prompt(sid, "a second prompt must not rename it")
    assert (await sidecar.status(sid))["title"] == expected
    assert len(updates_of(sidecar, sid, "session_info_update")) == 1

    short = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(short, "fix the tests")
    assert (await sidecar.status(short))["title"] == "fix the tests"

    titled = (await sidecar.new_session(workspace, title="Chosen"))["sessionId"]
    await sidecar.prompt(titled, "this is not a title")
    assert (await sidecar.status(titled))["title"] == "Chosen"
    assert updates_of(sidecar, titled, "session_info_update") == []


async def test_rename_live_and_closed_and_titles_survive_a_restart(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir)
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        renamed = await sidecar.call("_session/rename", {"sessionId": sid, "title": "  First  "})
        assert renamed["title"] == "First" and renamed["sessionId"] == sid
        (info,) = updates_of(sidecar, sid, "session_info_update")
        assert info["title"] == "First" and info["updatedAt"]

        await sidecar.call("session/close", {"sessionId": sid})
        seen = len(sidecar.seen)
        closed = await sidecar.call("_session/rename", {"sessionId": sid, "title": "Second"})
        assert closed["title"] == "Second" and closed["status"] == "closed"
        assert updates_of(sidecar, sid, "session_info_update", since=seen), (
            "no session_info_update for the rename of a closed session"
        )
        (entry,) = (await sidecar.call("session/list", {}))["sessions"]
        assert entry["title"] == "Second"

        for bad in ["", "   ", 42, None, ["x"], "x" * 201]:
            error = await rpc_error(
                sidecar.call("_session/rename", {"sessionId": sid, "title": bad})
            )
            assert error.code == ErrorCode.INVALID_PARAMS, (bad, error.code)
            assert error.data["field"] == "title", (bad, error.data)
        error = await rpc_error(sidecar.call("_session/rename", {"sessionId": sid}))
        assert error.code == ErrorCode.INVALID_PARAMS and error.data["field"] == "title"
        assert (await sidecar.status(sid))["title"] == "Second"
    finally:
        assert await sidecar.close() == 0

    again = await Sidecar.start(data_dir)
    try:
        assert (await again.status(sid))["title"] == "Second"
        (entry,) = (await again.call("session/list", {}))["sessions"]
        assert entry["title"] == "Second"
        resumed = await again.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert resumed["_meta"]["title"] == "Second"
        await again.prompt(sid, "the title is kept")  # not untitled: no rename
        assert (await again.status(sid))["title"] == "Second"
    finally:
        await again.close()


# =========================================================================== 8. commands


def check_commands(update: dict[str, Any]) -> None:
    commands = {c["name"]: c for c in update["availableCommands"]}
    assert SIDECAR_COMMANDS | OFFLINE_COMMANDS <= set(commands), sorted(commands)
    for name in SIDECAR_COMMANDS | OFFLINE_COMMANDS:
        command = commands[name]
        assert isinstance(command["description"], str) and command["description"]
        hint = command["input"]["hint"]
        assert isinstance(hint, str) and hint, command


async def test_available_commands_follow_new_resume_load_and_fork(data_dir: Path, workspace: Path):
    client = await raw_client(data_dir, extensions=False)
    cwd = str(workspace)
    try:
        opened: list[tuple[str, int, int]] = []

        async def opening(method: str, params: dict[str, Any]) -> dict[str, Any]:
            request_id = client.new_id()
            waiter = client.expect(request_id)
            before = len(client.lines)
            await client.write(frame(method, params, request_id))
            reply = await asyncio.wait_for(waiter, WAIT)
            assert "result" in reply, reply
            result: dict[str, Any] = reply["result"]
            sid = result.get("sessionId", params.get("sessionId"))
            at = reply_line(client, request_id)
            # The first announcement for this session since the request was written.
            commands_at = await wait_commands(client, sid, before - 1)
            opened.append((method, at, commands_at))
            return result

        created = await opening("session/new", {"cwd": cwd, "mcpServers": []})
        sid = created["sessionId"]
        await client.call("session/close", {"sessionId": sid})
        await opening("session/resume", {"sessionId": sid, "cwd": cwd})
        await client.call("session/close", {"sessionId": sid})
        await opening("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        await opening("session/fork", {"sessionId": sid, "cwd": cwd})
        assert [method for method, _, _ in opened] == [
            "session/new",
            "session/resume",
            "session/load",
            "session/fork",
        ]
        for method, response_at, commands_at in opened:
            assert commands_at > response_at, f"{method}: the commands came before the response"
            check_commands(json.loads(client.lines[commands_at])["params"]["update"])
    finally:
        await client.close()


async def test_compact_rename_and_unknown_slash_commands(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    for i in range(4):
        await sidecar.prompt(sid, f"turn number {i}")
    before = (await sidecar.messages(sid))["messages"]
    compacted = await sidecar.prompt(sid, "/compact 1")
    assert compacted["stopReason"] == "end_turn"
    compaction = compacted["_meta"]["compaction"]
    assert compaction["compacted"] is True, compaction
    assert isinstance(compaction["summaryIndex"], int) and isinstance(
        compaction["contextFrom"], int
    )
    after = (await sidecar.messages(sid))["messages"]
    users = [m["text"] for m in after if m["type"] == "user"]
    assert users == [f"turn number {i}" for i in range(4)], "the command became a user message"
    assert [m["kind"] for m in after[len(before) :]] == ["compaction"]
    assert after[compaction["summaryIndex"]]["kind"] == "compaction"
    assert "Summary of" in after[compaction["summaryIndex"]]["text"]
    status = await sidecar.status(sid)
    assert status["status"] == "idle"

    renamed = await sidecar.prompt(sid, "/rename   New   name ")
    assert renamed["stopReason"] == "end_turn"
    assert (await sidecar.status(sid))["title"] == "New name"
    assert updates_of(sidecar, sid, "session_info_update")[-1]["title"] == "New name"
    assert not [m for m in (await sidecar.messages(sid))["messages"] if "/rename" in m["text"]]

    echoed = await sidecar.prompt(sid, "/word")
    assert echoed["stopReason"] == "end_turn" and echoed["_meta"]["response"] == "Echo: /word"
    assert (await sidecar.messages(sid))["messages"][-2]["text"] == "/word"


# =========================================================================== 9. usage


async def test_usage_is_reported_per_model_call_and_totalled_across_restarts(
    data_dir: Path, workspace: Path
):
    sidecar = await Sidecar.start(data_dir)
    totals = {"inputTokens": 0, "outputTokens": 0}

    async def turn(text: str, calls: int) -> None:
        seen = len(sidecar.seen)
        result = await sidecar.prompt(sid, text)
        usage = result["usage"]
        assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0, usage
        assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
        assert result["_meta"]["usage"] == usage
        reports = updates_of(sidecar, sid, "usage_update", since=seen)
        assert len(reports) == calls, reports
        assert all(r["used"] > 0 and r["size"] > 0 for r in reports), reports
        totals["inputTokens"] += usage["inputTokens"]
        totals["outputTokens"] += usage["outputTokens"]
        assert (await sidecar.status(sid))["usage"] == totals

    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        await turn("hello there", 1)
        await turn("$ echo tokens", 2)  # a tool round: two model calls
        await turn("and once more", 1)
        closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
        assert closed["usage"] == totals and closed["turns"] == 3
        resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert resumed["_meta"]["usage"] == totals
        await turn("after resume", 1)
    finally:
        await sidecar.close()
    sidecar = await Sidecar.start(data_dir)
    try:
        status = await sidecar.status(sid)
        assert status["usage"] == totals and status["turns"] == 4
        (entry,) = (await sidecar.call("session/list", {}))["sessions"]
        assert entry["_meta"]["usage"] == totals
    finally:
        await sidecar.close()


def fake_usage(body: dict[str, Any], text: str) -> tuple[int, int]:
    """What tests/fake_chat_server.py reports for a request and its reply text."""
    return len(json.dumps(body.get("messages", []))) // 4, len(text) // 4 + 1


async def test_usage_from_the_openai_server_is_what_is_summed(
    data_dir: Path, workspace: Path, fake_openai: FakeServerProcess
):
    sidecar = await start_openai(data_dir, fake_openai.base_url)
    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        await fake_openai.script({"type": "text", "text": "The first answer, with some words."})
        first = await sidecar.prompt(sid, "first question")
        await fake_openai.script(
            {"type": "tool_call", "name": "bash", "arguments": {"command": "echo hi"}},
            {"type": "text", "text": "It printed hi."},
        )
        second = await sidecar.prompt(sid, "run something")
        requests = await fake_openai.requests()
        assert len(requests) == 3
        replies = ["The first answer, with some words.", "", "It printed hi."]
        reported = [fake_usage(r["body"], text) for r, text in zip(requests, replies, strict=True)]
        assert (first["usage"]["inputTokens"], first["usage"]["outputTokens"]) == reported[0]
        assert second["usage"]["inputTokens"] == reported[1][0] + reported[2][0]
        assert second["usage"]["outputTokens"] == reported[1][1] + reported[2][1]
        assert second["usage"]["totalTokens"] == sum(reported[1]) + sum(reported[2])
        status = await sidecar.status(sid)
        assert status["usage"] == {
            "inputTokens": sum(r[0] for r in reported),
            "outputTokens": sum(r[1] for r in reported),
        }
        reports = updates_of(sidecar, sid, "usage_update")
        assert len(reports) == 3 and all(r["used"] > 0 and r["size"] > 0 for r in reports)
    finally:
        await sidecar.close()


# =========================================================================== 10. stop reasons


async def test_openai_finish_reasons_become_acp_stop_reasons_and_max_tokens_is_sent(
    data_dir: Path, workspace: Path, fake_openai: FakeServerProcess
):
    sidecar = await start_openai(data_dir, fake_openai.base_url, "--max-tokens", "7")
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        await fake_openai.script(
            {"type": "text", "text": "cut off in the mid", "finish_reason": "length"}
        )
        cut = await sidecar.prompt(sid, "write a lot")
        assert cut["stopReason"] == "max_tokens", cut
        await fake_openai.script(
            {"type": "text", "text": "I cannot help", "finish_reason": "content_filter"}
        )
        refused = await sidecar.prompt(sid, "something bad")
        assert refused["stopReason"] == "refusal", refused
        await fake_openai.script({"type": "text", "text": "fine"})
        assert (await sidecar.prompt(sid, "normal"))["stopReason"] == "end_turn"
        requests = await fake_openai.requests()
        assert [r["body"].get("max_tokens") for r in requests] == [7, 7, 7]
        assert (await sidecar.status(sid))["status"] == "idle"
    finally:
        await sidecar.close()


async def test_anthropic_stop_reasons_become_acp_stop_reasons(
    data_dir: Path, workspace: Path, fake_anthropic: FakeServerProcess
):
    sidecar = await start_anthropic(data_dir, fake_anthropic.base_url)
    try:
        sid = (await sidecar.new_session(workspace))["sessionId"]
        await fake_anthropic.script(
            {"type": "text", "text": "cut off", "stop_reason": "max_tokens"}
        )
        assert (await sidecar.prompt(sid, "write a lot"))["stopReason"] == "max_tokens"
        await fake_anthropic.script({"type": "text", "text": "No.", "stop_reason": "refusal"})
        assert (await sidecar.prompt(sid, "something bad"))["stopReason"] == "refusal"
        await fake_anthropic.script({"type": "text", "text": "fine"})
        assert (await sidecar.prompt(sid, "normal"))["stopReason"] == "end_turn"
        requests = await fake_anthropic.requests()
        assert all(r["rejected"] is None for r in requests), [r["rejected"] for r in requests]
    finally:
        await sidecar.close()


# =========================================================================== 11. config


def options_by_id(options: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in options}


def check_config_options(options: list[dict[str, Any]], mode: str = "craft") -> None:
    by_id = options_by_id(options)
    assert {"mode", "model", "approval", "sandbox"} <= set(by_id), sorted(by_id)
    assert all(o["type"] == "select" for o in options)
    assert by_id["mode"]["category"] == "mode"
    assert [o["value"] for o in by_id["mode"]["options"]] == ["craft", "plan", "ask"]
    assert by_id["mode"]["currentValue"] == mode
    assert by_id["model"]["category"] == "model"
    assert by_id["model"]["currentValue"] in [o["value"] for o in by_id["model"]["options"]]
    assert {o["value"] for o in by_id["approval"]["options"]} == {"ask", "auto", "deny"}
    assert {o["value"] for o in by_id["sandbox"]["options"]} == {"read-only", "workspace", "off"}


async def test_config_options_ride_in_every_opening_response_and_change_settings(
    sidecar: Sidecar, workspace: Path
):
    cwd = str(workspace)
    created = await sidecar.call("session/new", {"cwd": cwd, "mcpServers": []})
    sid = created["sessionId"]
    check_config_options(created["configOptions"])
    assert created["modes"]["currentModeId"] == "craft"

    seen = len(sidecar.seen)
    changed = await sidecar.call(
        "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "plan"}
    )
    check_config_options(changed["configOptions"], mode="plan")
    await sidecar.wait_for(
        lambda m, p: (
            m == "session/update"
            and p["sessionId"] == sid
            and p["update"]["sessionUpdate"] == "current_mode_update"
            and p["update"]["currentModeId"] == "plan"
        )
    )
    update = await sidecar.wait_for(
        lambda m, p: (
            m == "session/update"
            and p["sessionId"] == sid
            and p["update"]["sessionUpdate"] == "config_option_update"
        )
    )
    assert options_by_id(update["update"]["configOptions"])["mode"]["currentValue"] == "plan"
    status = await sidecar.status(sid)
    assert status["mode"] == "plan" and status["effectiveSandbox"] == "read-only"
    assert len(updates_of(sidecar, sid, "config_option_update", since=seen)) == 1

    # set_mode and the mode option stay in sync.
    seen = len(sidecar.seen)
    await sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "ask"})
    (update,) = updates_of(sidecar, sid, "config_option_update", since=seen)
    assert options_by_id(update["configOptions"])["mode"]["currentValue"] == "ask"
    assert updates_of(sidecar, sid, "current_mode_update", since=seen)[-1]["currentModeId"] == "ask"

    for config_id, value in [("approval", "auto"), ("sandbox", "read-only")]:
        result = await sidecar.call(
            "session/set_config_option", {"sessionId": sid, "configId": config_id, "value": value}
        )
        assert options_by_id(result["configOptions"])[config_id]["currentValue"] == value
    status = await sidecar.status(sid)
    assert (status["approval"], status["sandbox"]) == ("auto", "read-only")

    for config_id, value, field in [
        ("nope", "x", "configId"),
        ("mode", "yolo", "value"),
        ("model", "no-such-model", "value"),
        ("approval", "sometimes", "value"),
        ("sandbox", "none", "value"),
    ]:
        error = await rpc_error(
            sidecar.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": config_id, "value": value},
            )
        )
        assert error.code == ErrorCode.INVALID_PARAMS and error.data["field"] == field, (
            config_id,
            error.data,
        )
    error = await rpc_error(sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"}))
    assert error.code == ErrorCode.INVALID_PARAMS

    # Refused while a turn runs.
    turn = sidecar.prompt_task(sid, "/sleep 5")
    await sidecar.wait_state(sid, "running")
    error = await rpc_error(
        sidecar.call(
            "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "craft"}
        )
    )
    assert error.code == ErrorCode.INVALID_STATE == -32045
    error = await rpc_error(sidecar.call("session/set_mode", {"sessionId": sid, "modeId": "craft"}))
    assert error.code == ErrorCode.INVALID_STATE
    await sidecar.call("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, WAIT))["stopReason"] == "cancelled"
    assert (await sidecar.status(sid))["mode"] == "ask"

    # The settings ride in load, resume and fork responses.
    await sidecar.call("session/close", {"sessionId": sid})
    resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": cwd})
    check_config_options(resumed["configOptions"], mode="ask")
    assert resumed["modes"]["currentModeId"] == "ask"
    by_id = options_by_id(resumed["configOptions"])
    assert by_id["approval"]["currentValue"] == "auto"
    assert by_id["sandbox"]["currentValue"] == "read-only"
    loaded = await sidecar.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    check_config_options(loaded["configOptions"], mode="ask")
    forked = await sidecar.call("session/fork", {"sessionId": sid, "cwd": cwd})
    check_config_options(forked["configOptions"], mode="ask")
    assert options_by_id(forked["configOptions"])["approval"]["currentValue"] == "auto"


async def test_the_model_option_falls_back_to_the_configured_model_without_a_models_list(
    data_dir: Path, workspace: Path, fake_openai: FakeServerProcess
):
    """tests/fake_chat_server.py has no `GET /v1/models`: the catalog offers the
    configured model alone."""
    sidecar = await start_openai(data_dir, fake_openai.base_url)
    try:
        created = await sidecar.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = created["sessionId"]
        model = options_by_id(created["configOptions"])["model"]
        assert [o["value"] for o in model["options"]] == [MODEL]
        assert model["currentValue"] == MODEL
        result = await sidecar.call(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "value": MODEL}
        )
        assert options_by_id(result["configOptions"])["model"]["currentValue"] == MODEL
        error = await rpc_error(
            sidecar.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": "model", "value": "other-model"},
            )
        )
        assert error.code == ErrorCode.INVALID_PARAMS and error.data["field"] == "value"
        await fake_openai.script({"type": "text", "text": "ok"})
        await sidecar.prompt(sid, "hi")
        assert (await fake_openai.requests())[-1]["body"]["model"] == MODEL
    finally:
        await sidecar.close()


async def test_the_model_option_lists_the_servers_models_and_the_choice_sticks(
    data_dir: Path, workspace: Path
):
    async with ModelsChatServer([MODEL, "model-b", "model-c"]) as server:
        sidecar = await start_openai(data_dir, server.base_url)
        cwd = str(workspace)
        try:
            created = await sidecar.call("session/new", {"cwd": cwd, "mcpServers": []})
            sid = created["sessionId"]
            model = options_by_id(created["configOptions"])["model"]
            assert sorted(o["value"] for o in model["options"]) == [
                "model-b",
                "model-c",
                MODEL,
            ]
            assert model["currentValue"] == MODEL
            seen = len(sidecar.seen)
            result = await sidecar.call(
                "session/set_config_option",
                {"sessionId": sid, "configId": "model", "value": "model-b"},
            )
            assert options_by_id(result["configOptions"])["model"]["currentValue"] == "model-b"
            (update,) = updates_of(sidecar, sid, "config_option_update", since=seen)
            assert options_by_id(update["configOptions"])["model"]["currentValue"] == "model-b"
            assert (await sidecar.status(sid))["model"] == "model-b"
            await sidecar.prompt(sid, "which model?")
            assert server.requests[-1].body["model"] == "model-b"

            await sidecar.call("session/close", {"sessionId": sid})
            resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": cwd})
            assert options_by_id(resumed["configOptions"])["model"]["currentValue"] == "model-b"
            await sidecar.prompt(sid, "still?")
            assert server.requests[-1].body["model"] == "model-b"
            # Another session keeps the configured default.
            other = (await sidecar.new_session(workspace))["sessionId"]
            await sidecar.prompt(other, "default?")
            assert server.requests[-1].body["model"] == MODEL
            assert server.model_listings == 1, "the models list is asked once and cached"
        finally:
            await sidecar.close()


# =========================================================================== 12. reasoning


async def test_openai_reasoning_streams_as_thought_is_kept_and_not_sent_back(
    data_dir: Path, workspace: Path
):
    async with FakeChatServer() as server:  # a reply's reasoning: reasoning_content
        sidecar = await start_openai(data_dir, server.base_url)
        cwd = str(workspace)
        try:
            sid = (await sidecar.new_session(workspace))["sessionId"]
            server.script(
                {
                    "type": "text",
                    "text": "The answer is 42.",
                    "reasoning": ["Let me think ", "about the ", "question."],
                }
            )
            result = await sidecar.prompt(sid, "what is the answer?")
            assert result["_meta"]["response"] == "The answer is 42."
            thoughts = updates_of(sidecar, sid, "agent_thought_chunk")
            assert len(thoughts) >= 2, thoughts
            thought = "".join(t["content"]["text"] for t in thoughts)
            assert thought == "Let me think about the question."
            said = "".join(
                u["content"]["text"] for u in updates_of(sidecar, sid, "agent_message_chunk")
            )
            assert said == "The answer is 42."

            server.script({"type": "text", "text": "Still 42."})
            await sidecar.prompt(sid, "sure?")
            sent = server.requests[-1].body["messages"]
            assert "Let me think" not in json.dumps(sent), "the reasoning was sent back"
            assert all("reasoning_content" not in m for m in sent)
            assert {"role": "assistant", "content": "The answer is 42."} in sent

            await sidecar.call("session/close", {"sessionId": sid})
            seen = len(sidecar.seen)
            await sidecar.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
            replayed = updates_of(sidecar, sid, "agent_thought_chunk", since=seen)
            assert [t["content"]["text"] for t in replayed] == ["Let me think about the question."]
        finally:
            await sidecar.close()


async def test_anthropic_thinking_streams_and_goes_back_with_its_signature(
    data_dir: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    # The fake's request checks know no thinking blocks; the real API takes them.
    monkeypatch.setitem(
        fake_anthropic_server.BLOCK_KEYS, "thinking", {"type", "thinking", "signature"}
    )
    async with ThinkingAnthropicServer() as server:
        sidecar = await start_anthropic(data_dir, server.base_url, "--thinking-budget", "1024")
        cwd = str(workspace)
        try:
            sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
            server.script(
                {
                    "type": "tool_use",
                    "name": "bash",
                    "input": {"command": "echo thought-through"},
                    "id": "toolu_think_1",
                    "thinking": ["I should ", "run echo."],
                    "signature": "sig-abc-123",
                },
                {
                    "type": "text",
                    "text": "It printed thought-through.",
                    "thinking": ["The command worked."],
                    "signature": "sig-def-456",
                },
            )
            result = await sidecar.prompt(sid, "think, then run echo")
            assert result["stopReason"] == "end_turn"
            assert result["_meta"]["response"] == "It printed thought-through."
            thought = "".join(
                t["content"]["text"] for t in updates_of(sidecar, sid, "agent_thought_chunk")
            )
            assert thought == "I should run echo.The command worked."

            first, second = (r.body for r in server.requests)
            assert [r.rejected for r in server.requests] == [None, None]
            for body in (first, second):
                assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
                assert body["max_tokens"] > 1024
            assistant = next(m for m in second["messages"] if m["role"] == "assistant")
            assert assistant["content"][0] == {
                "type": "thinking",
                "thinking": "I should run echo.",
                "signature": "sig-abc-123",
            }, assistant
            assert assistant["content"][-1]["type"] == "tool_use"

            await sidecar.call("session/close", {"sessionId": sid})
            seen = len(sidecar.seen)
            await sidecar.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
            replayed = updates_of(sidecar, sid, "agent_thought_chunk", since=seen)
            assert [t["content"]["text"] for t in replayed] == [
                "I should run echo.",
                "The command worked.",
            ]
        finally:
            await sidecar.close()


# =========================================================================== 13. extensions


async def test_a_client_that_asks_gets_state_notifications_with_the_whole_summary(
    sidecar: Sidecar, workspace: Path
):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, f"$ {LIVE_COMMAND}")
    await sidecar.call("session/close", {"sessionId": sid})
    states = [p for m, p in sidecar.seen if m == "_session/state" and p["sessionId"] == sid]
    assert states, "no _session/state"
    for state in states:
        assert set(state) == SUMMARY_KEYS, set(state) ^ SUMMARY_KEYS
        SessionSummary.model_validate(state)
    statuses = [s["status"] for s in states]
    assert statuses[0] == "creating" and statuses[-1] == "closed"
    assert {"idle", "running", "closing"} <= set(statuses), statuses
    # Waiting for approval and the answer both show up in the summary.
    awaiting = [s["awaitingPermission"] for s in states if s["awaitingPermission"]]
    assert awaiting and awaiting[0]["title"] == LIVE_COMMAND
    assert any("output" in (u.get("_meta") or {}) for u in tool_updates(sidecar, sid))
