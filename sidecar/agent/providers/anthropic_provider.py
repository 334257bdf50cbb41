"""The `anthropic` provider: the Anthropic Messages API (and servers compatible with it).

Uses the official SDK's `AsyncAnthropic`, always streaming, so text reaches the user as it
is made. The SDK owns transport concerns (connection pool, timeouts, retries with backoff);
this module owns the translation both ways:

* our Chat-Completions-shaped context -> Messages API request: system messages become the
  top-level `system` parameter, assistant tool calls become `tool_use` blocks, `tool`
  messages become `tool_result` blocks in a user message, and consecutive messages of one
  role are merged so that roles alternate as the API requires;
* stream events -> text deltas + assembled tool calls + a Chat Completions finish reason;
* SDK errors -> ProviderError with a message that says what failed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
from anthropic import (
    AnthropicError,
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncAnthropic,
    AsyncStream,
    Timeout,
    omit,
)
from anthropic.types import RawMessageStreamEvent

from sidecar.agent.providers.base import (
    ProviderCommand,
    ProviderReply,
    TextCallback,
    ToolCall,
    Usage,
    cause_chain,
    gives_images,
)
from sidecar.agent.providers.keys import (
    PLACEHOLDER_API_KEY,
    connection_hint,
    missing_key,
    resolve_key,
    status_hint,
)
from sidecar.domain.errors import ProviderError

# Local servers ignore the key, but the SDK refuses to send a request without one.
KEY_VARIABLE = "ANTHROPIC_API_KEY"
# The SDK's own default. Resolved here because the SDK takes an empty ANTHROPIC_BASE_URL
# literally (as the base URL "").
DEFAULT_BASE_URL = "https://api.anthropic.com"

DEFAULT_MAX_TOKENS = 4096
CONTEXT_WINDOW = 200_000  # tokens: every current Claude model

# Messages API stop_reason -> Chat Completions finish_reason (unknown ones pass through).
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

Block = dict[str, Any]
Message = dict[str, Any]


@dataclass(slots=True)
class _PartialCall:
    """A tool_use block being assembled from streamed input_json deltas."""

    id: str
    name: str
    initial: str = ""  # JSON of a non-empty `input` in content_block_start (not Anthropic's way)
    arguments: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Event:
    """What one stream event contributes; plain data, so nothing after parsing can fail."""

    text: str = ""
    tool_start: tuple[int, str, str, str] | None = None  # (block index, id, name, input JSON)
    tool_json: tuple[int, str] | None = None  # (block index, partial JSON)
    stop_reason: str | None = None
    done: bool = False  # message_stop
    thought: str = ""  # a thinking block's text
    signature: str = ""  # a thinking block's signature (sent back with it, as the API asks)
    usage: Usage = Usage()


class AnthropicProvider:
    """Messages API over the official SDK.

    `api_key` falls back to ANTHROPIC_API_KEY; without one, a keyless local/compatible
    server gets a placeholder, and a hosted API nothing: every call fails first with what
    to set (`keys.missing_key`). `base_url` falls back to ANTHROPIC_BASE_URL, then to the
    SDK's default; it is the server root: the SDK appends `/v1/messages` itself.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        text_only_models: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.timeout = timeout
        # The Messages API requires max_tokens; with thinking it must exceed the budget.
        self.max_tokens = max_tokens or max(DEFAULT_MAX_TOKENS, (thinking_budget or 0) + 1024)
        self.thinking_budget = thinking_budget
        self.context_window: int | None = CONTEXT_WINDOW
        self.commands: tuple[ProviderCommand, ...] = ()
        self._text_only = tuple(text_only_models)  # models given no `image` blocks
        # An explicit key also stops the SDK from looking for credential profiles on disk.
        key = resolve_key(api_key, KEY_VARIABLE)
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.key_problem = missing_key(key, base_url, DEFAULT_BASE_URL, KEY_VARIABLE)
        # `timeout` bounds each read (so a stalled stream fails); connecting gets less, so
        # an unreachable host fails fast. The SDK retries connection errors, 408/409/429
        # and 5xx (529 "overloaded" included) with backoff, up to max_retries.
        self._client = AsyncAnthropic(
            api_key=key or PLACEHOLDER_API_KEY,
            base_url=base_url or DEFAULT_BASE_URL,
            timeout=Timeout(timeout, connect=min(timeout, 10.0)),
            max_retries=max_retries,
        )
        self.base_url = str(self._client.base_url)
        self.endpoint = f"{self.base_url.rstrip('/')}/v1/messages"

    @property
    def takes_images(self) -> bool:
        return gives_images(self.model, self._text_only)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
        on_thought: TextCallback | None = None,
    ) -> ProviderReply:
        """One streamed model call; cancellation propagates and abandons the HTTP request."""
        if self.key_problem is not None:
            raise ProviderError(f"{self._where()}: {self.key_problem}")
        system, converted = to_anthropic_messages(messages)
        text: list[str] = []
        thought: list[str] = []
        signature: list[str] = []
        calls: dict[int, _PartialCall] = {}
        stop_reason: str | None = None
        finished = False
        usage = Usage()
        stream = await self._open(system, converted, [to_anthropic_tool(t) for t in tools])
        async with stream:  # closes the response (and its connection) on any exit
            while (event := await self._next(stream)) is not None:
                usage = usage + event.usage
                if event.thought:
                    thought.append(event.thought)
                    if on_thought is not None:
                        on_thought(event.thought)
                signature.append(event.signature)
                if event.text:
                    text.append(event.text)
                    on_text(event.text)  # outside the error mapping: its errors are its own
                if event.tool_start is not None:
                    index, call_id, name, initial = event.tool_start
                    calls[index] = _PartialCall(call_id, name, initial)
                if event.tool_json is not None:
                    index, fragment = event.tool_json
                    if index not in calls:
                        raise ProviderError(
                            f"{self._where()}: input_json_delta for block {index}, "
                            "which is not a tool_use block"
                        )
                    calls[index].arguments.append(fragment)
                stop_reason = event.stop_reason or stop_reason
                finished = finished or event.done
        if not finished:
            raise ProviderError(f"{self._where()}: the stream ended before message_stop")
        tool_calls = [self._finish_call(i, calls[i]) for i in sorted(calls)]
        if stop_reason is None:  # some compatible servers omit it; infer, don't invent
            finish_reason = "tool_calls" if tool_calls else "stop"
        else:
            finish_reason = FINISH_REASONS.get(stop_reason, stop_reason)
        return ProviderReply(
            "".join(text),
            tool_calls,
            finish_reason,
            usage,
            "".join(thought),
            "".join(signature),
        )

    async def aclose(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()

    async def _open(
        self, system: str, messages: list[Message], tools: list[Block]
    ) -> AsyncStream[RawMessageStreamEvent]:
        try:
            return await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=cast(Any, messages),  # built by to_anthropic_messages
                system=system if system else omit,
                tools=cast(Any, tools) if tools else omit,
                thinking=(
                    {"type": "enabled", "budget_tokens": self.thinking_budget}
                    if self.thinking_budget
                    else omit
                ),
                stream=True,
            )
        except (AnthropicError, ValueError) as e:
            raise self._error(e, "request") from e

    async def _next(self, stream: AsyncStream[RawMessageStreamEvent]) -> _Event | None:
        """The next event as plain data, or None at the end; every failure -> ProviderError."""
        try:
            event = await stream.__anext__()
        except StopAsyncIteration:
            return None
        except (AnthropicError, ValueError, httpx2.HTTPError) as e:
            # ValueError: a data line that is not JSON. The SDK leaves transport errors
            # while reading the body (httpx2) unwrapped.
            raise self._error(e, "stream") from e
        try:
            return _parse_event(event)
        except (AttributeError, TypeError, KeyError) as e:
            # The SDK builds events without validation, so a wrong shape shows up here.
            raise ProviderError(f"{self._where()}: malformed stream event: {e!r}") from e

    def _finish_call(self, index: int, call: _PartialCall) -> ToolCall:
        if not call.name:
            raise ProviderError(f"{self._where()}: tool_use block {index} arrived without a name")
        # Anthropic streams the input as JSON fragments after an empty `input`; a few
        # compatible servers send it whole in the start event instead. A tool without
        # parameters may stream no JSON at all: the arguments are still a JSON object.
        arguments = "".join(call.arguments) or call.initial or "{}"
        return ToolCall(
            id=call.id or f"toolu_{uuid.uuid4().hex[:24]}", name=call.name, arguments=arguments
        )

    def _where(self) -> str:
        return f"anthropic provider (model {self.model!r} at {self.endpoint})"

    def _error(
        self, e: AnthropicError | ValueError | httpx2.HTTPError, phase: str
    ) -> ProviderError:
        """Say what failed: status, error type and server message, or the transport cause."""
        where = self._where()
        if isinstance(e, APIStatusError):
            detail = _server_message(e)
            if e.request_id:
                detail += f" (request id {e.request_id})"
            if e.status_code < 400:  # an `error` event inside a 200 stream
                return ProviderError(f"{where}: server reported an error mid-stream: {detail}")
            if e.status_code == 404 and "/v1/v1/" in str(e.request.url):
                detail += " (the base URL should be the server root, without /v1)"
            hint = status_hint(e.status_code, KEY_VARIABLE)
            return ProviderError(f"{where}: HTTP {e.status_code}: {detail}{hint}")
        # Mid-stream, older SDKs leave the transport's timeout unwrapped and newer ones wrap
        # it: either way it is the stream that stalled, not the request.
        if isinstance(e, APITimeoutError | httpx2.TimeoutException) and phase == "stream":
            return ProviderError(f"{where}: stream timed out: no data for {self.timeout:g}s")
        if isinstance(e, APITimeoutError | httpx2.TimeoutException):
            return ProviderError(f"{where}: request timed out after {self.timeout:g}s")
        if isinstance(e, APIConnectionError | httpx2.HTTPError):
            what = "connection lost mid-stream" if phase == "stream" else "connection failed"
            hint = "" if phase == "stream" else connection_hint(self.base_url)
            return ProviderError(f"{where}: {what}: {_causes(e)}{hint}")
        if isinstance(e, APIError):
            return ProviderError(f"{where}: server reported an error: {e.message}")
        if isinstance(e, ValueError):
            return ProviderError(f"{where}: malformed response: {e}")
        return ProviderError(f"{where}: {type(e).__name__}: {e}")


