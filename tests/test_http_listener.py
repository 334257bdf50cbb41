"""The per-session listener over real loopback sockets, against a small fake runtime."""

from __future__ import annotations

import asyncio
import errno
import io
import json
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from protocol.models import SessionSummary
from protocol.values import Backend, Mode, Status, StopReason
from sidecar.agent.outcome import TurnOutcome
from sidecar.core.events import EventStream
from sidecar.core.views import SessionView, TerminalSize
from sidecar.domain.errors import InvalidState, ProviderError, ResourceExhausted, SessionBusy
from sidecar.domain.events import AgentTextChunk, StateChanged
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import Entry, UserEntry
from sidecar.http.listener import Listener, start_listener
from sidecar.wire.summary import summary

TOKEN = "t0k3n-for-tests-only"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OPENAPI = Path(__file__).resolve().parent.parent / "protocol" / "openapi.json"


def make_record(status: Status = Status.IDLE, count: int = 250, **extra: Any) -> SessionRecord:
    return SessionRecord(
        session_id="sess-1",
        cwd="/tmp/work",
        title="Test",
        mode=Mode.CRAFT,
        backend=Backend.PIPE,
        status=status,
        generation=1,
        created_at=1704067200.0,
        updated_at=1704067200.0,
        message_count=count,
        **extra,
    )


class FakeTarget:
    """Stands in for a `SessionEndpoint`. `send` blocks on `release` while `block` is set,
    which is how a running turn is simulated; `abort` releases it."""

    def __init__(self) -> None:
        self.session_id = "sess-1"
        self.generation = 1
        self.events = EventStream("sess-1", capacity=64)
        self.block = False
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.running = False
        self.aborted = False
        self.fail: Exception | None = None
        self.messages_error: Exception | None = None
        self.transcript: list[Entry] = [UserEntry(f"m{i}", "t") for i in range(250)]
        self.url = "http://127.0.0.1:0"

    def view_of(self, record: SessionRecord) -> SessionView:
        return SessionView(record, True, self.url, TOKEN, None)

    async def view(self) -> SessionView:
        status = Status.RUNNING if self.running else Status.IDLE
        return self.view_of(make_record(status, len(self.transcript)))

    def summary(self) -> dict[str, Any]:
        status = Status.RUNNING if self.running else Status.IDLE
        return summary(self.view_of(make_record(status)))

    def start_send(self, message: str) -> asyncio.Task[TurnOutcome]:
        if self.fail is not None:
            raise self.fail
        if self.running:
            raise SessionBusy(self.session_id)
        self.running = True  # taken at once, as the real turn lock is
        self.started.set()
        return asyncio.ensure_future(self._turn(message))

    async def _turn(self, message: str) -> TurnOutcome:
        try:
            if self.block:
                await self.release.wait()
        finally:
            self.running = False
        stop = StopReason.CANCELLED if self.aborted else StopReason.END_TURN
        return TurnOutcome(f"echo: {message}", stop)

    async def abort(self) -> bool:
        if not self.running:
            return False
        self.aborted = True
        self.release.set()
        return True

    async def messages(self, offset: int, limit: int) -> tuple[list[tuple[int, Entry]], int]:
        if self.messages_error is not None:
            raise self.messages_error
        page = self.transcript[offset : offset + limit]
        return list(enumerate(page, start=offset)), len(self.transcript)

    async def resize(self, rows: int, cols: int) -> TerminalSize:
        return TerminalSize(rows, cols)


@pytest.fixture
def target() -> FakeTarget:
    return FakeTarget()


