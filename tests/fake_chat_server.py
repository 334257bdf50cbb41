"""A real loopback fake of the OpenAI Chat Completions API, scriptable from tests.

Real sockets, so the provider is tested through the genuine SDK and HTTP stack.

In-process (inside the test's event loop)::

    async with FakeChatServer() as server:
        server.script({"type": "text", "text": "hello there"})
        provider = OpenAIProvider("m", base_url=server.base_url)
        ...
        server.requests[0].body["messages"]; await server.wait_abandoned()

Standalone (end-to-end tests that run the sidecar as a subprocess)::

    python tests/fake_chat_server.py --port-file PATH [--script replies.json] [--port N]
    POST /_script    body: one reply object or a list of them -> {"queued": <queue length>}
    GET  /_requests  -> {"requests": [{"body": {...}, "abandoned": bool, "completed": bool}]}
    POST /_reset     empties the queue and the records -> {"ok": true}
    GET  /v1/models  the `models` given (`--models a,b`); without any, 404 as before

Reply objects ("type" is required; any reply may add "delay": seconds to wait before
answering, "chunk_delay": seconds between streamed chunks, "finish_reason": override, and
"argument_chunk": characters of a tool call's arguments per streamed delta (7 unless
given), "reasoning": text streamed word by word (or a list of pieces, each one delta) as
`reasoning_content` deltas before the rest, as OpenAI-compatible reasoning servers
(DeepSeek, vLLM) do)::

    {"type": "text", "text": "Hello world"}                  # streamed word by word
    {"type": "text", "chunks": ["Hel", "lo"]}                # explicit chunks
    {"type": "tool_call", "name": "read_file", "arguments": {"path": "a"} | "<json text>",
     "id": "call_1", "text": "optional text before the call"}
    {"type": "tool_call", "calls": [{"name": ..., "arguments": ..., "id": ...}, ...]}
    {"type": "error", "status": 500, "message": "boom", "error_type": "server_error", "code": null}
    {"type": "malformed"}                                    # a data line that is not JSON

With an empty queue the server answers "echo: <last user message>".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

Reply = dict[str, Any]
REPLY_TYPES = {"text", "tool_call", "error", "malformed"}


@dataclass
class RecordedRequest:
    body: dict[str, Any]
    abandoned: bool = False  # the client closed the connection before the reply finished
    completed: bool = False


def _check(reply: Any) -> Reply:
    if not isinstance(reply, dict) or reply.get("type") not in REPLY_TYPES:
        raise ValueError(f"a scripted reply needs a 'type' in {sorted(REPLY_TYPES)}: {reply!r}")
    return reply


def _calls(reply: Reply) -> list[dict[str, str]]:
    """Normalised tool calls: id, name and arguments as JSON text."""
    if reply["type"] != "tool_call":
        return []
    return [
        {
            "id": c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            "name": c["name"],
            "arguments": a if isinstance(a := c.get("arguments", {}), str) else json.dumps(a),
        }
        for c in reply.get("calls") or [reply]
    ]


def _echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {"type": "text", "text": f"echo: {content}"}


class FakeChatServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        replies: Iterable[Reply] = (),
        models: Iterable[str] = (),
    ) -> None:
        self.host, self.port = host, port
        self.models = list(models)  # served by GET /v1/models when not empty
        self.queue: list[Reply] = [_check(r) for r in replies]
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._closing = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order; all or none (a bad one raises ValueError)."""
        self.queue.extend([_check(r) for r in replies])

    async def start(self) -> FakeChatServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/_script", self._push_script)
        app.router.add_get("/_requests", self._list_requests)
        app.router.add_post("/_reset", self._reset)
        if self.models:
            app.router.add_get("/v1/models", self._list_models)
        # handler_cancellation: a client disconnect cancels the handler, which records it.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self._closing = True
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeChatServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_abandoned(self, timeout: float = 5.0) -> RecordedRequest:
        """The first abandoned request; disconnects are noticed asynchronously, so poll."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for rec in self.requests:
                if rec.abandoned:
                    return rec
            await asyncio.sleep(0.01)
        raise TimeoutError("no request was abandoned")

    async def _list_models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    # -- Chat Completions -------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        rec = RecordedRequest(body=body)
        self.requests.append(rec)
        reply = self.queue.pop(0) if self.queue else _echo(body)
        try:
            await asyncio.sleep(float(reply.get("delay", 0)))
            if reply["type"] == "error":
                resp: web.StreamResponse = _error(
                    int(reply.get("status", 500)),
                    reply.get("message", "fake error"),
                    reply.get("error_type", "server_error"),
                    reply.get("code"),
                )
            elif body.get("stream"):
                resp = await self._stream(request, body, reply)
            else:
                resp = self._complete(body, reply)
        except asyncio.CancelledError:
            rec.abandoned = not self._closing
            raise
        except ConnectionResetError:  # a write hit the closed connection
            rec.abandoned = True
            return web.Response()
        rec.completed = True
        return resp

    def _deltas(self, reply: Reply) -> list[tuple[dict[str, Any], str | None]]:
        text, calls = reply.get("text", ""), _calls(reply)
        out: list[tuple[dict[str, Any], str | None]] = [
            ({"role": "assistant", "content": ""}, None)
        ]
        reasoning = reply.get("reasoning") or []
        if isinstance(reasoning, str):
            reasoning = re.findall(r"\s*\S+\s*", reasoning)
        for piece in reasoning:
            out.append(({"reasoning_content": piece}, None))
        for piece in reply.get("chunks") or re.findall(r"\s*\S+\s*", text) or []:
            out.append(({"content": piece}, None))
        for i, c in enumerate(calls):  # as OpenAI does: id + name first, then argument pieces
            head = _call_json({**c, "arguments": ""}, index=i)
            out.append(({"tool_calls": [head]}, None))
            step = int(reply.get("argument_chunk") or 7)
            for k in range(0, len(c["arguments"]), step):
                frag = c["arguments"][k : k + step]
                out.append(({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}, None))
        out.append(({}, reply.get("finish_reason") or ("tool_calls" if calls else "stop")))
        return out

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        base = _envelope(body, "chat.completion.chunk")
        choices = [
            [{"index": 0, "delta": d, "logprobs": None, "finish_reason": f}]
            for d, f in self._deltas(reply)
        ]
        events = [json.dumps({**base, "choices": c}) for c in choices]
        if reply["type"] == "malformed":
            events = events[:1] + ["{this is not json"]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(json.dumps({**base, "choices": [], "usage": _usage(body, reply)}))
        for i, event in enumerate([*events, "[DONE]"]):
            if i and reply.get("chunk_delay"):
                await asyncio.sleep(float(reply["chunk_delay"]))
            await resp.write(f"data: {event}\n\n".encode())
        await resp.write_eof()
        return resp

    def _complete(self, body: dict[str, Any], reply: Reply) -> web.Response:
        if reply["type"] == "malformed":
            return web.Response(text="{this is not json", content_type="application/json")
        text, calls = reply.get("text") or "".join(reply.get("chunks") or []), _calls(reply)
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if calls:
            message["tool_calls"] = [_call_json(c) for c in calls]
        finish = reply.get("finish_reason") or ("tool_calls" if calls else "stop")
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        envelope = _envelope(body, "chat.completion")
        return web.json_response({**envelope, "choices": [choice], "usage": _usage(body, reply)})

    # -- control API ------------------------------------------------------------------

    async def _push_script(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
            self.script(*(data if isinstance(data, list) else [data]))
        except ValueError as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({"queued": len(self.queue)})

    async def _list_requests(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": [asdict(r) for r in self.requests]})

    async def _reset(self, request: web.Request) -> web.Response:
        self.queue.clear()
        self.requests.clear()
        return web.json_response({"ok": True})


def _error(
    status: int, message: str, type_: str = "invalid_request_error", code: Any = None
) -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _call_json(call: dict[str, str], **extra: Any) -> dict[str, Any]:
    fn = {"name": call["name"], "arguments": call["arguments"]}
    return {**extra, "id": call["id"], "type": "function", "function": fn}


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": kind,
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "fp_fake",
    }


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    done = len(reply.get("text", "")) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


async def _serve(port: int, port_file: str, replies: list[Reply], models: list[str]) -> None:
    server = await FakeChatServer(port=port, replies=replies, models=models).start()
    tmp = Path(f"{port_file}.tmp")
    await asyncio.to_thread(tmp.write_text, str(server.port), encoding="utf-8")
    os.replace(tmp, port_file)  # atomic: a poller never reads a half-written port
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, ValueError):  # Windows
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Fake OpenAI Chat Completions server")
    parser.add_argument("--port-file", required=True, help="write the bound port here")
    parser.add_argument("--script", help="JSON file: a reply object or a list of them")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--models", default="", help="comma-separated: GET /v1/models lists them")
    args = parser.parse_args()
    script = json.loads(Path(args.script).read_text(encoding="utf-8")) if args.script else []
    script = script if isinstance(script, list) else [script]
    with contextlib.suppress(KeyboardInterrupt):
        models = [m for m in args.models.split(",") if m]
        asyncio.run(_serve(args.port, args.port_file, script, models))
