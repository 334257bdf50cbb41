"""Issue 10, "Reliability, second round": each broken promise the adversarial run found,
replayed against the real sidecar (a subprocess over pipes, real sockets, real processes).

Requests that race are written to stdin in ONE write (or a few milliseconds apart) with
`RawClient` (tests/raw_client.py), which keeps every stdout line, files every reply under
its id and sends the sidecar's whole stderr to a file. Nothing here asserts a duration:
every wait is bounded, and a bound is only ever "this cannot take that long".
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from raw_client import (
    RawClient,
    RpcFailure,
    connectable,
    eventually,
    http,
    key,
    marked,
    marker_values,
    parse_response,
    port_of,
    text_prompt,
)

from protocol.errors import ErrorCode

INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
INVALID_PARAMS = int(ErrorCode.INVALID_PARAMS)
INTERNAL_ERROR = int(ErrorCode.INTERNAL_ERROR)
STORE_ERROR = int(ErrorCode.STORE_ERROR)
SESSION_NOT_LIVE = int(ErrorCode.SESSION_NOT_LIVE)
ROUNDS = 20
# A turn that, uncancelled, runs far longer than any wait below: a lost cancel shows up
# as a bounded wait running out, not as a slow pass.
LONG_SLEEP = "/sleep 30"
ANSWER = 10.0  # bound on "a cancelled turn answers"


@pytest.fixture
async def raw(data_dir: Path) -> AsyncIterator[RawClient]:
    client = await RawClient.start(data_dir)
    try:
        yield client
    finally:
        await client.close()
    assert client.not_strict == [], f"lines a strict JSON parser refuses: {client.not_strict}"


def never_awaited(client: RawClient) -> list[str]:
    return [
        line
        for line in client.stderr_text().splitlines()
        if "never awaited" in line or "never retrieved" in line
    ]


async def settle_idle(client: RawClient, sid: str, timeout: float = ANSWER) -> dict[str, Any]:
    """The session's status once it is no longer running (bounded)."""
    status: dict[str, Any] = {}

    async def poll() -> None:
        nonlocal status
        while True:
            status = await client.status(sid)
            if status["status"] != "running":
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)
    return status


# ---- 1. a cancel written together with (or right behind) its prompt ------------------------