def _parse_event(event: RawMessageStreamEvent) -> _Event:
    if event.type == "content_block_start":
        block = event.content_block
        if block.type == "text":
            return _Event(text=block.text)
        if block.type == "tool_use":
            initial = json.dumps(block.input) if block.input else ""
            return _Event(tool_start=(event.index, block.id, block.name, initial))
        if block.type == "thinking":
            return _Event(thought=block.thinking or "", signature=block.signature or "")
        return _Event()  # redacted thinking and server-tool blocks: not ours to show
    if event.type == "content_block_delta":
        delta = event.delta
        if delta.type == "text_delta":
            return _Event(text=delta.text)
        if delta.type == "input_json_delta":
            return _Event(tool_json=(event.index, delta.partial_json))
        if delta.type == "thinking_delta":
            return _Event(thought=delta.thinking)
        if delta.type == "signature_delta":
            return _Event(signature=delta.signature)
        return _Event()
    if event.type == "message_start":
        started = event.message.usage
        return _Event(usage=Usage(started.input_tokens or 0, started.output_tokens or 0))
    if event.type == "message_delta":
        reason = event.delta.stop_reason
        output = event.usage.output_tokens if event.usage is not None else 0
        return _Event(stop_reason=str(reason) if reason else None, usage=Usage(0, output or 0))
    if event.type == "message_stop":
        return _Event(done=True)
    return _Event()  # content_block_stop, and event types added later


