"""The JSON-RPC 2.0 framing contract of `python -m sidecar` on stdio, end to end.

Malformed input must get the exact JSON-RPC error and never take the sidecar down.
Most tests here talk to the child over plain asyncio pipes (`RawSidecar`), which
keeps every stdout line exactly as written: id-null errors, batch replies and
non-JSON lines are all visible (desktop.client.SidecarClient drops them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.client import RpcError
from protocol.errors import ErrorCode
from protocol.framing import MAX_MESSAGE_BYTES

REPO = Path(__file__).resolve().parent.parent
WAIT = 15.0
MIB = 1024 * 1024

PARSE_ERROR = int(ErrorCode.PARSE_ERROR)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
METHOD_NOT_FOUND = int(ErrorCode.METHOD_NOT_FOUND)
INVALID_PARAMS = int(ErrorCode.INVALID_PARAMS)


class RawSidecar:
    """A sidecar child on plain pipes: raw writes, every stdout line kept verbatim."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[bytes] = []  # every stdout line, as written
        self.notifications: list[dict[str, Any]] = []
        self.others: asyncio.Queue[Any] = asyncio.Queue()  # id-null replies, batches, junk
        self.stderr: list[bytes] = []
        self._by_id: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = 0
        self._reader = asyncio.create_task(self._read_stdout())
        self._stderr_task = asyncio.create_task(self._read_stderr())

    @classmethod
    async def start(cls, data_dir: Path, *args: str) -> RawSidecar:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sidecar",
            "--data-dir",
            str(data_dir),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_MESSAGE_BYTES,
            cwd=REPO,
        )
        raw = cls(process)
        # Asks for our extension notifications (_session/state), as our own clients do.
        init = {
            "protocolVersion": 1,
            "clientCapabilities": {"_meta": {"acp-session-host": {"notifications": True}}},
        }
        reply = await raw.request("initialize", init)
        assert "result" in reply, reply
        return raw

    @property
    def pid(self) -> int:
        return self.process.pid

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line)
            try:
                message = json.loads(line)
            except ValueError:
                self.others.put_nowait(line)
                continue
            if isinstance(message, dict) and "method" in message and "id" not in message:
                self.notifications.append(message)
                continue
            if isinstance(message, dict) and message.get("method") == "session/request_permission":
                self.notifications.append(message)  # asked; answered as "Allow once"
                answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
                await self.write(json.dumps(reply).encode() + b"\n")
                continue
            key = _key(message.get("id")) if isinstance(message, dict) else None
            future = self._by_id.pop(key, None) if key is not None else None
            if future is not None and not future.done():
                future.set_result(message)
            else:
                self.others.put_nowait(message)

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr.append(line)

    def next_id(self) -> str:
        self._ids += 1
        return f"raw-{self._ids}"

    def expect(self, request_id: Any) -> asyncio.Future[dict[str, Any]]:
        """Register interest in the reply with this id (before sending the request)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._by_id[_key(request_id)] = future
        return future

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def send_line(self, line: bytes, request_id: Any, timeout: float = WAIT) -> Any:
        """Write one raw line and wait for the reply carrying `request_id`."""
        future = self.expect(request_id)
        await self.write(line)
        return await asyncio.wait_for(future, timeout)

    async def request(
        self, method: str, params: Any = None, request_id: Any = None, timeout: float = WAIT
    ) -> dict[str, Any]:
        request_id = self.next_id() if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
        if params is not None:
            message["params"] = params
        line = json.dumps(message).encode() + b"\n"
        reply: dict[str, Any] = await self.send_line(line, request_id, timeout)
        return reply

    async def call(self, method: str, params: Any = None) -> Any:
        reply = await self.request(method, params)
        assert "result" in reply, f"{method} failed: {reply}"
        return reply["result"]

    async def other(self, timeout: float = WAIT) -> Any:
        """The next reply that matched no registered id (id null, batch, non-JSON)."""
        return await asyncio.wait_for(self.others.get(), timeout)

    async def assert_quiet(self, seconds: float = 0.5) -> None:
        with contextlib.suppress(TimeoutError):
            unexpected = await asyncio.wait_for(self.others.get(), seconds)
            raise AssertionError(f"the sidecar answered something unexpected: {unexpected!r}")

    async def assert_alive(self) -> None:
        """Still up and answering: a follow-up request is served."""
        assert self.process.returncode is None, f"sidecar exited: {self.stderr_tail()}"
        listed = await self.call("session/list", {})
        assert isinstance(listed["sessions"], list)

    def stderr_tail(self) -> str:
        return b"".join(self.stderr[-30:]).decode("utf-8", "replace")

    async def close(self, timeout: float = 20.0) -> int:
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        await asyncio.gather(self._reader, self._stderr_task, return_exceptions=True)
        return code


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def error_of(reply: Any) -> dict[str, Any]:
    assert isinstance(reply, dict), f"expected one JSON-RPC reply object, got {reply!r}"
    assert reply.get("jsonrpc") == "2.0", reply
    assert "error" in reply and "result" not in reply, f"expected an error reply: {reply!r}"
    error: dict[str, Any] = reply["error"]
    assert type(error.get("code")) is int and isinstance(error.get("message"), str), reply
    return error


@pytest.fixture
async def raw(data_dir: Path) -> Any:
    running = await RawSidecar.start(data_dir)
    try:
        yield running
    finally:
        await running.close()


# ---- framing and request-shape errors ---------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"{not json}\n",
        b'{"jsonrpc": "2.0", "method": "session/list", "id": 1\n',  # truncated
        b"[1, 2,]\n",
        b"nul\n",
    ],
    ids=["garbage", "truncated", "trailing-comma", "bad-literal"],
)
async def test_invalid_json_is_a_parse_error_with_null_id(raw: RawSidecar, line: bytes):
    await raw.write(line)
    reply = await raw.other()
    assert error_of(reply)["code"] == PARSE_ERROR, reply
    assert "id" in reply and reply["id"] is None, reply
    await raw.assert_alive()


async def test_non_utf8_bytes_are_a_parse_error(raw: RawSidecar):
    await raw.write(b'{"jsonrpc":"2.0","method":"session/list","params":{},"id":"\xff\xfe"}\n')
    reply = await raw.other()
    assert error_of(reply)["code"] == PARSE_ERROR, reply
    assert reply["id"] is None
    await raw.write(b"\xc3\x28\x80\n")
    assert error_of(await raw.other())["code"] == PARSE_ERROR
    await raw.assert_alive()


@pytest.mark.parametrize(
    "value",
    [
        7,
        "a string",
        None,
        True,
        {},
        {"jsonrpc": "1.0", "method": "session/list", "params": {}, "id": 1},
        {"method": "session/list", "params": {}, "id": 1},
        {"jsonrpc": "2.0", "method": 42, "params": {}, "id": 1},
        {"jsonrpc": "2.0", "method": None, "id": 1},
        {"jsonrpc": "2.0", "params": {}, "id": 1},
        {"jsonrpc": "2.0", "method": "session/list", "params": "x", "id": 1},
        {"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": {"a": 1}},
        {"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": 1, "extra": 1},
    ],
    ids=[
        "number",
        "string",
        "null",
        "bool",
        "empty-object",
        "jsonrpc-1.0",
        "no-jsonrpc",
        "method-int",
        "method-null",
        "no-method",
        "params-string",
        "id-object",
        "unknown-member",
    ],
)
async def test_json_that_is_not_a_request_is_invalid_request(raw: RawSidecar, value: Any):
    await raw.write(json.dumps(value).encode() + b"\n")
    reply = await raw.other()
    assert error_of(reply)["code"] == INVALID_REQUEST, reply
    assert isinstance(reply["error"].get("data"), str), reply  # says what is wrong
    # Answered by its id whenever the id can be read; null only when it cannot.
    readable = isinstance(value, dict) and type(value.get("id")) in (str, int)
    assert reply["id"] == (value["id"] if readable else None), reply
    await raw.assert_alive()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"jsonrpc": "2.0", "id": "c2", "method": "session/cancel", "params": 7}, "params"),
        ({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": "x"}, "params"),
        ({"jsonrpc": "2.0", "id": "v", "method": "session/list", "params": True}, "params"),
        ({"jsonrpc": "1.0", "id": 2**70, "method": "session/list"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": -0.5, "method": 3}, "method"),
        ({"jsonrpc": "2.0", "id": "x", "method": "session/list", "result": 1}, "result"),
    ],
    ids=["params-number", "params-string", "params-bool", "huge-id", "float-id", "extra"],
)
async def test_an_invalid_request_is_answered_by_its_id(
    raw: RawSidecar, value: dict[str, Any], reason: str
):
    reply = await raw.send_line(json.dumps(value).encode() + b"\n", value["id"])
    error = error_of(reply)
    assert error["code"] == INVALID_REQUEST and reason in error["data"], reply
    assert reply["id"] == value["id"] and type(reply["id"]) is type(value["id"]), reply
    await raw.assert_alive()


async def test_a_batch_answers_every_readable_id_even_beside_a_bad_item(raw: RawSidecar):
    batch = [
        {"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": "ok"},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": 7, "id": "bad"},
        {"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": {"not": "an id"}},
        {"jsonrpc": "2.0", "method": "session/list", "params": {}},  # a notification
        7,
    ]
    await raw.write(json.dumps(batch).encode() + b"\n")
    reply = await raw.other()
    assert isinstance(reply, list) and [item["id"] for item in reply] == ["ok", "bad", None, None]
    assert reply[0]["result"] == {"sessions": []}
    assert [error_of(item)["code"] for item in reply[1:]] == [INVALID_REQUEST] * 3
    await raw.assert_alive()


async def test_empty_batch_is_invalid_request(raw: RawSidecar):
    await raw.write(b"[]\n")
    reply = await raw.other()
    assert error_of(reply)["code"] == INVALID_REQUEST, reply
    assert reply["id"] is None
    await raw.assert_alive()


async def test_unknown_method(raw: RawSidecar):
    reply = await raw.request("session/teleport", {})
    error = error_of(reply)
    assert error["code"] == METHOD_NOT_FOUND, reply
    assert isinstance(reply["id"], str) and reply["id"].startswith("raw-")
    assert "session/teleport" in json.dumps(error), error  # says which method
    # Names in the extension namespace that we do not define are unknown too.
    assert error_of(await raw.request("_session/nope", {}))["code"] == METHOD_NOT_FOUND
    await raw.assert_alive()


@pytest.mark.parametrize("method", ["session/list", "_session/status", "initialize"])
async def test_positional_params_are_invalid_params(raw: RawSidecar, method: str):
    reply = await raw.request(method, ["sess_x", 1])
    assert error_of(reply)["code"] == INVALID_PARAMS, reply
    await raw.assert_alive()


async def test_batch_of_two_requests_gets_a_list_of_two_replies(raw: RawSidecar):
    batch = [
        {"jsonrpc": "2.0", "method": "session/list", "params": {}, "id": "b1"},
        {"jsonrpc": "2.0", "method": "_session/status", "params": {"sessionId": "x"}, "id": 2},
    ]
    await raw.write(json.dumps(batch).encode() + b"\n")
    reply = await raw.other()
    assert isinstance(reply, list) and len(reply) == 2, reply
    by_id = {item["id"]: item for item in reply}
    assert set(by_id) == {"b1", 2}
    assert by_id["b1"]["result"] == {"sessions": []}
    assert error_of(by_id[2])["code"] == ErrorCode.SESSION_NOT_FOUND
    await raw.assert_alive()


async def test_batch_of_notifications_gets_no_reply(raw: RawSidecar):
    # A batch of notifications only gets no reply at all.
    batch = [{"jsonrpc": "2.0", "method": "session/list", "params": {}}] * 2
    await raw.write(json.dumps(batch).encode() + b"\n")
    await raw.assert_quiet(0.5)
    await raw.assert_alive()


async def test_notification_with_bad_params_gets_no_reply(raw: RawSidecar):
    for method, params in [
        ("_session/status", {"sessionId": 5}),
        ("session/cancel", {"sessionId": ["x"]}),
        ("session/new", {"cwd": 12}),
        ("session/prompt", {"sessionId": "sess_missing", "prompt": "not a list"}),
        ("no/such/method", {}),
    ]:
        await raw.write(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())
        await raw.write(b"\n")
    await raw.assert_quiet(0.7)
    await raw.assert_alive()


async def test_deeply_nested_json_gets_an_error_not_a_crash(raw: RawSidecar):
    depth = 100_000
    await raw.write(b"[" * depth + b"]" * depth + b"\n")
    reply = await raw.other()
    assert error_of(reply)["code"] in (PARSE_ERROR, INVALID_REQUEST), reply
    assert reply["id"] is None
    # An object nesting that parses but is deep inside params.
    nested: Any = "leaf"
    for _ in range(900):
        nested = [nested]
    reply = await raw.request("session/list", {"cwd": nested})
    assert error_of(reply)["code"] == INVALID_PARAMS, reply
    await raw.write(b'{"a":' * depth + b"1" + b"}" * depth + b"\n")
    assert error_of(await raw.other())["code"] in (PARSE_ERROR, INVALID_REQUEST)
    await raw.assert_alive()


async def test_blank_lines_and_crlf_are_tolerated(raw: RawSidecar):
    await raw.write(b"\n\n   \n")
    await raw.assert_quiet(0.3)
    reply = await raw.send_line(
        b'{"jsonrpc":"2.0","method":"session/list","params":{},"id":"crlf"}\r\n', "crlf"
    )
    assert reply["result"] == {"sessions": []}, reply


# ---- params validation, per method -------------------------------------------------------


def _bad_params(workspace: str) -> list[tuple[str, dict[str, Any], str]]:
    sid = "sess_missing"
    prompt = [{"type": "text", "text": "hi"}]
    return [
        ("_session/status", {"sessionId": 7}, "sessionId"),
        ("_session/status", {}, "sessionId"),
        ("_session/messages", {"sessionId": 7}, "sessionId"),
        ("_session/messages", {"sessionId": sid, "offset": -1}, "offset"),
        ("_session/messages", {"sessionId": sid, "limit": 0}, "limit"),
        ("_session/messages", {"sessionId": sid, "limit": 10_000}, "limit"),
        ("_session/messages", {"sessionId": sid, "offset": "3"}, "offset"),
        ("_session/messages", {"sessionId": sid, "limit": 1.5}, "limit"),
        ("session/prompt", {"sessionId": 7, "prompt": prompt}, "sessionId"),
        ("session/prompt", {"sessionId": sid, "prompt": "hi"}, "prompt"),
        ("session/prompt", {"sessionId": sid, "prompt": {"type": "text"}}, "prompt"),
        ("session/prompt", {"sessionId": sid}, "prompt"),
        ("session/close", {"sessionId": 7}, "sessionId"),
        ("session/delete", {"sessionId": 7}, "sessionId"),
        ("session/cancel", {"sessionId": 7}, "sessionId"),
        ("session/resume", {"sessionId": 7, "cwd": workspace}, "sessionId"),
        ("session/resume", {"sessionId": sid, "cwd": [workspace]}, "cwd"),
        ("session/load", {"sessionId": 7, "cwd": workspace}, "sessionId"),
        ("session/load", {"sessionId": sid, "cwd": [workspace]}, "cwd"),
        ("session/set_mode", {"sessionId": 7, "modeId": "ask"}, "sessionId"),
        ("session/new", {"cwd": [workspace], "mcpServers": []}, "cwd"),
        ("session/new", {"cwd": 3}, "cwd"),
        ("session/list", {"cwd": [workspace]}, "cwd"),
        ("session/list", {"cwd": "relative/dir"}, "cwd"),
        ("session/list", {"cursor": 5}, "cursor"),
        # (a non-numeric string is deliberately coerced by ACP's schema, for old clients)
        ("initialize", {"protocolVersion": -1}, "protocolVersion"),
        ("initialize", {}, "protocolVersion"),
    ]


async def test_wrong_param_types_name_the_field(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    failures: list[str] = []
    for method, params, field in _bad_params(str(workspace)):
        try:
            result = await sidecar.call(method, params)
        except RpcError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            if exc.code != INVALID_PARAMS or data.get("field") != field:
                failures.append(
                    f"{method} {params!r}: want -32602 field={field!r}, "
                    f"got {exc.code} data={exc.data!r} ({exc.message})"
                )
        else:
            failures.append(f"{method} {params!r}: accepted, result {result!r}")
    assert not failures, "\n".join(failures)
    # The same bad types against a real session id change nothing.
    status = await sidecar.status(sid)
    assert status["status"] == "idle" and status["messageCount"] == 0
    assert (await sidecar.call("session/list", {}))["sessions"][0]["sessionId"] == sid


@pytest.mark.parametrize("cwd", ["/proc", "/proc/self", "/dev", "/dev/shm", "/sys/kernel"])
async def test_a_sandboxed_cwd_under_proc_dev_or_sys_is_invalid_params(
    sidecar: Sidecar, workspace: Path, tmp_path: Path, cwd: str
):
    """Every command there would fail (the sandbox has its own /proc, /dev, /sys): refused
    where the cwd enters, naming it; with the sandbox off the directory is usable."""
    link = tmp_path / "into"
    link.symlink_to(cwd)
    for named, meta in ((cwd, {}), (str(link), {}), (cwd, {"mode": "plan"})):
        with pytest.raises(RpcError) as caught:
            await sidecar.call("session/new", {"cwd": named, "mcpServers": [], "_meta": meta})
        assert caught.value.code == INVALID_PARAMS, caught.value
        top = "/" + cwd.split("/")[1]
        assert caught.value.data["field"] == "cwd" and top in caught.value.data["reason"]
    assert (await sidecar.call("session/list", {}))["sessions"] == []  # nothing created
    source = (await sidecar.new_session(workspace))["sessionId"]
    with pytest.raises(RpcError) as caught:
        await sidecar.call("session/fork", {"sessionId": source, "cwd": cwd, "mcpServers": []})
    assert caught.value.code == INVALID_PARAMS and caught.value.data["field"] == "cwd"
    off = (await sidecar.new_session(cwd, sandbox="off"))["sessionId"]
    # ... and it cannot be sandboxed afterwards either.
    with pytest.raises(RpcError) as caught:
        await sidecar.call("session/set_mode", {"sessionId": off, "modeId": "plan"})
    assert caught.value.code == INVALID_PARAMS and caught.value.data["field"] == "modeId"
    status = await sidecar.status(off)
    assert (status["mode"], status["effectiveSandbox"]) == ("craft", "off")


async def test_prompt_without_text_is_invalid_params(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    for prompt in ([], [{"type": "text", "text": "   "}]):
        with pytest.raises(RpcError) as rejected:
            await sidecar.call("session/prompt", {"sessionId": sid, "prompt": prompt})
        assert rejected.value.code == INVALID_PARAMS
        assert rejected.value.data["field"] == "prompt"
    status = await sidecar.status(sid)
    assert status["status"] == "idle" and status["messageCount"] == 0


# ---- payload content --------------------------------------------------------------------

UNICODE_TEXTS = [
    "emoji 😀👩‍👩‍👧‍👦 🇫🇷 and a ZWJ sequence",
    "RTL: שלום עולם / مرحبا بالعالم \u200f mixed \u202e reversed \u202c",
    "combining e\u0301 and astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and CJK 漢字",
    "line\u2028separator\u2029paragraph and tab\there\nnewline",
    'quotes " and \\ backslashes \\" and a NUL \u0000 in the middle',
]


async def test_unicode_prompt_round_trips(sidecar: Sidecar, workspace: Path):
    sid = (await sidecar.new_session(workspace))["sessionId"]
    for text in UNICODE_TEXTS:
        result = await sidecar.prompt(sid, text)
        assert result["_meta"]["response"] == f"Echo: {text}"
    messages = (await sidecar.messages(sid, limit=1000))["messages"]
    users = [m["text"] for m in messages if m["type"] == "user"]
    assistants = [m["text"] for m in messages if m["type"] == "assistant"]
    assert users == UNICODE_TEXTS
    assert assistants == [f"Echo: {t}" for t in UNICODE_TEXTS]
    # The ACP client's own prompt is not echoed back as user_message_chunk (it has it).
    assert sidecar.updates(sid, "user_message_chunk") == []
    agent = "".join(u["content"]["text"] for u in sidecar.updates(sid, "agent_message_chunk"))
    assert agent == "".join(f"Echo: {t}" for t in UNICODE_TEXTS)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\udc00\\ud800"])
async def test_lone_surrogate_is_rejected_cleanly_or_round_trips(
    raw: RawSidecar, workspace: Path, escape: str
):
    created = await raw.call("session/new", {"cwd": str(workspace), "mcpServers": []})
    sid = created["sessionId"]
    request_id = raw.next_id()
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": "a@@b"}]}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
    line = json.dumps(message).replace("@@", escape).encode() + b"\n"  # raw JSON escapes
    reply = await raw.send_line(line, request_id)
    text = json.loads(f'"a{escape}b"')
    status = await raw.call("_session/status", {"sessionId": sid})
    if "error" in reply:
        assert reply["error"]["code"] == INVALID_PARAMS, (
            f"a lone surrogate must be refused as invalid params, not {reply['error']}; "
            f"session afterwards: {status}"
        )
        assert status["status"] == "idle" and status["messageCount"] == 0, status
    else:
        assert reply["result"]["_meta"]["response"] == f"Echo: {text}", reply
        page = await raw.call("_session/messages", {"sessionId": sid})
        assert [m["text"] for m in page["messages"]] == [text, f"Echo: {text}"]
        assert status["status"] == "idle", status
        # Accepted, so the session/update stream must carry the answer too.
        agent = "".join(
            n["params"]["update"]["content"]["text"]
            for n in raw.notifications
            if n["method"] == "session/update"
            and n["params"]["sessionId"] == sid
            and n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert agent == f"Echo: {text}", (
            "the prompt was accepted and answered, but its agent_message_chunk notifications "
            f"were lost (encode_message and lone surrogates?): {agent!r}"
        )
    # Either way the session and the sidecar still work.
    after = await raw.call(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "fine"}]}
    )
    assert after["_meta"]["response"] == "Echo: fine"
    for out in raw.lines:
        out.decode("utf-8")  # every line the sidecar wrote is valid UTF-8
        json.loads(out)


def _surrogate_cases(workspace: str) -> list[tuple[str, dict[str, Any]]]:
    bad = "sess_@@"  # @@ becomes a raw JSON escape of a lone surrogate
    prompt = [{"type": "text", "text": "hi"}]
    return [
        ("_session/status", {"sessionId": bad}),
        ("_session/messages", {"sessionId": bad}),
        ("session/close", {"sessionId": bad}),
        ("session/delete", {"sessionId": bad}),
        ("session/resume", {"sessionId": bad, "cwd": workspace}),
        ("session/load", {"sessionId": bad, "cwd": workspace}),
        ("session/cancel", {"sessionId": bad}),
        ("session/set_mode", {"sessionId": bad, "modeId": "ask"}),
        ("session/prompt", {"sessionId": bad, "prompt": prompt}),
        ("session/list", {"cwd": "/tmp/@@"}),
        ("session/new", {"cwd": "/tmp/@@", "mcpServers": []}),
    ]


@pytest.mark.parametrize("escape", ["\\ud800", "\\udc80"])
async def test_lone_surrogate_in_ids_and_paths_is_a_clean_error(
    raw: RawSidecar, workspace: Path, escape: str
):
    """A session id or path that cannot exist must get invalid-params or not-found,
    never an internal error (the sidecar log shows sqlite's UnicodeEncodeError)."""
    failures: list[str] = []
    for method, params in _surrogate_cases(str(workspace)):
        request_id = raw.next_id()
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        line = json.dumps(message).replace("@@", escape).encode() + b"\n"
        reply = await raw.send_line(line, request_id)
        error = error_of(reply)
        if error["code"] not in (INVALID_PARAMS, int(ErrorCode.SESSION_NOT_FOUND)):
            failures.append(f"{method} {escape}: {error}")
    assert not failures, (
        "lone surrogates reach the sqlite store and fail as internal errors:\n"
        + "\n".join(failures)
    )
    await raw.assert_alive()


async def test_16_mib_prompt_passes_both_ways(sidecar: Sidecar, workspace: Path):
    # No spaces: the offline provider streams "Echo: <text>" word by word.
    block = 'abcdefghij0123456789é"\\\n\t<>{}[]' + "xyz" * 10
    text = (block * (16 * MIB // len(block) + 1))[: 16 * MIB].strip() + "END"
    assert len(text) >= 16 * MIB - 8
    sid = (await sidecar.new_session(workspace))["sessionId"]
    started = time.monotonic()
    result = await asyncio.wait_for(sidecar.prompt_task(sid, text), 60)
    assert result["stopReason"] == "end_turn"
    response = result["_meta"]["response"]
    assert len(response) == len(text) + len("Echo: ")
    assert response == "Echo: " + text
    page = await sidecar.messages(sid)
    assert page["total"] == 2
    assert page["messages"][0]["text"] == text
    assert page["messages"][1]["text"] == "Echo: " + text
    assert time.monotonic() - started < 30


async def test_oversized_line_is_refused_and_the_sidecar_stays_up(raw: RawSidecar):
    big = b'{"jsonrpc":"2.0","method":"session/list","params":{"cwd":"'
    big += b"x" * (MAX_MESSAGE_BYTES + 10) + b'"},"id":"big"}\n'
    await raw.write(big)
    reply = await raw.other(timeout=30)
    assert error_of(reply)["code"] == INVALID_REQUEST, reply
    assert reply["id"] is None
    await raw.assert_alive()


# ---- stdout purity and concurrency ------------------------------------------------------


async def test_stdout_carries_only_json_rpc(data_dir: Path, workspace: Path):
    raw = await RawSidecar.start(data_dir, "--log-level", "DEBUG")
    try:
        created = await raw.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = created["sessionId"]
        command = (
            "echo tool-stdout; echo tool-stderr >&2; "
            f"{sys.executable} -c \"import os; os.write(1, b'py-fd1\\n')\"; exit 0"
        )
        # A stray write to the sidecar's own fd 1 and fd 2 (commands cannot reach them: they
        # run in their own PID namespace, where the sidecar's /proc entry does not exist).
        for fd, marker in ((1, b"LEAK1\n"), (2, b"LEAK2\n")):
            with open(f"/proc/{raw.pid}/fd/{fd}", "wb") as stray:
                stray.write(marker)
        result = await raw.call(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": f"$ {command}"}]},
        )
        assert result["stopReason"] == "end_turn", result
        assert "tool-stdout" in result["_meta"]["response"]
        await raw.write(b"not json at all\n")  # errors travel on stdout as JSON too
        assert error_of(await raw.other())["code"] == PARSE_ERROR
        await raw.call("session/close", {"sessionId": sid})
    finally:
        assert await raw.close() == 0
    assert raw.lines, "the sidecar wrote nothing on stdout"
    impure: list[bytes] = []
    for line in raw.lines:
        try:
            message = json.loads(line)
        except ValueError:
            impure.append(line)
            continue
        items = message if isinstance(message, list) else [message]
        if not items or not all(
            isinstance(m, dict) and m.get("jsonrpc") == "2.0" and ("method" in m or "id" in m)
            for m in items
        ):
            impure.append(line)
        if not line.endswith(b"\n"):
            impure.append(line)
    assert not impure, f"stdout carried non-JSON-RPC lines: {impure[:5]!r}"
    stdout = b"".join(raw.lines)
    assert b"LEAK1" not in stdout and b"LEAK2" not in stdout
    stderr = b"".join(raw.stderr)
    assert b"LEAK1\n" in stderr  # the sidecar's fd 1 is its stderr
    assert b"LEAK2\n" in stderr


async def test_status_requests_answer_while_a_prompt_runs(raw: RawSidecar, workspace: Path):
    sids = [
        (await raw.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        for _ in range(4)
    ]
    busy = sids[0]
    prompt = raw.expect("the-prompt")
    await raw.write(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "the-prompt",
                "method": "session/prompt",
                "params": {"sessionId": busy, "prompt": [{"type": "text", "text": "/sleep 2"}]},
            }
        ).encode()
        + b"\n"
    )
    deadline = time.monotonic() + 5
    while not any(
        n["method"] == "_session/state" and n["params"]["status"] == "running"
        for n in raw.notifications
    ):
        assert time.monotonic() < deadline, "the prompt never started running"
        await asyncio.sleep(0.02)
    wanted: dict[Any, str] = {}
    futures: dict[Any, asyncio.Future[dict[str, Any]]] = {}
    burst = b""
    for i in range(20):
        request_id: Any = i * 7 + 1000 if i % 2 else f"status-{i}"
        wanted[request_id] = sids[i % len(sids)]
        futures[request_id] = raw.expect(request_id)
        burst += (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "_session/status",
                    "params": {"sessionId": wanted[request_id]},
                }
            ).encode()
            + b"\n"
        )
    sent = time.monotonic()
    await raw.write(burst)  # all twenty in one write
    replies = await asyncio.wait_for(asyncio.gather(*futures.values()), 5)
    answered = time.monotonic() - sent
    assert not prompt.done(), "the prompt finished before the status burst was answered"
    assert answered < 3, f"status burst took {answered:.2f}s behind a running prompt"
    for request_id, reply in zip(futures, replies, strict=True):
        assert reply["id"] == request_id
        assert reply["result"]["sessionId"] == wanted[request_id], reply
        expected = "running" if wanted[request_id] == busy else "idle"
        assert reply["result"]["status"] == expected, reply
    done = await asyncio.wait_for(prompt, 10)
    assert done["result"]["stopReason"] == "end_turn"
    assert done["result"]["_meta"]["response"] == "Slept 2 s."


