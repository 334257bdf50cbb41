"""Every request whose id can be read is answered by that id, once (issue 21, finding 7).

A seeded generator writes ~2,000 messages to the real sidecar over its pipes: valid
requests (known and unknown methods, wrong params), requests whose `params` is a string
or a number, broken requests, notifications, responses to no request of the sidecar's,
batches of all of these, invalid JSON, huge, fractional and duplicate ids. After the
sidecar has exited on EOF its whole stdout is counted: each readable id (a string, a
number or null) has exactly as many answers as requests carried it; `null` answers are
exactly the requests with `"id": null` plus the messages whose id cannot be read (bad
JSON, an id of a wrong type, not an object, an empty batch); notifications and
responses get none. The sidecar stays up throughout and exits 0.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from raw_client import RawClient, eventually, frame, key, strict_json

SEED = 2121
MESSAGES = 2000
PER_WRITE = 40  # messages in one write: several per read on the sidecar's side

# Methods that answer at once and change nothing that matters here (never
# _sidecar/shutdown, which would rightly stop the sidecar; never a real prompt).
METHODS = [
    "session/list",
    "_session/status",
    "session/cancel",
    "_session/messages",
    "session/prompt",
    "session/set_mode",
    "session/close",
    "_session/changes",
    "no/such/method",
    "_session/nope",
]
JUNK: list[Any] = [7, "x", True, None, -1, 2**70, 1.5, [], {}, [1, "a"], {"a": {"b": [None]}}]


class Plan:
    """The messages to send and the answers they must get."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lines: list[bytes] = []
        self.expected: Counter[str] = Counter()  # key(id) -> answers due (null included)
        self.used: list[Any] = []  # ids given so far, for duplicates
        self.serial = 0

    def new_id(self) -> Any:
        rng = self.rng
        self.serial += 1
        n = self.serial
        roll = rng.random()
        if self.used and roll < 0.08:
            return rng.choice(self.used)  # a duplicate
        if roll < 0.35:
            made: Any = n
        elif roll < 0.6:
            made = f"f-{n}"
        elif roll < 0.7:
            made = 2**64 + n  # beyond any machine integer
        elif roll < 0.75:
            made = -n
        elif roll < 0.8:
            made = n + 0.5
        elif roll < 0.84:
            made = None  # readable: answered with null
        else:
            made = f"ü-{n}-" + "x" * rng.randrange(0, 300)
        self.used.append(made)
        return made

    def params(self) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.5:
            return {"sessionId": rng.choice(["sess_missing", "", 7, None])}
        if roll < 0.65:
            return {rng.choice(["offset", "limit", "cwd", "modeId", "_meta"]): rng.choice(JUNK)}
        if roll < 0.8:
            return rng.choice(["x", 7, 2**70, True, None, 1.5])  # not structured: invalid
        if roll < 0.9:
            return ["sess_missing", 1]  # positional
        return {}

    def item(self) -> tuple[Any, Any]:
        """One message as a JSON value, and the id key its answer must carry (None: no
        answer is due)."""
        rng = self.rng
        roll = rng.random()
        method = rng.choice(METHODS)
        if roll < 0.45:  # a request, well formed or with params of a wrong type
            request_id = self.new_id()
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
            params = self.params()
            if params != {} or rng.random() < 0.5:
                message["params"] = params
            return message, key(request_id)
        if roll < 0.6:  # a notification (structured params or none): never answered
            message = {"jsonrpc": "2.0", "method": method}
            if rng.random() < 0.7:
                message["params"] = rng.choice([{}, {"sessionId": "sess_missing"}, [1]])
            return message, None
        if roll < 0.75:  # broken, with a readable id
            request_id = self.new_id()
            broken = rng.choice(
                [
                    {"jsonrpc": "1.0", "method": method, "id": request_id},
                    {"method": method, "id": request_id},
                    {"jsonrpc": "2.0", "method": 42, "id": request_id},
                    {"jsonrpc": "2.0", "id": request_id},
                    {"jsonrpc": "2.0", "method": method, "id": request_id, "extra": 1},
                    {"jsonrpc": "2.0", "method": method, "id": request_id, "result": 1},
                ]
            )
            return broken, key(request_id)
        if roll < 0.85:  # an id that cannot be read, or not an object at all
            unreadable = rng.choice(
                [
                    {"jsonrpc": "2.0", "method": method, "id": {"a": 1}},
                    {"jsonrpc": "2.0", "method": method, "id": [1]},
                    {"jsonrpc": "2.0", "method": method, "id": True},
                    {"jsonrpc": "2.0", "method": method, "params": 7},  # no id to read
                    7,
                    "a string",
                    None,
                    {},
                ]
            )
            return unreadable, key(None)
        # A response to no request of the sidecar's: dropped, never answered.
        answer = rng.choice([{"result": {}}, {"error": {"code": 1, "message": "no"}}])
        return {"jsonrpc": "2.0", "id": f"resp-{self.serial}", **answer}, None

    def add(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:  # a batch
            items = [self.item() for _ in range(rng.randrange(1, 6))]
            self.lines.append(json.dumps([value for value, _ in items]).encode())
            self.expected.update(due for _, due in items if due is not None)
        elif roll < 0.12:
            self.lines.append(b"[]")  # an empty batch: one invalid request, id null
            self.expected[key(None)] += 1
        elif roll < 0.16:
            broken = rng.choice(
                [
                    b"{not json",
                    b'{"jsonrpc": "2.0", "method": "session/list", "id": 5',
                    b'{"jsonrpc": "2.0", "method": "session/list", "id": 1e400}',
                    b'{"jsonrpc": "2.0", "method": "session/list", "id": NaN}',
                    b"\xff\xfe",
                ]
            )
            self.lines.append(broken)  # no id can be read: answered with null
            self.expected[key(None)] += 1
        else:
            value, due = self.item()
            self.lines.append(json.dumps(value).encode())
            if due is not None:
                self.expected[due] += 1


def answers_in(lines: list[bytes]) -> Counter[str]:
    """key(id) of every answer the sidecar wrote (batch answers counted one by one)."""
    got: Counter[str] = Counter()
    for line in lines:
        message = strict_json(line)
        for answer in message if isinstance(message, list) else [message]:
            assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", line
            if "method" in answer:
                continue  # a notification or a request of the sidecar's
            assert ("result" in answer) != ("error" in answer), answer
            assert "id" in answer, answer
            got[key(answer["id"])] += 1
    return got


async def test_every_readable_id_gets_exactly_one_answer_per_request(data_dir: Path):
    plan = Plan(SEED)
    while len(plan.lines) < MESSAGES:
        plan.add()
    client = await RawClient.start(data_dir)
    try:
        base = answers_in(client.lines)  # initialize's answer
        for start in range(0, len(plan.lines), PER_WRITE):
            chunk = plan.lines[start : start + PER_WRITE]
            await client.write(b"\n".join(chunk) + b"\n")

        def all_answered() -> bool:
            got = answers_in(client.lines) - base
            return all(got[k] >= due for k, due in plan.expected.items())

        assert await eventually(all_answered, timeout=60), client.stderr_tail()
        # Still up and answering.
        await client.write(frame("session/list", {}, "alive?"))
        assert (await client.reply("alive?"))["result"] == {"sessions": []}
    finally:
        code = await client.close()
    assert code == 0, client.stderr_tail()
    assert client.not_strict == []
    got = answers_in(client.lines) - base
    got[key("alive?")] -= 1
    got = +got  # drop zero counts
    missing = {k: due - got[k] for k, due in plan.expected.items() if got[k] < due}
    extra = {k: n - plan.expected[k] for k, n in got.items() if n > plan.expected[k]}
    assert not missing and not extra, (missing, extra)
    assert plan.expected[key(None)] > 100 and len(plan.expected) > 500  # the mix was rich


# ---- the direct path and jsonrpcserver agree wherever jsonrpcserver answers by id --------


class Lines:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, line: bytes) -> None:
        self.sent.extend(json.loads(part) for part in line.splitlines())


