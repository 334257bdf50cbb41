"""A real loopback fake of the Anthropic Messages API, scriptable from tests.

Real sockets, so the provider is tested through the genuine SDK and HTTP stack. Every
request is checked against the API's rules first (required fields, roles alternating
from "user", system text only in the top-level `system`, each `tool_use` answered by a
`tool_result` in the next message and each `tool_result` answering one, tool_results
first in their message, no empty text, tools in the Messages shape); a request that
breaks one gets the 400 the real API would send, with a message saying which rule, and
does not consume a scripted reply.

In-process (inside the test's event loop)::

    async with FakeAnthropicServer() as server:
        server.script({"type": "text", "text": "hello there"})
        provider = AnthropicProvider("m", base_url=server.base_url)
        ...
        server.requests[0].body["messages"]; await server.wait_abandoned()

Standalone (end-to-end tests that run the sidecar as a subprocess)::

    python tests/fake_anthropic_server.py --port-file PATH [--script replies.json] [--port N]
    POST /_script    body: one reply object or a list of them -> {"queued": <queue length>}
    GET  /_requests  -> {"requests": [{"body", "headers", "abandoned", "completed", "rejected"}]}
    POST /_reset     empties the queue and the records -> {"ok": true}

The base URL is the server root (`http://127.0.0.1:PORT`): the SDK appends /v1/messages.

Reply objects ("type" is required; any reply may add "delay": seconds to wait before
answering, "chunk_delay": seconds between streamed events, "stop_reason": override,
"truncate": true to end a stream cleanly before message_delta/message_stop, and
"input_in_start": true to stream tool inputs whole in content_block_start, as some
compatible servers do, instead of as input_json_delta fragments)::

    {"type": "text", "text": "Hello world"}                  # streamed word by word
    {"type": "text", "chunks": ["Hel", "lo"]}                # explicit text deltas
    {"type": "tool_use", "name": "bash", "input": {"command": "ls"} | "<json text>",
     "id": "toolu_1", "text": "optional text before the call"}
    {"type": "tool_use", "calls": [{"name": ..., "input": ..., "id": ...}, ...]}
    {"type": "error", "status": 529, "message": "Overloaded", "error_type": "overloaded_error"}
    {"type": "stream_error", "text": "partial", "message": "Overloaded",
     "error_type": "overloaded_error"}                       # 200, text, then an `error` event
    {"type": "malformed"}                                    # a data line that is not JSON

With an empty queue the server answers "echo: <text of the last user message>".
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

Reply = dict[str, Any]
REPLY_TYPES = {"text", "tool_use", "error", "stream_error", "malformed"}

ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
STATUS_ERROR = {status: kind for kind, status in ERROR_STATUS.items()}

# Top-level request parameters the Messages API knows; anything else is a 400.
REQUEST_KEYS = {
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "thinking",
    "service_tier",
    "container",
    "output_config",
    "cache_control",
    "inference_geo",
    "speed",
    "diagnostics",
}
TOOL_KEYS = {
    "name",
    "description",
    "input_schema",
    "type",
    "cache_control",
    "strict",
    "input_examples",
    "defer_loading",
    "allowed_callers",
    "eager_input_streaming",
}
BLOCK_KEYS = {
    "text": {"type", "text", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "title", "context", "citations", "cache_control"},
}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
RECORDED_HEADERS = ("anthropic-version", "x-api-key", "authorization", "content-type")


@dataclass
class RecordedRequest:
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    abandoned: bool = False  # the client closed the connection before the reply finished
    completed: bool = False
    rejected: str | None = None  # the 4xx message when the request broke the API's rules


class Invalid(Exception):
    """A request the real API would refuse: status, error type and message."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _check(reply: Any) -> Reply:
    if not isinstance(reply, dict) or reply.get("type") not in REPLY_TYPES:
        raise ValueError(f"a scripted reply needs a 'type' in {sorted(REPLY_TYPES)}: {reply!r}")
    return reply


def _calls(reply: Reply) -> list[dict[str, str]]:
    """Normalised tool_use blocks: id, name and input as JSON text."""
    if reply["type"] != "tool_use":
        return []
    return [
        {
            "id": c.get("id") or f"toolu_{uuid.uuid4().hex[:24]}",
            "name": c["name"],
            "input": i if isinstance(i := c.get("input", {}), str) else json.dumps(i),
        }
        for c in reply.get("calls") or [reply]
    ]