# ---- property-based: random input never breaks the server -------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)

METHODS = [
    "initialize",
    "session/new",
    "session/load",
    "session/resume",
    "session/close",
    "session/delete",
    "session/list",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "_session/status",
    "_session/messages",
    # _sidecar/shutdown is left out: it would (correctly) stop the sidecar.
]

param_keys = st.sampled_from(
    ["sessionId", "cwd", "prompt", "offset", "limit", "modeId", "cursor", "_meta"]
    + ["mcpServers", "protocolVersion", "_context", "params", ""]
) | st.text(max_size=8)
random_params = st.dictionaries(param_keys, json_values, max_size=5)


def _is_request_shaped(value: Any) -> bool:
    """Would a JSON-RPC 2.0 server accept this as a request/notification (or batch)?"""
    items = value if isinstance(value, list) else [value]
    if not items:
        return False
    return all(
        isinstance(v, dict)
        and v.get("jsonrpc") == "2.0"
        and isinstance(v.get("method"), str)
        and not (v.keys() - {"jsonrpc", "method", "params", "id"})
        for v in items
    )


def _run_property(data_dir: Path, check: Any, strategy: Any, max_examples: int) -> None:
    """One sidecar for the whole hypothesis run, driven from a private event loop."""
    ran: list[None] = []
    with asyncio.Runner() as runner:
        raw = runner.run(RawSidecar.start(data_dir))
        try:

            @settings(
                max_examples=max_examples,
                deadline=None,
                derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            )
            @given(strategy)
            def property_test(example: Any) -> None:
                ran.append(None)
                runner.run(check(raw, example))

            property_test()
            runner.run(raw.assert_alive())
        finally:
            code = runner.run(raw.close())
        assert code == 0, raw.stderr_tail()
    assert len(ran) >= max_examples // 2, f"only {len(ran)} examples ran"