# -- request conversion -------------------------------------------------------------------


def to_anthropic_messages(messages: Sequence[dict[str, Any]]) -> tuple[str, list[Message]]:
    """Chat Completions context -> (system text, Messages API `messages`).

    Every message's content becomes a list of blocks; empty text is dropped (the API
    rejects empty text blocks and empty messages); consecutive messages of one role are
    merged, tool results first, so that roles alternate and each tool_use is answered by
    a tool_result in the next user message.
    """
    system: list[str] = []
    out: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            if text := _text_of(message.get("content")):
                system.append(text)
            continue
        if role == "tool":
            result: Block = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
            }
            if content := _text_of(message.get("content")):
                result["content"] = content
            _append(out, "user", [result])
        elif role == "assistant":
            blocks = _thinking_blocks(message) + _text_blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id") or ""),
                        "name": str(function.get("name") or ""),
                        "input": _tool_input(function.get("arguments")),
                    }
                )
            _append(out, "assistant", blocks)
        elif role == "user":
            _append(out, "user", _user_blocks(message.get("content")))
        else:
            raise ProviderError(f"anthropic provider: cannot send a message with role {role!r}")
    return "\n\n".join(system), out


def to_anthropic_tool(tool: dict[str, Any]) -> Block:
    """`{"type": "function", "function": {name, description, parameters}}` -> Messages tool."""
    function = tool.get("function", tool)
    converted: Block = {
        "name": function["name"],
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        converted["description"] = function["description"]
    return converted


def _append(out: list[Message], role: str, blocks: list[Block]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        merged = out[-1]["content"] + blocks
        # In a user message, tool_result blocks must come before any other content.
        merged.sort(key=lambda b: b["type"] != "tool_result")  # stable
        out[-1]["content"] = merged
    else:
        out.append({"role": role, "content": blocks})


def _text_of(content: Any) -> str:
    """Chat Completions content (a string, None or a list of parts) as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content)


def _thinking_blocks(message: dict[str, Any]) -> list[Block]:
    """A stored thinking block goes back with its signature: the API requires it when the
    assistant turn continues with tool results."""
    thought, signature = message.get("reasoning_content"), message.get("reasoning_signature")
    if isinstance(thought, str) and thought and isinstance(signature, str) and signature:
        return [{"type": "thinking", "thinking": thought, "signature": signature}]
    return []


def _user_blocks(content: Any) -> list[Block]:
    """A user message's parts: images (data URLs) as base64 `image` blocks, then text."""
    if not isinstance(content, list):
        return _text_blocks(content)
    images: list[Block] = []
    for part in content:
        url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
        head, _, data = url.partition(";base64,")
        if head.startswith("data:") and data:
            source = {"type": "base64", "media_type": head.removeprefix("data:"), "data": data}
            images.append({"type": "image", "source": source})
    return images + _text_blocks(content)


def _text_blocks(content: Any) -> list[Block]:
    text = _text_of(content)
    return [{"type": "text", "text": text}] if text else []


def _tool_input(arguments: Any) -> dict[str, Any]:
    """The JSON arguments text as the object `tool_use.input` must be. Arguments that are
    not a JSON object (a model's malformed output) are kept, wrapped, rather than lost."""
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return {"_raw_arguments": str(arguments)}
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": str(arguments)}


# -- error details ------------------------------------------------------------------------


def _causes(e: BaseException) -> str:
    return cause_chain(e, include_self=not isinstance(e, APIConnectionError))


def _server_message(e: APIStatusError) -> str:
    """`error.type: error.message` from Anthropic's error JSON, else the raw body."""
    body = e.body
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        kind = error.get("type")
        return f"{kind}: {error['message']}" if kind else str(error["message"])
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return e.message


async def list_models(base_url: str | None, timeout: float = 5.0) -> list[str]:
    """The models the API offers (`GET /v1/models`); ProviderError if it cannot say."""
    key = resolve_key(None, KEY_VARIABLE)
    base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    problem = missing_key(key, base_url, DEFAULT_BASE_URL, KEY_VARIABLE)
    if problem is not None:
        raise ProviderError(f"anthropic provider: cannot list models: {problem}")
    client = AsyncAnthropic(
        api_key=key or PLACEHOLDER_API_KEY,
        base_url=base_url or DEFAULT_BASE_URL,
        timeout=timeout,
        max_retries=0,
    )
    try:
        page = await client.models.list()
        return [model.id for model in page.data]
    except (AnthropicError, ValueError, httpx2.HTTPError) as e:
        raise ProviderError(f"anthropic provider: cannot list models: {e}") from e
    finally:
        await client.close()