@pytest.fixture
async def listener(target: FakeTarget) -> AsyncIterator[Listener]:
    started = await start_listener(target, TOKEN)
    assert started is not None
    target.url = started.url
    yield started
    await started.stop()
    target.release.set()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send hand-written bytes; return status and body (the server closes the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
    await writer.drain()
    data = await reader.read()
    writer.close()
    header, _, payload = data.partition(b"\r\n\r\n")
    return int(header.split()[1]), payload


async def read_event(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """One SSE frame as {"id", "event", "data"}, skipping comment lines."""
    frame: dict[str, Any] = {}
    while True:
        line = (await asyncio.wait_for(response.content.readline(), 5)).decode()
        assert line, "stream ended"
        line = line.rstrip("\n")
        if line == "" and frame:
            return frame
        if line.startswith(":") or not line:
            continue
        key, _, value = line.partition(": ")
        frame[key] = int(value) if key == "id" else json.loads(value) if key == "data" else value


# -- security -------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
)
async def test_missing_or_wrong_token_is_401(
    listener: Listener, http: aiohttp.ClientSession, headers: dict[str, str]
) -> None:
    async with http.get(f"{listener.url}/agent/status", headers=headers) as resp:
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"] == "Bearer"
        body = await resp.json()
        assert "token" in body["error"] or "Authorization" in body["error"]
        assert TOKEN not in json.dumps(body)


async def test_auth_comes_before_routing(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{listener.url}/nope") as resp:
        assert resp.status == 401


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1:{other}", "127.0.0.1", "x"])
async def test_foreign_host_is_403(
    listener: Listener, http: aiohttp.ClientSession, host: str
) -> None:
    headers = {**AUTH, "Host": host.format(port=listener.port, other=listener.port + 1)}
    async with http.get(f"{listener.url}/agent/status", headers=headers) as resp:
        assert resp.status == 403
        assert "Host" in (await resp.json())["error"]


async def test_localhost_host_is_accepted(listener: Listener, http: aiohttp.ClientSession) -> None:
    headers = {**AUTH, "Host": f"localhost:{listener.port}"}
    async with http.get(f"{listener.url}/agent/status", headers=headers) as resp:
        assert resp.status == 200


async def test_missing_host_is_refused(listener: Listener) -> None:
    # HTTP/1.0 may omit Host; our guard refuses it.
    head = f"GET /agent/status HTTP/1.0\nAuthorization: Bearer {TOKEN}\n"
    status, body = await raw_request(listener.port, head)
    assert status == 403
    assert "Host" in json.loads(body)["error"]
    # HTTP/1.1 without Host never becomes a request: aiohttp's parser answers 400
    # (plain text, before any handler runs) and closes the connection.
    status, _ = await raw_request(listener.port, head.replace("1.0", "1.1"))
    assert status == 400


async def test_duplicate_host_is_refused(listener: Listener) -> None:
    port = listener.port
    head = (
        f"GET /agent/status HTTP/1.0\nHost: 127.0.0.1:{port}\nHost: evil.example:{port}\n"
        f"Authorization: Bearer {TOKEN}\n"
    )
    status, _ = await raw_request(port, head)
    assert status == 400  # aiohttp refuses a second Host; the guard would too


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1"])
async def test_any_origin_is_403(
    listener: Listener, http: aiohttp.ClientSession, origin: str
) -> None:
    async with http.get(f"{listener.url}/agent/status", headers={**AUTH, "Origin": origin}) as resp:
        assert resp.status == 403
        assert "Origin" in (await resp.json())["error"]


async def test_host_check_comes_before_auth(
    listener: Listener, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{listener.url}/agent/status", headers={"Host": "evil.example"}) as resp:
        assert resp.status == 403


async def test_token_is_never_logged(
    listener: Listener, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for headers in (AUTH, {"Authorization": f"Bearer {TOKEN}x"}):
        async with http.get(f"{listener.url}/agent/status", headers=headers):
            pass
    assert TOKEN not in caplog.text


# -- body limits ------------------------------------------------------------------


async def test_body_over_limit_by_content_length_is_413(
    listener: Listener, http: aiohttp.ClientSession
) -> None:
    body = io.BytesIO(b'{"message": "' + b"x" * (1024 * 1024) + b'"}')
    async with http.post(f"{listener.url}/agent/send", data=body, headers=AUTH) as resp:
        assert int(resp.request_info.headers["Content-Length"]) > 1024 * 1024
        assert resp.status == 413
        assert "1048576" in (await resp.json())["error"]


async def test_content_length_is_checked_before_reading(listener: Listener) -> None:
    # Only the headers are sent: the answer must not wait for a body.
    head = (
        f"POST /agent/send HTTP/1.1\nHost: 127.0.0.1:{listener.port}\n"
        f"Authorization: Bearer {TOKEN}\nContent-Length: {1024 * 1024 + 1}\n"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    writer.write(head.replace("\n", "\r\n").encode() + b"\r\n")
    status_line = await asyncio.wait_for(reader.readline(), 2)
    writer.close()
    assert status_line.split()[1] == b"413"


async def test_chunked_body_over_limit_is_413(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"message": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    async with http.post(f"{listener.url}/agent/send", data=chunks(), headers=AUTH) as resp:
        assert resp.request_info.headers.get("Transfer-Encoding") == "chunked"
        assert resp.status == 413
        assert "too large" in (await resp.json())["error"]
    assert not target.started.is_set()


async def test_body_at_limit_is_accepted(target: FakeTarget, http: aiohttp.ClientSession) -> None:
    body = b'{"message": "' + b"x" * 85 + b'"}'
    assert len(body) == 100
    small = await start_listener(target, TOKEN, max_body=100)
    assert small is not None
    try:
        async with http.post(f"{small.url}/agent/send", data=body, headers=AUTH) as resp:
            assert resp.status == 200
        async with http.post(f"{small.url}/agent/send", data=body + b" ", headers=AUTH) as resp:
            assert resp.status == 413
    finally:
        await small.stop()


# -- send ------------------------------------------------------------------------


async def test_send_runs_a_turn(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.post(
        f"{listener.url}/agent/send", json={"message": "hi"}, headers=AUTH
    ) as resp:
        assert resp.status == 200
        assert await resp.json() == {"response": "echo: hi", "stopReason": "end_turn"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"\xff\xfe", "body"),
        (b"[1, 2]", "body"),
        (b'"hi"', "body"),
        (b"{}", "message"),
        (b'{"message": ""}', "message"),
        (b'{"message": "  \\n\\t "}', "message"),
        (b'{"message": 42}', "message"),
        (b'{"message": null}', "message"),
    ],
)
async def test_bad_send_body_is_400(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget, body: bytes, field: str
) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    async with http.post(f"{listener.url}/agent/send", data=body, headers=headers) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"].startswith(f"{field}:")
    assert not target.started.is_set()


async def test_send_while_a_turn_runs_is_409_and_abort_releases_it(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget
) -> None:
    target.block = True
    url = f"{listener.url}/agent/send"
    first = asyncio.ensure_future(http.post(url, json={"message": "one"}, headers=AUTH))
    await asyncio.wait_for(target.started.wait(), 5)
    async with http.post(url, json={"message": "two"}, headers=AUTH) as resp:
        assert resp.status == 409
        assert "busy" in (await resp.json())["error"]
    async with http.post(f"{listener.url}/agent/abort", headers=AUTH) as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "abort_requested", "running": True}
    async with await asyncio.wait_for(first, 5) as resp:
        assert resp.status == 200
        assert (await resp.json())["stopReason"] == "cancelled"


async def test_abort_without_a_turn(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.post(f"{listener.url}/agent/abort", headers=AUTH) as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "abort_requested", "running": False}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ProviderError("provider returned 500"), 502),
        (InvalidState("session sess-1 is closing"), 409),
        (SessionBusy("sess-1"), 409),
    ],
)
async def test_send_errors_map_to_statuses(
    listener: Listener,
    http: aiohttp.ClientSession,
    target: FakeTarget,
    error: Exception,
    status: int,
) -> None:
    target.fail = error
    async with http.post(
        f"{listener.url}/agent/send", json={"message": "hi"}, headers=AUTH
    ) as resp:
        assert resp.status == status
        assert await resp.json() == {"error": str(error)}


async def test_unexpected_error_is_opaque_500(
    listener: Listener,
    http: aiohttp.ClientSession,
    target: FakeTarget,
    caplog: pytest.LogCaptureFixture,
) -> None:
    target.messages_error = RuntimeError("secret internals at /home/x")
    async with http.get(f"{listener.url}/agent/messages", headers=AUTH) as resp:
        assert resp.status == 500
        assert await resp.json() == {"error": "internal error"}
    assert "secret internals" in caplog.text  # logged for us, not sent to the client


# -- routing ----------------------------------------------------------------------


async def test_unknown_path_is_json_404(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{listener.url}/agent/nope", headers=AUTH) as resp:
        assert resp.status == 404
        assert resp.content_type == "application/json"
        assert (await resp.json())["error"] == "no such endpoint: GET /agent/nope"


async def test_wrong_method_is_json_405(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{listener.url}/agent/send", headers=AUTH) as resp:
        assert resp.status == 405
        assert resp.headers["Allow"] == "POST"
        assert "not allowed" in (await resp.json())["error"]


async def test_status_has_no_token(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{listener.url}/agent/status", headers=AUTH) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["sessionId"] == "sess-1"
    assert body["http"] == {"url": listener.url}
    assert TOKEN not in json.dumps(body)


async def test_messages_paging(listener: Listener, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{listener.url}/agent/messages", headers=AUTH) as resp:
        body = await resp.json()
    assert body["total"] == 250
    assert [m["text"] for m in body["messages"]] == [f"m{i}" for i in range(100)]
    url = f"{listener.url}/agent/messages?offset=200&limit=1000"
    async with http.get(url, headers=AUTH) as resp:
        body = await resp.json()
    assert [m["text"] for m in body["messages"]] == [f"m{i}" for i in range(200, 250)]
    async with http.get(f"{listener.url}/agent/messages?offset=300", headers=AUTH) as resp:
        assert await resp.json() == {"messages": [], "total": 250}


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("offset=-1", "offset"),
        ("offset=abc", "offset"),
        ("offset=1.5", "offset"),
        ("offset=", "offset"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=99999999999999999999999", "limit"),
    ],
)
async def test_bad_messages_params_are_400(
    listener: Listener, http: aiohttp.ClientSession, query: str, name: str
) -> None:
    async with http.get(f"{listener.url}/agent/messages?{query}", headers=AUTH) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"].startswith(f"{name}:")


# -- server-sent events -------------------------------------------------------------


async def test_events_arrive_live_with_increasing_ids(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget
) -> None:
    target.events.publish(StateChanged(make_record()))  # before connecting: not replayed
    async with http.get(f"{listener.url}/agent/events", headers=AUTH) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        target.events.publish(AgentTextChunk("Hel"))
        target.events.publish(AgentTextChunk("lo\n"))
        first, second = await read_event(resp), await read_event(resp)
    assert first == {"id": 2, "event": "agent_message_chunk", "data": {"text": "Hel"}}
    assert second == {"id": 3, "event": "agent_message_chunk", "data": {"text": "lo\n"}}


@pytest.mark.parametrize("via", ["header", "query"])
async def test_reconnect_replays_exactly_the_missed_events(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget, via: str
) -> None:
    url = f"{listener.url}/agent/events"
    async with http.get(url, headers=AUTH) as resp:
        for n in range(3):
            target.events.publish(StateChanged(make_record(count=n)))
        seen = [await read_event(resp) for _ in range(3)]
    last = seen[-1]["id"]
    target.events.publish(StateChanged(make_record(count=3)))
    target.events.publish(StateChanged(make_record(count=4)))
    if via == "header":
        ctx = http.get(url, headers={**AUTH, "Last-Event-ID": str(last)})
    else:
        ctx = http.get(f"{url}?lastEventId={last}", headers=AUTH)
    async with ctx as resp:
        replayed = [await read_event(resp) for _ in range(2)]
        target.events.publish(StateChanged(make_record(count=5)))
        live = await read_event(resp)
    assert [e["id"] for e in seen] == [1, 2, 3]
    assert [(e["id"], e["data"]["messageCount"]) for e in replayed] == [(4, 3), (5, 4)]
    assert (live["id"], live["data"]["messageCount"]) == (6, 5)


async def test_bad_last_event_id_is_400(listener: Listener, http: aiohttp.ClientSession) -> None:
    headers = {**AUTH, "Last-Event-ID": "-3"}
    async with http.get(f"{listener.url}/agent/events", headers=headers) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"].startswith("Last-Event-ID:")


async def test_closing_the_event_stream_ends_sse(
    listener: Listener, http: aiohttp.ClientSession, target: FakeTarget
) -> None:
    async with http.get(f"{listener.url}/agent/events", headers=AUTH) as resp:
        target.events.end_subscriptions()
        assert await asyncio.wait_for(resp.content.read(), 5) == b""


# -- stop and bind -----------------------------------------------------------------


async def test_stop_ends_sse_frees_port_and_is_idempotent(
    target: FakeTarget, http: aiohttp.ClientSession
) -> None:
    started = await start_listener(target, TOKEN)
    assert started is not None
    async with http.get(f"{started.url}/agent/events", headers=AUTH) as resp:
        await asyncio.wait_for(asyncio.gather(started.stop(), started.stop()), 2)
        assert await asyncio.wait_for(resp.content.read(), 2) == b""
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", started.port)
    await started.stop()


async def test_stop_answers_a_pending_send_and_leaves_the_turn_running(
    target: FakeTarget, http: aiohttp.ClientSession
) -> None:
    started = await start_listener(target, TOKEN)
    assert started is not None
    target.block = True
    pending = asyncio.ensure_future(
        http.post(f"{started.url}/agent/send", json={"message": "x"}, headers=AUTH)
    )
    await asyncio.wait_for(target.started.wait(), 5)
    await asyncio.wait_for(started.stop(), 2)
    async with await asyncio.wait_for(pending, 5) as resp:
        assert resp.status == 503
    assert target.running  # the turn belongs to the session, not the connection
    target.release.set()
    await asyncio.sleep(0.01)
    assert not target.running


@pytest.mark.parametrize(
    "error",
    [PermissionError(errno.EPERM, "denied"), OSError(errno.EADDRNOTAVAIL, "no address")],
)
async def test_bind_not_permitted_returns_none_and_logs(
    target: FakeTarget,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: OSError,
) -> None:
    sockets: list[socket.socket] = []

    def refuse(self: socket.socket, address: Any) -> None:
        sockets.append(self)
        raise error

    monkeypatch.setattr(socket.socket, "bind", refuse)
    with caplog.at_level(logging.WARNING, logger="sidecar.http"):
        assert await start_listener(target, TOKEN) is None
    assert "socket binding unavailable" in caplog.text
    assert [s.fileno() for s in sockets] == [-1]  # closed


async def test_no_file_descriptors_raises_resource_exhausted(
    target: FakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exhausted(self: socket.socket, address: Any) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(socket.socket, "bind", exhausted)
    with pytest.raises(ResourceExhausted, match="file descriptors"):
        await start_listener(target, TOKEN)


async def test_empty_token_is_refused(target: FakeTarget) -> None:
    with pytest.raises(ValueError, match="token"):
        await start_listener(target, "")


# -- the OpenAPI document ------------------------------------------------------------


def _summary_fields() -> set[str]:
    return {field.alias or name for name, field in SessionSummary.model_fields.items()}


async def test_openapi_matches_the_routes(listener: Listener) -> None:
    doc = json.loads(OPENAPI.read_text())
    documented = {(method.upper(), path) for path, item in doc["paths"].items() for method in item}
    served = {
        (route.method, route.resource.canonical)
        for route in listener.app.router.routes()
        if route.resource is not None
    }
    assert len(served) == len(listener.app.router.routes())
    assert documented == served
    for item in doc["paths"].values():
        for operation in item.values():
            assert {"401", "403", "405", "413", "500"} <= set(operation["responses"])
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_openapi_session_summary_matches_the_model() -> None:
    doc = json.loads(OPENAPI.read_text())
    schema = doc["components"]["schemas"]["SessionSummary"]
    assert set(schema["properties"]) == _summary_fields()
    assert set(schema["required"]) == _summary_fields()
    jsonschema = pytest.importorskip("jsonschema")
    example = FakeTarget().summary()
    root = {"$ref": "#/components/schemas/SessionSummary", "components": doc["components"]}
    jsonschema.Draft202012Validator(root).validate(example)


async def test_a_request_the_http_parser_refuses_is_answered_in_json(listener: Listener) -> None:
    """A request line over aiohttp's limit never reaches a route or a middleware: its 400
    is still the listener's JSON error, and the listener serves the next client."""
    port = listener.url.rsplit(":", 1)[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    try:
        line = f"GET /agent/events?lastEventId={'9' * 9000} HTTP/1.1\r\n"
        writer.write(
            f"{line}Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        await writer.drain()
        head, _, body = (await asyncio.wait_for(reader.read(), 10)).partition(b"\r\n\r\n")
    finally:
        writer.close()
    assert head.split(b" ", 2)[1] == b"400"  # HTTP/1.0: the request line was never read
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body) == {"error": "bad request: the request could not be read"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{listener.url}/agent/status", headers=AUTH) as response:
            assert response.status == 200