def _answered_ids(value: Any) -> list[tuple[Any, bool]]:
    """The ids the answers to `value` carry, in order, and whether each is an invalid
    request: a response of the client's and a notification get none; anything else the
    id it has when that can be read, else null."""
    ids = []
    for item in value if isinstance(value, list) else [value]:
        if (
            isinstance(item, dict)
            and "method" not in item
            and ("result" in item or "error" in item)
        ):
            continue  # a response (to a request of the sidecar's)
        if _is_request_shaped(item) and "id" not in item:
            continue  # a notification
        readable = isinstance(item, dict) and type(item.get("id")) in (str, int, float)
        ids.append((item["id"] if readable else None, not _is_request_shaped(item)))
    return ids


def test_random_json_lines_always_get_a_well_formed_error(tmp_path: Path):
    async def check(raw: RawSidecar, value: Any) -> None:
        line = json.dumps(value).encode() + b"\n"
        await raw.write(line)
        expected = _answered_ids(value) if value != [] else [(None, True)]
        if _is_request_shaped(value) or not expected:  # vanishingly rare
            await raw.assert_alive()
            return
        reply = await raw.other()
        if isinstance(value, list) and value:
            assert isinstance(reply, list), (value, reply)  # a batch: a list of answers
            replies = reply
        else:
            replies = [reply]
        assert [item["id"] for item in replies] == [id for id, _ in expected], (value, reply)
        for item, (_, invalid) in zip(replies, expected, strict=True):
            assert not invalid or error_of(item)["code"] == INVALID_REQUEST, (value, reply)
        assert raw.process.returncode is None

    _run_property(tmp_path / "data", check, json_values, max_examples=100)


def test_random_params_to_every_method_get_a_result_or_an_error(
    tmp_path: Path, workspace: Path
) -> None:
    counter = iter(range(10**9))

    async def check(raw: RawSidecar, example: tuple[str, dict[str, Any], bool]) -> None:
        method, params, with_real_session = example
        if with_real_session and "sessionId" not in params:
            created = await raw.call("session/new", {"cwd": str(workspace), "mcpServers": []})
            params = {**params, "sessionId": created["sessionId"]}
        request_id = f"h-{next(counter)}"
        reply = await raw.request(method, params, request_id=request_id, timeout=WAIT)
        assert reply.get("jsonrpc") == "2.0" and reply["id"] == request_id, reply
        assert ("result" in reply) != ("error" in reply), reply
        if "error" in reply:
            error = error_of(reply)
            assert error["code"] != int(ErrorCode.INTERNAL_ERROR), (
                f"{method} {params!r} hit an internal error: {reply}\n{raw.stderr_tail()}"
            )
        status = await raw.request("session/list", {})
        assert "result" in status, status

    strategy = st.tuples(st.sampled_from(METHODS), random_params, st.booleans())
    _run_property(tmp_path / "data", check, strategy, max_examples=100)