async def test_valid_requests_are_answered_exactly_as_jsonrpcserver_answers_them() -> None:
    """jsonrpcserver, the dispatcher of record before ours, is the reference: its whole
    pipeline and ours answer every kind of valid request alike (unknown methods and
    positional params included), alone and in batches."""
    from jsonrpcserver import Error, Success, async_dispatch

    from sidecar.acp.server import NO_DATA, RpcServer, call_handler
    from sidecar.domain.errors import SessionNotFound

    def wrap(handler: Any) -> Any:
        """`handler(params)` as a jsonrpcserver method, its errors mapped as ours are."""

        async def method(_context: object, **params: Any) -> Any:
            result, error = await call_handler(handler, params)
            if error is None:
                return Success(result)
            code, message, data = error
            return Error(code, message) if data is NO_DATA else Error(code, message, data)

        return method

    async def ok(params: dict[str, Any]) -> Any:
        return {"got": params}

    async def refuses(params: dict[str, Any]) -> Any:
        raise SessionNotFound("sess_x")

    async def breaks(params: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    handlers = {"ok": ok, "refuses": refuses, "breaks": breaks}
    writer = Lines()
    server = RpcServer(writer)  # type: ignore[arg-type]
    for name, handler in handlers.items():
        server.register(name, handler)
    methods = {name: wrap(handler) for name, handler in handlers.items()}
    requests: list[Any] = [
        {"jsonrpc": "2.0", "id": 1, "method": "ok", "params": {"a": 1}},
        {"jsonrpc": "2.0", "id": "s", "method": "ok"},
        {"jsonrpc": "2.0", "id": 2**70, "method": "refuses", "params": {}},
        {"jsonrpc": "2.0", "id": 3.5, "method": "breaks", "params": {}},
        {"jsonrpc": "2.0", "id": None, "method": "ok", "params": {}},
        {"jsonrpc": "2.0", "id": 4, "method": "nope"},
        {"jsonrpc": "2.0", "id": 5, "method": "ok", "params": [1]},
        {"jsonrpc": "2.0", "id": 6, "method": "ok", "params": []},
        {"jsonrpc": "2.0", "method": "ok", "params": {}},  # notifications: no answer
        {"jsonrpc": "2.0", "method": "nope"},
    ]
    for request in requests:
        for text in (json.dumps(request), json.dumps([request, request])):
            writer.sent.clear()
            await server._handle(text.encode())
            theirs = await async_dispatch(text, methods=methods, context=server)
            assert writer.sent == ([json.loads(theirs)] if theirs else []), text