async def _prompt_then_cancel(
    client: RawClient, sid: str, delay: float | None, cancel_as_request: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    prompt = ("session/prompt", text_prompt(sid, LONG_SLEEP))
    cancel = ("session/cancel", {"sessionId": sid}, cancel_as_request)
    if delay is None:
        prompt_id, cancel_id = await client.together(prompt, cancel)
    else:
        (prompt_id,) = await client.together(prompt)
        await asyncio.sleep(delay)
        (cancel_id,) = await client.together(cancel)
    try:
        reply = await client.reply(prompt_id, ANSWER)
    except TimeoutError:
        status = await client.status(sid)
        await client.request("session/cancel", {"sessionId": sid})  # free the session anyway
        raise AssertionError(
            f"the prompt was not answered within {ANSWER} s of a cancel written "
            f"{'in the same write' if delay is None else f'{delay * 1000:.1f} ms later'}: "
            f"the cancel was lost and the turn ran on (status then: {status['status']}; "
            f"cancel reply: {client.replies.get(key(cancel_id))}); log:\n" + client.stderr_tail()
        ) from None
    cancel_reply = None if cancel_id is None else await client.reply(cancel_id, ANSWER)
    return reply, cancel_reply


@pytest.mark.parametrize("spacing", ["one-write", "0-10ms"])
async def test_a_cancel_right_behind_its_prompt_always_cancels_it(
    raw: RawClient, workspace: Path, spacing: str
) -> None:
    sid = (await raw.new_session(workspace))["sessionId"]
    rng = random.Random(10)
    prompt_ids = []
    for i in range(ROUNDS):
        delay = None if spacing == "one-write" else rng.uniform(0, 0.010)
        reply, cancel_reply = await _prompt_then_cancel(raw, sid, delay, i % 2 == 1)
        assert "result" in reply, f"round {i}: {reply}"
        assert reply["result"]["stopReason"] == "cancelled", f"round {i}: {reply}"
        if cancel_reply is not None:
            assert cancel_reply.get("result") == {"cancelled": True}, f"round {i}: {cancel_reply}"
        prompt_ids.append(reply["id"])
        assert (await settle_idle(raw, sid))["status"] == "idle", f"round {i}"
    await asyncio.sleep(0.2)  # a second answer to any of them would have arrived by now
    for request_id in prompt_ids:
        assert len(raw.replies[key(request_id)]) == 1, raw.replies[key(request_id)]
    after = await raw.prompt(sid, "still here")
    assert after["stopReason"] == "end_turn" and "Echo: still here" in after["_meta"]["response"]
    assert (await raw.status(sid))["status"] == "idle"
    await raw.close()
    assert never_awaited(raw) == []
    assert raw.not_strict == []


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def _post(port: int, token: str, path: str, body: Any) -> bytes:
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + data


@pytest.mark.parametrize("spacing", ["at-once", "0-10ms"])
async def test_http_send_and_abort_at_once_always_cancel_the_turn(
    raw: RawClient, workspace: Path, spacing: str
) -> None:
    sid = (await raw.new_session(workspace))["sessionId"]
    url, token = await raw.endpoint(sid)
    port = port_of(url)
    rng = random.Random(11)
    for i in range(ROUNDS):
        (send_r, send_w), (abort_r, abort_w) = await _open(port), await _open(port)
        try:
            send_w.write(_post(port, token, "/agent/send", {"message": LONG_SLEEP}))
            if spacing == "0-10ms":
                await send_w.drain()
                await asyncio.sleep(rng.uniform(0, 0.010))
            abort_w.write(_post(port, token, "/agent/abort", {}))
            await asyncio.gather(send_w.drain(), abort_w.drain())
            abort_status, abort_body = parse_response(
                await asyncio.wait_for(abort_r.read(), ANSWER)
            )
            try:
                raw_send = await asyncio.wait_for(send_r.read(), ANSWER)
            except TimeoutError:
                await raw.call("session/cancel", {"sessionId": sid})
                raise AssertionError(
                    f"round {i}: POST /agent/send was not answered within {ANSWER} s of an "
                    f"abort sent right after it (abort answered {abort_status} {abort_body}): "
                    "the abort was lost"
                ) from None
        finally:
            send_w.close()
            abort_w.close()
        send_status, send_body = parse_response(raw_send)
        assert abort_status == 200 and abort_body["running"] is True, (i, abort_body)
        assert send_status == 200, (i, send_status, send_body)
        assert send_body["stopReason"] == "cancelled", (i, send_body)
        assert raw_send.count(b"HTTP/1.1 ") == 1, "one answer per request"
        assert (await settle_idle(raw, sid))["status"] == "idle", f"round {i}"
    status, body = await http(port, "POST", "/agent/send", token, {"message": "after"})
    assert status == 200 and body["stopReason"] == "end_turn", body
    await raw.close()
    assert never_awaited(raw) == []


# ---- 2. resume and close of a closed session, together ------------------------------------


async def test_resume_close_resume_together_leave_exactly_one_runtime(
    raw: RawClient, workspace: Path
) -> None:
    sid = (await raw.new_session(workspace))["sessionId"]
    await raw.call("session/close", {"sessionId": sid})
    resume = ("session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    first, close = await raw.together(resume, ("session/close", {"sessionId": sid}))
    await asyncio.sleep(0.0002)
    (second,) = await raw.together(resume)
    replies = {name: await raw.reply(i) for name, i in (("resume", first), ("close", close))}
    replies["resume again"] = await raw.reply(second)
    for name, reply in replies.items():
        assert reply.get("error", {}).get("code") != INTERNAL_ERROR, (name, reply)
    assert "result" in replies["resume"], replies
    stale_url = replies["resume"]["result"]["_meta"]["http"]["url"]

    status = await raw.status(sid)
    assert status["live"] is True and status["status"] == "idle", (status, replies)
    assert status["http"] and status["http"]["url"], status
    url, token = await raw.endpoint(sid)
    assert url == status["http"]["url"]
    code, body = await http(port_of(url), "GET", "/agent/status", token)
    assert code == 200 and body["sessionId"] == sid and body["generation"] == status["generation"]
    assert (await raw.prompt(sid, "one runtime"))["stopReason"] == "end_turn"

    closed = await raw.call("session/close", {"sessionId": sid})
    assert closed["_meta"]["status"] == "closed" and closed["_meta"]["live"] is False
    assert not connectable(port_of(url)), "the closed runtime's listener still accepts"
    if port_of(stale_url) != port_of(url):
        assert not connectable(port_of(stale_url)), (
            f"the listener of the runtime that was closed ({stale_url}) still accepts connections"
        )
    with pytest.raises(RpcFailure) as no_http:
        await raw.endpoint(sid)
    assert no_http.value.code == SESSION_NOT_LIVE
    await raw.call("session/delete", {"sessionId": sid})
    with pytest.raises(RpcFailure):
        await raw.status(sid)
    await raw.close()
    assert never_awaited(raw) == []


# ---- 6. ids that JSON cannot echo ------------------------------------------------------------

NON_FINITE_IDS = ("1e999", "NaN", "-Infinity", "Infinity", "-1e400")


async def test_a_non_finite_id_is_an_invalid_request_with_null_id(raw: RawClient) -> None:
    for request_id in NON_FINITE_IDS:
        before = len(raw.lines)
        await raw.write(
            b'{"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": '
            + request_id.encode()
            + b"}\n"
        )
        assert await eventually(lambda n=before: len(raw.lines) > n, 10), request_id
        reply = json.loads(raw.lines[before])
        assert reply.get("error", {}).get("code") == INVALID_REQUEST, (request_id, reply)
        assert reply["id"] is None, (request_id, reply)
        # The same inside a batch.
        before = len(raw.lines)
        await raw.write(
            b'[{"jsonrpc": "2.0", "method": "session/list", "id": ' + request_id.encode() + b"}]\n"
        )
        assert await eventually(lambda n=before: len(raw.lines) > n, 10), request_id
        assert isinstance((await raw.call("session/list", {}))["sessions"], list)
    assert raw.not_strict == [], f"lines a strict JSON parser refuses: {raw.not_strict}"
    await raw.close()
    assert raw.not_strict == []


# ---- 7. cursors too long for an integer column ----------------------------------------------


async def test_an_oversized_cursor_is_invalid_params(raw: RawClient) -> None:
    for cursor in ("c99999999999999999999999", "c" + "9" * 5000, "c" + "1" * 19):
        reply = await raw.request("session/list", {"cursor": cursor})
        assert "error" in reply, (cursor[:30], reply)
        assert reply["error"]["code"] == INVALID_PARAMS, (cursor[:30], reply)
        assert reply["error"]["data"]["field"] == "cursor"
    assert isinstance((await raw.call("session/list", {}))["sessions"], list)
    assert "Traceback" not in raw.stderr_text()


# ---- 3. commands that try to escape their process group --------------------------------------

ESCAPES = ("setsid", "setsid_f", "set_m", "setpgid", "daemon")


def escaping_command(marker: str, tail: str) -> str:
    """Five ways out of a process group, each child marked with its own variable (host pids
    are found by environment: inside the sandbox's PID namespace `$!` means nothing here)."""
    return " ".join(
        [
            f"export {marker}=all;",
            f"{marker}_setsid=1 setsid sleep 300 &",
            f"{marker}_setsid_f=1 setsid -f sleep 300;",
            f"set -m; {marker}_set_m=1 sleep 300 & set +m;",
            f"{marker}_setpgid=1 python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' &",
            f"{marker}_daemon=1 python3 -c 'import os, time; os.fork() and os._exit(0); "
            "os.setsid(); os.fork() and os._exit(0); time.sleep(300)';",
            tail,
        ]
    )


def escaped_kinds(marker: str) -> set[str]:
    kinds = set()
    for entry in marker_values(marked(marker + "_")):
        kinds.add(entry.split("=", 1)[0][len(marker) + 1 :])
    return kinds


@pytest.mark.parametrize("backend", ["pipe", "pty"])
@pytest.mark.parametrize("end", ["turn-end", "cancel", "close", "stdin-eof", "sigkill"])
async def test_no_escaped_process_survives(
    data_dir: Path, workspace: Path, backend: str, end: str
) -> None:
    marker = f"T_MARK_{uuid.uuid4().hex}"
    client = await RawClient.start(data_dir, "--interrupt-grace", "0.2", "--kill-grace", "0.5")
    try:
        sid = (await client.new_session(workspace, backend=backend, approval="auto"))["sessionId"]
        tail = (
            "while [ ! -e go ]; do sleep 0.05; done; echo finished"
            if end == "turn-end"
            else "sleep 300"
        )
        (prompt_id,) = await client.together(
            ("session/prompt", text_prompt(sid, f"$ {escaping_command(marker, tail)}"))
        )
        started = await eventually(lambda: escaped_kinds(marker) >= set(ESCAPES), 20)
        assert started, f"not every escape started: {escaped_kinds(marker)}; {client.stderr_tail()}"
        if end == "turn-end":
            (workspace / "go").touch()
            reply = await client.reply(prompt_id, ANSWER)
            assert reply["result"]["stopReason"] == "end_turn", reply
        elif end in ("cancel", "close"):
            method = "session/cancel" if end == "cancel" else "session/close"
            await client.call(method, {"sessionId": sid})
            reply = await client.reply(prompt_id, ANSWER)
            assert reply["result"]["stopReason"] == "cancelled", reply
        elif end == "stdin-eof":
            assert await client.close() == 0
        else:
            client.sigkill()
            await client.wait_exit()
        gone = await eventually(lambda: not marked(marker), 15)
        assert gone, (
            f"{end} ({backend}): processes outlived it: "
            f"{ {pid: sorted(v) for pid, v in marked(marker).items()} }"
        )
    finally:
        await client.close()
    assert not marked(marker)
    if end != "sigkill":
        assert never_awaited(client) == []


# ---- 4. a timeout (or a cancel) of a command that left its group ----------------------------


def _sleeps(marker: str, argument: str) -> list[int]:
    found = []
    for pid in marked(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", argument.encode()]:
            found.append(pid)
    return found


@pytest.mark.parametrize("stop", ["timeout", "cancel"])
async def test_a_job_control_command_is_stopped_by_the_timeout_or_a_cancel(
    data_dir: Path, workspace: Path, stop: str
) -> None:
    marker = f"T_MARK_{uuid.uuid4().hex}"
    timeout = "3" if stop == "timeout" else "120"
    client = await RawClient.start(
        data_dir,
        "--tool-timeout",
        timeout,
        "--interrupt-grace",
        "0.2",
        "--kill-grace",
        "0.5",
        env={marker: "sidecar"},
    )
    try:
        sid = (await client.new_session(workspace, backend="pipe", approval="auto"))["sessionId"]
        (prompt_id,) = await client.together(
            ("session/prompt", text_prompt(sid, "$ set -m; sleep 999; true"))
        )
        assert await eventually(lambda: bool(_sleeps(marker, "999")), 10), client.stderr_tail()
        if stop == "cancel":
            cancelled = await client.call("session/cancel", {"sessionId": sid}, timeout=ANSWER)
            assert cancelled == {"cancelled": True}
        try:
            reply = await client.reply(prompt_id, 25 if stop == "timeout" else ANSWER)
        except TimeoutError:
            raise AssertionError(
                f"the turn was not answered after the {stop}; the command's pipe is held by "
                f"a process outside its group; log:\n{client.stderr_tail()}"
            ) from None
        assert "result" in reply, reply
        status = await settle_idle(client, sid)
        assert status["status"] == "idle", status
        (result,) = [m for m in await client.messages(sid) if m["type"] == "tool_result"]
        if stop == "timeout":
            assert reply["result"]["stopReason"] == "end_turn", reply
            assert "Killed after the 3 s timeout" in result["text"], result
        else:
            assert reply["result"]["stopReason"] == "cancelled", reply
        assert await eventually(lambda: not _sleeps(marker, "999"), 10)
        again = await client.prompt(sid, "$ echo next")
        assert "status 0" in again["_meta"]["response"], again
    finally:
        await client.close()
    assert await eventually(lambda: not marked(marker), 10), marked(marker)


# ---- 5. the bearer token never reaches the log, and malformed floods stay small ---------------


def _windows(secret: str, width: int = 12) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


async def _exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        try:
            async with asyncio.timeout(timeout):
                return await reader.read(65536)
        except (TimeoutError, ConnectionError):
            return b""
    finally:
        writer.close()


async def test_a_malformed_authorization_line_never_puts_the_token_in_the_log(
    tmp_path: Path, data_dir: Path, workspace: Path
) -> None:
    log_path = tmp_path / "sidecar.log"
    client = await RawClient.start(data_dir, log_path=log_path)  # DEBUG
    try:
        sid = (await client.new_session(workspace))["sessionId"]
        url, token = await client.endpoint(sid)
        port = port_of(url)
        get = f"GET /agent/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        bearer = f"Authorization: Bearer {token}"
        variants = {
            "trailing \\x01": f"{get}{bearer}\x01\r\n\r\n",
            "space before colon": f"{get}Authorization : Bearer {token}\r\n\r\n",
            "bare LF": f"{get}{bearer}\n\r\n",
            "bare LF everywhere": get.replace("\r\n", "\n") + f"{bearer}\n\n",
            "NUL": f"{get}{bearer}\x00\r\n\r\n",
            "DEL": f"{get}{bearer}\x7f\r\n\r\n",
            "CR inside": f"{get}{bearer}\rX: y\r\n\r\n",
            "folded": f"{get}Authorization: Bearer\r\n {token}\r\n\r\n",
            "in the request line": f"GET /agent/status?{token}\x01 HTTP/1.1\r\n\r\n",
        }
        answers = {}
        for name, request in variants.items():
            answer = await _exchange(port, request.encode("latin-1"))
            answers[name] = answer.split(b"\r\n", 1)[0].decode("latin-1")
        code, body = await http(port, "GET", "/agent/status", token)
        assert code == 200 and body["sessionId"] == sid
    finally:
        await client.close()
    text = log_path.read_text("utf-8", "replace")
    leaked = [w for w in _windows(token) if w in text]
    assert not leaked, (
        f"the bearer token (or {len(leaked)} 12-character pieces of it) is in the sidecar's log; "
        f"answers were {answers}; lines: "
        + "\n".join(line for line in text.splitlines() if any(w in line for w in leaked))[:3000]
    )


async def test_a_flood_of_malformed_requests_logs_little_and_no_traceback(
    tmp_path: Path, data_dir: Path, workspace: Path
) -> None:
    log_path = tmp_path / "sidecar.log"
    client = await RawClient.start(data_dir, log_path=log_path)  # DEBUG
    try:
        sid = (await client.new_session(workspace))["sessionId"]
        url, token = await client.endpoint(sid)
        port = port_of(url)
        await asyncio.sleep(0.3)
        before = log_path.read_bytes()
        kinds = [
            f"GET /agent/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Bad: a\x01b\r\n\r\n",
            f"GET /agent/status HTTP/1.1\r\nHost : 127.0.0.1:{port}\r\n\r\n",
            "HELLO WORLD\r\n\r\n",
            f"POST /agent/send HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: x\r\n\r\n",
            f"GET /agent/status HTTP/9.9\r\nHost: 127.0.0.1:{port}\r\n\r\n",
        ]
        for start in range(0, 300, 30):
            await asyncio.gather(
                *(
                    _exchange(port, kinds[i % len(kinds)].encode("latin-1"))
                    for i in range(start, start + 30)
                )
            )
        code, body = await http(port, "GET", "/agent/status", token)
        assert code == 200 and body["sessionId"] == sid
        await asyncio.sleep(0.3)
        during = log_path.read_bytes()[len(before) :].decode("utf-8", "replace")
    finally:
        await client.close()
    lines = during.splitlines()
    assert "Traceback" not in during, during[:3000]
    assert len(lines) <= 30, f"300 malformed requests logged {len(lines)} lines:\n" + "\n".join(
        lines[:40]
    )
    assert len(during) <= 30 * 300, f"{len(during)} bytes of log for 300 malformed requests"


# ---- 8. a command that cannot even start ------------------------------------------------------


def _every_call_has_a_result(entries: list[dict[str, Any]]) -> None:
    calls = [c["toolCallId"] for e in entries if e["type"] == "assistant" for c in e["toolCalls"]]
    results = [e["toolCallId"] for e in entries if e["type"] == "tool_result"]
    assert calls and sorted(calls) == sorted(results), (calls, results)


async def test_a_deleted_cwd_gives_a_tool_result_not_an_internal_error(
    raw: RawClient, tmp_path: Path
) -> None:
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    sid = (await raw.new_session(doomed))["sessionId"]  # asks first: allow_once
    assert (await raw.prompt(sid, "$ echo before"))["stopReason"] == "end_turn"
    (doomed / "file.txt").write_text("x")
    shutil.rmtree(doomed)  # rm -rf
    assert not doomed.exists()
    reply = await raw.request("session/prompt", text_prompt(sid, "$ echo hi"))
    assert "result" in reply, f"the prompt was answered with an error: {reply}"
    assert reply["result"]["stopReason"] == "end_turn"
    status = await raw.status(sid)
    assert status["status"] == "idle" and status["lastError"] is None, status
    entries = await raw.messages(sid)
    _every_call_has_a_result(entries)
    last = [e for e in entries if e["type"] == "tool_result"][-1]
    assert "could not start" in last["text"] and last["exitCode"] is None, last
    assert "No such file or directory" in last["text"], last
    after = await raw.prompt(sid, "plain words")
    assert "Echo: plain words" in after["_meta"]["response"]
    assert (await raw.status(sid))["status"] == "idle"


def _lowest_free_fd(pid: int) -> int:
    in_use = {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}
    return next(n for n in range(len(in_use) + 1) if n not in in_use)


@pytest.mark.parametrize("backend", ["pipe", "pty"])
async def test_no_descriptors_left_gives_a_tool_result_and_the_session_recovers(
    raw: RawClient, workspace: Path, backend: str
) -> None:
    sid = (await raw.new_session(workspace, backend=backend, approval="auto"))["sessionId"]
    assert "status 0" in (await raw.prompt(sid, "$ true"))["_meta"]["response"]
    original = resource.prlimit(raw.pid, resource.RLIMIT_NOFILE)
    # The limit caps descriptor numbers: at the lowest free one, no pipe, PTY or process
    # watchdog can be had, so the command cannot be spawned at all.
    resource.prlimit(raw.pid, resource.RLIMIT_NOFILE, (_lowest_free_fd(raw.pid), original[1]))
    try:
        reply = await raw.request("session/prompt", text_prompt(sid, "$ echo unreachable"))
        status = await raw.status(sid)
    finally:
        resource.prlimit(raw.pid, resource.RLIMIT_NOFILE, original)
    assert "result" in reply, f"the prompt was answered with an error: {reply}"
    assert status["status"] == "idle", status
    entries = await raw.messages(sid)
    _every_call_has_a_result(entries)
    last = [e for e in entries if e["type"] == "tool_result"][-1]
    assert "could not start" in last["text"] and last["exitCode"] is None, last
    again = await raw.prompt(sid, "$ echo works again")
    assert "status 0" in again["_meta"]["response"], again
    assert (await raw.status(sid))["status"] == "idle"
    _every_call_has_a_result(await raw.messages(sid))


# ---- 9. private files -------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("loose", [0o777, 0o755])
async def test_a_loose_data_dir_is_tightened(data_dir: Path, workspace: Path, loose: int) -> None:
    data_dir.mkdir()
    os.chmod(data_dir, loose)
    client = await RawClient.start(data_dir)
    try:
        assert "storeError" not in (client.initialized.get("_meta") or {})
        await client.new_session(workspace)
        assert _mode(data_dir) == 0o700
        assert _mode(data_dir / "sessions.db") == 0o600
    finally:
        await client.close()
    assert "tightened the data dir" in client.stderr_text()


async def test_a_world_readable_database_and_its_side_files_are_tightened(
    data_dir: Path, workspace: Path
) -> None:
    data_dir.mkdir(mode=0o700)
    db = data_dir / "sessions.db"
    first = await RawClient.start(data_dir)
    sid = (await first.new_session(workspace))["sessionId"]
    await first.prompt(sid, "kept")
    await first.close()
    # An older tool left the files world-readable, and has the database open (WAL).
    holder = sqlite3.connect(db)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE IF NOT EXISTS t_probe (x)")
    holder.commit()
    files = [db, data_dir / "sessions.db-wal", data_dir / "sessions.db-shm"]
    try:
        for path in files:
            assert path.exists(), path
            os.chmod(path, 0o644)
        client = await RawClient.start(data_dir)
        try:
            assert "storeError" not in (client.initialized.get("_meta") or {})
            for path in files:
                assert _mode(path) == 0o600, (path, oct(_mode(path)))
            assert (await client.status(sid))["messageCount"] == 2
        finally:
            await client.close()
    finally:
        holder.close()


async def _assert_store_refused(client: RawClient, workspace: Path, words: str) -> None:
    problem = (client.initialized.get("_meta") or {}).get("storeError")
    assert problem and words in problem, client.initialized
    requests: list[tuple[str, dict[str, Any]]] = [
        ("session/list", {}),
        ("session/new", {"cwd": str(workspace), "mcpServers": []}),
        ("_session/status", {"sessionId": "sess_0"}),
        ("session/resume", {"sessionId": "sess_0", "cwd": str(workspace), "mcpServers": []}),
        ("session/delete", {"sessionId": "sess_0"}),
        ("_session/messages", {"sessionId": "sess_0"}),
    ]
    for method, params in requests:
        reply = await client.request(method, params)
        assert reply.get("error", {}).get("code") == STORE_ERROR, (method, reply)
    assert client.process.returncode is None


async def test_a_dangling_database_symlink_is_refused_and_not_followed(
    data_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    data_dir.mkdir(mode=0o700)
    target = tmp_path / "elsewhere" / "planted.db"
    target.parent.mkdir()
    (data_dir / "sessions.db").symlink_to(target)
    client = await RawClient.start(data_dir)
    try:
        await _assert_store_refused(client, workspace, "symbolic link")
    finally:
        await client.close()
    assert not target.exists(), "the symlink was followed and its target created"
    assert list(target.parent.iterdir()) == []


async def test_a_data_dir_owned_by_another_user_is_refused(data_dir: Path, workspace: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the data dir away")
    data_dir.mkdir(mode=0o700)
    os.chown(data_dir, 65534, 65534)  # nobody
    client = await RawClient.start(data_dir)
    try:
        await _assert_store_refused(client, workspace, "owned by uid 65534")
    finally:
        await client.close()
    assert list(data_dir.iterdir()) == [], "files were created in someone else's data dir"


# ---- seen, not promised: the listener's connection cap, slow clients, long replays, leases --


def _sse_request(port: int, token: str) -> bytes:
    return (
        f"GET /agent/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()


async def test_the_connection_cap_is_hard_for_streaming_clients(
    raw: RawClient, workspace: Path
) -> None:
    sid = (await raw.new_session(workspace))["sessionId"]
    url, token = await raw.endpoint(sid)
    port = port_of(url)
    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    accepted = refused = dropped = json_refusals = 0
    try:
        for _ in range(300):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_sse_request(port, token))
            await writer.drain()
            try:
                async with asyncio.timeout(10):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                dropped += 1
                writer.close()
                continue
            status = int(head.split()[1])
            if status == 200:
                accepted += 1
                streams.append((reader, writer))
                continue
            assert status == 503, head
            refused += 1
            try:  # the refusal hangs up at once: our unread request may reset the body
                body = await asyncio.wait_for(reader.read(), 10)
            except ConnectionError:
                body = b""
            finally:
                writer.close()
            if body:
                assert "error" in json.loads(body), body
                json_refusals += 1
        # Streams already accepted may have been dropped to make room: count the live ones.
        await asyncio.sleep(0.2)
        live = [(r, w) for r, w in streams if not r.at_eof()]
        assert len(live) <= 256, f"{len(live)} streaming clients held at once (cap 256)"
        assert accepted + refused + dropped == 300
        assert refused + dropped >= 300 - 256, (accepted, refused, dropped)
        print(f"accepted {accepted}, refused {refused} ({json_refusals} read), dropped {dropped}")
    finally:
        for _, writer in streams:
            writer.close()
    assert await eventually(lambda: True, 0.5)

    async def answers() -> bool:
        try:
            code, _ = await http(port, "GET", "/agent/status", token, timeout=5)
        except (OSError, TimeoutError):
            return False
        return code == 200

    for _ in range(50):
        if await answers():
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the listener did not answer after the streams closed")
    assert (await raw.prompt(sid, "after the crowd"))["stopReason"] == "end_turn"


async def test_half_sent_requests_do_not_lock_the_token_holder_out(
    raw: RawClient, workspace: Path
) -> None:
    sid = (await raw.new_session(workspace))["sessionId"]
    url, token = await raw.endpoint(sid)
    port = port_of(url)
    writers: list[asyncio.StreamWriter] = []
    try:
        for _ in range(300):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /agent/sta")  # and nothing more, ever
            await writer.drain()
            writers.append(writer)
        await asyncio.sleep(0.3)
        code, body = await http(port, "GET", "/agent/status", token, timeout=5)
        assert code == 200 and body["sessionId"] == sid, (code, body)
        code, body = await http(port, "POST", "/agent/send", token, {"message": "hi"}, timeout=10)
        assert code == 200 and body["stopReason"] == "end_turn", (code, body)
    finally:
        for writer in writers:
            writer.close()


BIG = 20_000


def _seed_big_session(data_dir: Path, cwd: Path) -> str:
    import time

    from protocol.values import Backend, Mode, Status
    from sidecar.domain.records import SessionRecord
    from sidecar.domain.transcript import UserEntry, to_row
    from sidecar.store.blocking import blocking
    from sidecar.store.sqlite import SqliteSessionStore

    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    store, close = blocking(lambda: SqliteSessionStore(data_dir / "sessions.db"))
    try:
        stamp = time.time()
        record = SessionRecord(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=str(cwd),
            title="a long one",
            mode=Mode.CRAFT,
            backend=Backend.PIPE,
            status=Status.IDLE,
            generation=1,
            created_at=stamp,
            updated_at=stamp,
        )
        store.insert(record)
        for i in range(BIG):
            store.append_message(record.session_id, 1, to_row(UserEntry(f"message {i}")))
        store.update(record.session_id, 1, status=Status.CLOSED)
    finally:
        close()
    return record.session_id


async def test_status_is_answered_while_a_long_transcript_replays(
    data_dir: Path, workspace: Path
) -> None:
    sid = await asyncio.to_thread(_seed_big_session, data_dir, workspace)
    client = await RawClient.start(data_dir, log_level="INFO")
    try:
        (load_id,) = await client.together(
            ("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        )

        def replaying() -> bool:
            return any(
                n["method"] == "session/update" and n["params"].get("sessionId") == sid
                for n in client.notifications
            )

        assert await eventually(replaying, 20), client.stderr_tail()
        (status_id,) = await client.together(("_session/status", {"sessionId": sid}))
        status = await client.reply(status_id, 10)
        load = await client.reply(load_id, 60)
        assert "result" in status and "result" in load, (status, load)
        order = client.reply_order
        assert order.index(key(status_id)) < order.index(key(load_id)), (
            "the status reply waited behind the whole replay"
        )
        replayed = [
            n
            for n in client.notifications
            if n["method"] == "session/update"
            and n["params"].get("sessionId") == sid
            and n["params"]["update"].get("sessionUpdate") == "user_message_chunk"
        ]
        assert len(replayed) == BIG
    finally:
        await client.close()


async def test_a_frozen_lease_holder_wakes_to_a_deleted_session_quietly(
    tmp_path: Path, data_dir: Path, workspace: Path
) -> None:
    frozen = await RawClient.start(data_dir, "--lease-ttl", "1", log_path=tmp_path / "frozen.log")
    other = await RawClient.start(data_dir, "--lease-ttl", "1", log_path=tmp_path / "other.log")
    try:
        sid = (await frozen.new_session(workspace))["sessionId"]
        await frozen.prompt(sid, "from the first holder")
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            resume = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
            for _ in range(100):  # the frozen holder cannot renew: its lease runs out
                reply = await other.request("session/resume", resume)
                if "result" in reply:
                    break
                assert reply["error"]["code"] == int(ErrorCode.RUNTIME_LIVE), reply
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the frozen holder's lease never expired")
            await other.call("session/close", {"sessionId": sid})
            await other.call("session/delete", {"sessionId": sid})
        finally:
            os.kill(frozen.pid, signal.SIGCONT)

        # The old holder wakes up, notices the takeover at its next renewal, lets go.
        async def let_go() -> None:
            while (
                (await frozen.request("_session/status", {"sessionId": sid}))
                .get("result", {})
                .get("live")
            ):
                await asyncio.sleep(0.1)

        await asyncio.wait_for(let_go(), 10)
        await asyncio.sleep(1.0)  # a few more renewal periods
        listed = await frozen.call("session/list", {})
        assert sid not in [s["sessionId"] for s in listed["sessions"]]
    finally:
        await frozen.close()
        await other.close()
    for client in (frozen, other):
        text = client.stderr_text()
        assert "Traceback" not in text, text[-4000:]
        assert "never retrieved" not in text and "never awaited" not in text, text[-4000:]
