"""Loopback fake model servers for real third-party agents, run inside a network namespace.

An agent under test reaches only loopback, so its model is one of these: the Anthropic
Messages API (claude-agent-acp; the project's FakeAnthropicServer, extended) or the
OpenAI Responses API (codex-acp). Each logs every HTTP request (method, path, headers,
body), answers the other calls an agent makes (found by logging: claude's `HEAD /`;
codex makes none), records any path it does not know, and logs every DNS query the
namespace's resolver sends to 127.0.0.1:53 (a lookup of any host is an attempt to leave
loopback, which a test asserts never happens).

The server runs as its own process (the one that owns the namespace, tests/agents/netns.py)
and is controlled from outside over a Unix socket, which crosses network namespaces::

    python tests/agents/model_servers.py anthropic|responses --control SOCK
    GET  /info      -> {"port": N, "kind": ...}
    POST /script    body: a list of replies -> {"queued": n}
    GET  /calls     -> {"calls": [{method, path, query, headers, body, known}], "dns": [...]}

Replies (the Anthropic ones are fake_anthropic_server's; Responses ones are below)::

    {"type": "text", "text": "Done."}
    {"type": "apply_patch", "input": "*** Begin Patch\\n...\\n*** End Patch\\n"}
    {"type": "function_call", "name": "exec_command", "arguments": {"cmd": "ls"}}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
from aiohttp import web

if str(Path(__file__).parents[1]) not in sys.path:  # run as a script: reach tests/
    sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_anthropic_server import FakeAnthropicServer  # noqa: E402

Reply = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SKIPPED_HEADERS = {"authorization", "x-api-key"}  # the fake keys are not worth keeping


@dataclass
class Call:
    """One HTTP request as the agent sent it; `known` is False for a path we do not serve."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    known: bool = True