def _echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, list):
        content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    return {"type": "text", "text": f"echo: {content}"}


# -- the API's rules ---------------------------------------------------------------------


def validate_headers(headers: Any) -> None:
    if not headers.get("x-api-key") and not headers.get("authorization"):
        raise Invalid("x-api-key header is required", 401, "authentication_error")
    if not headers.get("anthropic-version"):
        raise Invalid("anthropic-version: header is required")


def validate(body: dict[str, Any]) -> None:
    """Raise Invalid with the message the real API would give for a malformed request."""
    for key in body:
        if key not in REQUEST_KEYS:
            raise Invalid(f"{key}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise Invalid("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise Invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise Invalid("max_tokens: Input should be greater than or equal to 1")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: Input should be a valid boolean")
    _validate_system(body.get("system"))
    _validate_messages(body.get("messages"))
    _validate_tools(body.get("tools"))


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise Invalid("system: Input should be a valid string or a list of text blocks")
    for k, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise Invalid(f"system.{k}: Input should be a text block")
        if not isinstance(block.get("text"), str) or not block["text"]:
            raise Invalid("system: text content blocks must be non-empty")


def _validate_messages(messages: Any) -> None:
    if messages is None:
        raise Invalid("messages: Field required")
    if not isinstance(messages, list):
        raise Invalid("messages: Input should be a valid list")
    if not messages:
        raise Invalid("messages: at least one message is required")
    for i, message in enumerate(messages):
        _validate_message(i, message, last=i == len(messages) - 1)
    if messages[0]["role"] != "user":
        raise Invalid('messages: first message must use the "user" role')
    for i in range(1, len(messages)):
        if messages[i]["role"] == messages[i - 1]["role"]:
            role = messages[i]["role"]
            raise Invalid(
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
    for i, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {
                b["tool_use_id"]
                for b in (following if isinstance(following, list) else [])
                if b["type"] == "tool_result"
            }
            if missing := [x for x in ids if x not in answered]:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
        else:
            previous = messages[i - 1]["content"] if i > 0 else []
            offered = {
                b["id"]
                for b in (previous if isinstance(previous, list) else [])
                if b["type"] == "tool_use"
            }
            seen_other = False
            for k, b in enumerate(blocks):
                if b["type"] != "tool_result":
                    seen_other = True
                    continue
                if b["tool_use_id"] not in offered:
                    raise Invalid(
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {b['tool_use_id']}. Each `tool_result` block "
                        "must have a corresponding `tool_use` block in the previous message."
                    )
                if seen_other:
                    raise Invalid(
                        f"messages.{i}.content.{k}: `tool_result` blocks must come before "
                        "any other content in a user message."
                    )


def _validate_message(i: int, message: Any, last: bool) -> None:
    where = f"messages.{i}"
    if not isinstance(message, dict):
        raise Invalid(f"{where}: Input should be a valid dictionary")
    role = message.get("role")
    if role == "system":
        raise Invalid(
            f'{where}: Unexpected role "system". The Messages API accepts a top-level '
            '`system` parameter, not "system" as an input message role.'
        )
    if role not in ("user", "assistant"):
        raise Invalid(f"{where}.role: Input should be 'user' or 'assistant'")
    for key in message:
        if key not in ("role", "content"):
            raise Invalid(f"{where}.{key}: Extra inputs are not permitted")
    if "content" not in message:
        raise Invalid(f"{where}.content: Field required")
    content = message["content"]
    empty_ok = last and role == "assistant"
    if isinstance(content, str):
        if not content and not empty_ok:
            raise Invalid(
                f"{where}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        return
    if not isinstance(content, list):
        raise Invalid(f"{where}.content: Input should be a valid string or list")
    if not content and not empty_ok:
        raise Invalid(
            f"{where}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
    ids: set[str] = set()
    for k, block in enumerate(content):
        _validate_block(f"{where}.content.{k}", role, block, ids)


def _validate_block(where: str, role: str, block: Any, ids: set[str]) -> None:
    if not isinstance(block, dict):
        raise Invalid(f"{where}: Input should be a valid dictionary")
    kind = block.get("type")
    if kind not in BLOCK_KEYS:
        raise Invalid(
            f"{where}: Input tag {kind!r} found using 'type' does not match any of the "
            f"expected tags: {', '.join(repr(t) for t in BLOCK_KEYS)}"
        )
    for key in block:
        if key not in BLOCK_KEYS[kind]:
            raise Invalid(f"{where}.{kind}.{key}: Extra inputs are not permitted")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise Invalid(f"{where}.text.text: Field required")
        if not block["text"]:
            raise Invalid("messages: text content blocks must be non-empty")
    elif kind == "tool_use":
        if role != "assistant":
            raise Invalid(f"{where}: `tool_use` blocks can only be in `assistant` messages")
        for key in ("id", "name"):
            if not isinstance(block.get(key), str) or not block[key]:
                raise Invalid(f"{where}.tool_use.{key}: Field required")
        if not isinstance(block.get("input"), dict):
            raise Invalid(f"{where}.tool_use.input: Input should be a valid dictionary")
        if block["id"] in ids:
            raise Invalid(f"{where}: `tool_use` ids must be unique: {block['id']}")
        ids.add(block["id"])
    elif kind == "tool_result":
        if role != "user":
            raise Invalid(f"{where}: `tool_result` blocks can only be in `user` messages")
        if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
            raise Invalid(f"{where}.tool_result.tool_use_id: Field required")
        content = block.get("content", "")
        if isinstance(content, list):
            for n, part in enumerate(content):
                if not isinstance(part, dict) or part.get("type") not in ("text", "image"):
                    raise Invalid(f"{where}.tool_result.content.{n}: Input should be a block")
        elif not isinstance(content, str):
            raise Invalid(f"{where}.tool_result.content: Input should be a valid string")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise Invalid(f"{where}.tool_result.is_error: Input should be a valid boolean")


def _validate_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise Invalid("tools: Input should be a valid list")
    names: set[str] = set()
    for j, tool in enumerate(tools):
        where = f"tools.{j}.custom"
        if not isinstance(tool, dict):
            raise Invalid(f"tools.{j}: Input should be a valid dictionary")
        for key in tool:
            if key not in TOOL_KEYS:
                raise Invalid(f"{where}.{key}: Extra inputs are not permitted")
        if tool.get("type") not in (None, "custom"):
            raise Invalid(f"tools.{j}.type: Input should be 'custom'")
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise Invalid(f"{where}.name: String should match pattern '{TOOL_NAME.pattern}'")
        if name in names:
            raise Invalid("tools: Tool names must be unique.")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise Invalid(f"{where}.input_schema: Field required")
        if schema.get("type") != "object":
            raise Invalid(f"{where}.input_schema.type: Input should be 'object'")
        if "description" in tool and not isinstance(tool["description"], str):
            raise Invalid(f"{where}.description: Input should be a valid string")


# -- the server ---------------------------------------------------------------------------


class FakeAnthropicServer:
    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, replies: Iterable[Reply] = ()
    ) -> None:
        self.host, self.port = host, port
        self.queue: list[Reply] = [_check(r) for r in replies]
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._closing = False

    @property
    def base_url(self) -> str:
        """The server root; the SDK adds /v1/messages."""
        return f"http://{self.host}:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order; all or none (a bad one raises ValueError)."""
        self.queue.extend([_check(r) for r in replies])

    async def start(self) -> FakeAnthropicServer:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/_script", self._push_script)
        app.router.add_get("/_requests", self._list_requests)
        app.router.add_post("/_reset", self._reset)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
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

    async def __aenter__(self) -> FakeAnthropicServer:
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

    # -- Messages API -----------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "There was an error parsing the body of your request.")
        headers = {k: request.headers[k] for k in RECORDED_HEADERS if k in request.headers}
        rec = RecordedRequest(body=body, headers=headers)
        self.requests.append(rec)
        try:
            validate_headers(request.headers)
            validate(body)
        except Invalid as e:
            rec.rejected = e.message
            rec.completed = True
            return _error(e.status, e.message, e.kind)
        reply = self.queue.pop(0) if self.queue else _echo(body)
        try:
            await asyncio.sleep(float(reply.get("delay", 0)))
            if reply["type"] == "error":
                kind = reply.get("error_type")
                status = int(reply.get("status") or ERROR_STATUS.get(str(kind), 500))
                resp: web.StreamResponse = _error(status, reply.get("message", "fake error"), kind)
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

    def _events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str, str]]:
        """(event name, data) pairs, exactly as the Messages API streams them."""
        text, calls = reply.get("text", ""), _calls(reply)
        message = _message(body, reply, content=[], stop_reason=None)
        message["usage"]["output_tokens"] = 1
        events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
        pieces = reply.get("chunks") or re.findall(r"\s*\S+\s*", text)
        index = 0
        if pieces:
            events.append(_block_start(index, {"type": "text", "text": ""}))
            events.append({"type": "ping"})
            for piece in pieces:
                delta = {"type": "text_delta", "text": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            events.append({"type": "content_block_stop", "index": index})
            index += 1
        whole = bool(reply.get("input_in_start"))
        for c in calls:  # as Anthropic does: id + name + empty input, then JSON pieces
            start = {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}
            if whole:
                start["input"] = json.loads(c["input"] or "{}")
            events.append(_block_start(index, start))
            if index == 0:
                events.append({"type": "ping"})
            offsets = range(0 if whole else len(c["input"]))[::7]
            for piece in ["", *(c["input"][k : k + 7] for k in offsets)]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            events.append({"type": "content_block_stop", "index": index})
            index += 1
        if index == 0:
            events.append({"type": "ping"})
        out = [(e["type"], json.dumps(e)) for e in events]
        if reply["type"] == "malformed":
            return out[:1] + [("content_block_delta", "{this is not json")]
        if reply["type"] == "stream_error":
            error = {
                "type": reply.get("error_type", "overloaded_error"),
                "message": reply.get("message", "Overloaded"),
            }
            return [*out, ("error", json.dumps({"type": "error", "error": error}))]
        if reply.get("truncate"):
            return out
        stop = {"stop_reason": _stop_reason(reply, calls), "stop_sequence": None}
        usage = {"output_tokens": _output_tokens(reply)}
        out.append(
            ("message_delta", json.dumps({"type": "message_delta", "delta": stop, "usage": usage}))
        )
        out.append(("message_stop", json.dumps({"type": "message_stop"})))
        return out

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        headers = {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "request-id": _request_id(),
        }
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        for i, (name, data) in enumerate(self._events(body, reply)):
            if i and reply.get("chunk_delay"):
                await asyncio.sleep(float(reply["chunk_delay"]))
            await resp.write(f"event: {name}\ndata: {data}\n\n".encode())
        await resp.write_eof()
        return resp

    def _complete(self, body: dict[str, Any], reply: Reply) -> web.Response:
        if reply["type"] == "malformed":
            return web.Response(text="{this is not json", content_type="application/json")
        if reply["type"] == "stream_error":
            return _error(529, reply.get("message", "Overloaded"), reply.get("error_type"))
        text, calls = reply.get("text") or "".join(reply.get("chunks") or []), _calls(reply)
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for c in calls:
            block = {"type": "tool_use", "id": c["id"], "name": c["name"]}
            content.append({**block, "input": json.loads(c["input"] or "{}")})
        message = _message(body, reply, content, _stop_reason(reply, calls))
        return web.json_response(message, headers={"request-id": _request_id()})

    async def _not_found(self, request: web.Request) -> web.Response:
        return _error(404, f"Not Found: {request.method} {request.path}", "not_found_error")

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


def _error(status: int, message: str, kind: str | None = None) -> web.Response:
    kind = kind or STATUS_ERROR.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    request_id = _request_id()
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return web.json_response(body, status=status, headers={"request-id": request_id})


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _message(
    body: dict[str, Any], reply: Reply, content: list[dict[str, Any]], stop_reason: str | None
) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(json.dumps(body.get("messages", []))) // 4 + 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": _output_tokens(reply),
            "service_tier": "standard",
        },
    }


def _stop_reason(reply: Reply, calls: list[dict[str, str]]) -> str:
    return str(reply.get("stop_reason") or ("tool_use" if calls else "end_turn"))


def _output_tokens(reply: Reply) -> int:
    return len(reply.get("text", "")) // 4 + 1


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


async def _serve(port: int, port_file: str, replies: list[Reply]) -> None:
    server = await FakeAnthropicServer(port=port, replies=replies).start()
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
    parser = argparse.ArgumentParser(description="Fake Anthropic Messages API server")
    parser.add_argument("--port-file", required=True, help="write the bound port here")
    parser.add_argument("--script", help="JSON file: a reply object or a list of them")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    script = json.loads(Path(args.script).read_text(encoding="utf-8")) if args.script else []
    script = script if isinstance(script, list) else [script]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.port, args.port_file, script))