class CallLog:
    """Every request and DNS query the namespace's agents sent."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.dns: list[str] = []

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        raw = await request.read()  # cached: the handler can read it again
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in SKIPPED_HEADERS}
        call = Call(request.method, request.path, request.query_string, headers, body)
        self.calls.append(call)
        call.known = request.match_info.route.name != "unknown"
        return await handler(request)


def unknown_route(app: web.Application) -> None:
    """Last route: any other path is recorded (known=False) and answered 404."""

    async def not_found(request: web.Request) -> web.Response:
        return web.json_response({"error": f"not served: {request.path}"}, status=404)

    app.router.add_route("*", "/{tail:.*}", not_found, name="unknown")


# -- Anthropic Messages (claude-agent-acp) --------------------------------------------------


class AnthropicModelServer(FakeAnthropicServer):
    """FakeAnthropicServer (its checks of every request, its SSE) behind the request log,
    plus the one other call claude-agent-acp 0.23.1 makes: `HEAD /` before a session."""

    kind = "anthropic"

    def __init__(self, log: CallLog) -> None:
        super().__init__()
        self.log = log

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.log.middleware])
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_route("HEAD", "/", self._reachable)  # claude's connectivity check
        unknown_route(app)
        return app

    async def start(self) -> AnthropicModelServer:
        self._runner = web.AppRunner(
            self.app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def _reachable(self, request: web.Request) -> web.Response:
        return web.Response()


# -- OpenAI Responses (codex-acp) --------------------------------------------------------


class ResponsesModelServer:
    """POST /v1/responses streamed as the Responses API does (every event numbered)."""

    kind = "responses"

    def __init__(self, log: CallLog) -> None:
        self.log = log
        self.queue: list[Reply] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    def script(self, *replies: Reply) -> None:
        for r in replies:
            if r.get("type") not in ("text", "apply_patch", "function_call"):
                raise ValueError(f"a Responses reply is text, apply_patch or function_call: {r!r}")
        self.queue.extend(replies)

    async def start(self) -> ResponsesModelServer:
        app = web.Application(middlewares=[self.log.middleware])
        app.router.add_post("/v1/responses", self._responses)
        unknown_route(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        reply = self.queue.pop(0) if self.queue else {"type": "text", "text": "Nothing scripted."}
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for n, event in enumerate(responses_events(body.get("model", ""), reply)):
            event["sequence_number"] = n
            data = json.dumps(event)
            await resp.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
        await resp.write_eof()
        return resp


def responses_events(model: str, reply: Reply) -> list[dict[str, Any]]:
    """The events of one streamed response holding a message or one tool call."""
    rid, item_id = f"resp_{uuid.uuid4().hex}", f"item_{uuid.uuid4().hex[:16]}"
    base = {"id": rid, "object": "response", "model": model, "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**base, "status": "in_progress"}},
        {"type": "response.in_progress", "response": {**base, "status": "in_progress"}},
    ]
    at = {"output_index": 0, "item_id": item_id}
    item: dict[str, Any]
    if reply["type"] == "apply_patch":
        text = reply["input"]
        item = {"type": "custom_tool_call", "id": item_id, "status": "completed"}
        item |= {"call_id": f"call_{uuid.uuid4().hex[:16]}", "name": "apply_patch"}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "input": ""},
            },
            {"type": "response.custom_tool_call_input.delta", **at, "delta": text},
            {"type": "response.custom_tool_call_input.done", **at, "input": text},
        ]
        item["input"] = text
    elif reply["type"] == "function_call":
        args = json.dumps(reply.get("arguments", {}))
        item = {"type": "function_call", "id": item_id, "status": "completed"}
        item |= {"call_id": f"call_{uuid.uuid4().hex[:16]}", "name": reply["name"]}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "arguments": ""},
            },
            {"type": "response.function_call_arguments.delta", **at, "delta": args},
            {"type": "response.function_call_arguments.done", **at, "arguments": args},
        ]
        item["arguments"] = args
    else:
        text = reply["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress"}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            },
            {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
            {"type": "response.output_text.delta", **at, "content_index": 0, "delta": text},
            {"type": "response.output_text.done", **at, "content_index": 0, "text": text},
        ]
        part = {**part, "text": text}
        events.append(
            {"type": "response.content_part.done", **at, "content_index": 0, "part": part}
        )
        item |= {"status": "completed", "content": [part]}
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    done = {**base, "status": "completed", "output": [item], "usage": usage}
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]
    return events


# -- DNS: every lookup is recorded and answered NXDOMAIN -------------------------------------


class DnsLogger(asyncio.DatagramProtocol):
    """Answers queries on 127.0.0.1:53 NXDOMAIN at once, keeping each name asked for."""

    def __init__(self, log: CallLog) -> None:
        self.log = log
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # 3.11's selector transport is not a DatagramTransport subclass, though it is one.
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        if len(data) < 12 or self.transport is None:
            return
        labels, i = [], 12
        while i < len(data) and data[i]:
            labels.append(data[i + 1 : i + 1 + data[i]].decode("ascii", "replace"))
            i += 1 + data[i]
        self.log.dns.append(".".join(labels))
        flags = 0x8000 | (data[2] << 8 & 0x0100) | 0x0080 | 3  # QR, RD copied, RA, NXDOMAIN
        header = data[:2] + flags.to_bytes(2, "big") + data[4:6] + bytes(6)
        self.transport.sendto(header + data[12 : i + 5], addr)


# -- the process: model server + DNS logger + control socket ----------------------------------


async def serve(kind: str, control: Path) -> None:
    log = CallLog()
    model: AnthropicModelServer | ResponsesModelServer = (
        AnthropicModelServer(log) if kind == "anthropic" else ResponsesModelServer(log)
    )
    await model.start()
    loop = asyncio.get_running_loop()
    dns, _ = await loop.create_datagram_endpoint(lambda: DnsLogger(log), ("127.0.0.1", 53))

    async def info(request: web.Request) -> web.Response:
        return web.json_response({"port": model.port, "kind": kind})

    async def script(request: web.Request) -> web.Response:
        try:
            model.script(*await request.json())
        except ValueError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"queued": len(model.queue)})

    async def calls(request: web.Request) -> web.Response:
        return web.json_response({"calls": [asdict(c) for c in log.calls], "dns": log.dns})

    app = web.Application()
    app.router.add_get("/info", info)
    app.router.add_post("/script", script)
    app.router.add_get("/calls", calls)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tmp = control.with_suffix(".tmp")
    await web.UnixSite(runner, str(tmp)).start()
    tmp.rename(control)  # appears only once it answers
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        dns.close()
        await runner.cleanup()
        await model.stop()


class ServerControl:
    """The test's side of the control socket (from outside the namespace)."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        connector = aiohttp.UnixConnector(path=str(self.socket_path))
        async with aiohttp.ClientSession(connector=connector) as http:
            async with http.request(method, f"http://control{path}", json=body) as resp:
                data = await resp.json()
                if resp.status != 200:
                    raise RuntimeError(f"control {path}: {resp.status} {data}")
                return data

    async def base_url(self) -> str:
        """The loopback root inside the namespace (no /v1)."""
        return f"http://127.0.0.1:{(await self._request('GET', '/info'))['port']}"

    async def script(self, *replies: Reply) -> None:
        await self._request("POST", "/script", list(replies))

    async def calls(self) -> list[dict[str, Any]]:
        return list((await self._request("GET", "/calls"))["calls"])

    async def dns(self) -> list[str]:
        return list((await self._request("GET", "/calls"))["dns"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["anthropic", "responses"])
    parser.add_argument("--control", required=True, type=Path, help="Unix socket to create")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.kind, args.control))
