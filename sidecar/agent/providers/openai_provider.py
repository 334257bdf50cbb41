"""The `openai` provider: any OpenAI-compatible Chat Completions server.

Works against OpenAI itself and local servers (Ollama, vLLM, llama.cpp) through the
official SDK's `AsyncOpenAI`, always streaming so text reaches the user as it is made.
The SDK owns transport concerns (connection pool, timeouts, retries with backoff); this
module owns the translation: chunks -> text deltas + assembled tool calls, SDK errors ->
ProviderError with a message that says what failed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    AsyncStream,
    OpenAIError,
    Timeout,
    omit,
)
from openai.types.chat import ChatCompletionChunk

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

# Local servers ignore the key, but the SDK refuses to start without one.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"


@dataclass(slots=True)
class _PartialCall:
    """A tool call being assembled from streamed fragments."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _ToolDelta:
    index: int
    id: str | None
    name: str | None
    arguments: str | None


@dataclass(frozen=True, slots=True)
class _Delta:
    """What one chunk contributes; plain data, so nothing after parsing can fail on shape."""

    text: str
    tool_calls: list[_ToolDelta]
    finish_reason: str | None
    thought: str = ""  # `reasoning_content`, which OpenAI-compatible servers stream
    usage: Usage | None = None


class OpenAIProvider:
    """Chat Completions over the official SDK.

    `api_key` and `base_url` fall back to OPENAI_API_KEY / OPENAI_BASE_URL (the SDK's own
    behaviour). With no key, a keyless local server gets a placeholder; a hosted API gets
    nothing: every call fails first with what to set (`keys.missing_key`).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_tokens: int | None = None,
        context_window: int | None = None,
        text_only_models: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.context_window = context_window
        self.commands: tuple[ProviderCommand, ...] = ()
        self._text_only = tuple(text_only_models)  # models given no `image_url` parts
        key = resolve_key(api_key, KEY_VARIABLE)
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.key_problem = missing_key(key, base_url, DEFAULT_BASE_URL, KEY_VARIABLE)
        # `timeout` bounds each read (so a stalled stream fails); connecting gets less, so
        # an unreachable host fails fast. The SDK retries connection errors, 408/409/429
        # and 5xx with backoff, up to max_retries.
        self._client = AsyncOpenAI(
            api_key=key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=Timeout(timeout, connect=min(timeout, 10.0)),
            max_retries=max_retries,
        )
        self.base_url = str(self._client.base_url)

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
        text: list[str] = []
        thought: list[str] = []
        calls: dict[int, _PartialCall] = {}
        finish_reason: str | None = None
        usage: Usage | None = None
        stream = await self._open(messages, tools)
        async with stream:  # closes the response (and its connection) on any exit
            while (delta := await self._next(stream)) is not None:
                usage = delta.usage or usage
                if delta.thought:
                    thought.append(delta.thought)
                    if on_thought is not None:
                        on_thought(delta.thought)
                if delta.text:
                    text.append(delta.text)
                    on_text(delta.text)  # outside the error mapping: its errors are its own
                for td in delta.tool_calls:
                    call = calls.setdefault(td.index, _PartialCall())
                    if td.id and not call.id:
                        call.id = td.id
                    call.name += td.name or ""
                    if td.arguments:
                        call.arguments.append(td.arguments)
                finish_reason = delta.finish_reason or finish_reason
        tool_calls = [self._finish_call(i, calls[i]) for i in sorted(calls)]
        if finish_reason is None:  # some servers omit it; infer rather than invent an error
            finish_reason = "tool_calls" if tool_calls else "stop"
        return ProviderReply("".join(text), tool_calls, finish_reason, usage, "".join(thought))

    async def aclose(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()

    async def _open(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> AsyncStream[ChatCompletionChunk]:
        try:
            return await self._client.chat.completions.create(
                model=self.model,
                # Messages/tools already use the Chat Completions shapes (see base.py);
                # reasoning is not sent back (servers that stream it refuse it as input).
                messages=cast(Any, [_without_reasoning(m) for m in messages]),
                tools=cast(Any, list(tools)) if tools else omit,  # some servers reject []
                max_tokens=self.max_tokens if self.max_tokens is not None else omit,
                stream=True,
                stream_options={"include_usage": True},
            )
        except (OpenAIError, ValueError) as e:
            raise self._error(e, "request") from e

    async def _next(self, stream: AsyncStream[ChatCompletionChunk]) -> _Delta | None:
        """The next chunk as plain data, or None at the end; every failure -> ProviderError."""
        try:
            chunk = await stream.__anext__()
        except StopAsyncIteration:
            return None
        except (OpenAIError, ValueError) as e:  # ValueError: an SSE data line that is not JSON
            raise self._error(e, "stream") from e
        try:
            usage = None
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            choice = next((c for c in chunk.choices if c.index == 0), None)
            if choice is None:  # e.g. the trailing usage chunk
                return _Delta("", [], None, usage=usage)
            tool_calls = [
                _ToolDelta(
                    tc.index,
                    tc.id,
                    tc.function.name if tc.function else None,
                    tc.function.arguments if tc.function else None,
                )
                for tc in choice.delta.tool_calls or []
            ]
            reason = str(choice.finish_reason) if choice.finish_reason else None
            extra = choice.delta.model_extra or {}
            thought = extra.get("reasoning_content") or extra.get("reasoning") or ""
            return _Delta(
                choice.delta.content or "",
                tool_calls,
                reason,
                thought if isinstance(thought, str) else "",
                usage,
            )
        except (AttributeError, TypeError) as e:
            # The SDK builds chunks without validation, so a wrong shape shows up here.
            raise ProviderError(f"{self._where()}: malformed stream chunk: {e}") from e

    def _finish_call(self, index: int, call: _PartialCall) -> ToolCall:
        if not call.name:
            raise ProviderError(f"{self._where()}: tool call #{index} arrived without a name")
        # Some local servers omit ids; the agent loop needs one to pair the tool result.
        call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(id=call_id, name=call.name, arguments="".join(call.arguments))

    def _where(self) -> str:
        return f"openai provider (model {self.model!r} at {self.base_url})"

    def _error(self, e: OpenAIError | ValueError, phase: str) -> ProviderError:
        """Say what failed: status and server message, or the transport-level cause."""
        where = self._where()
        if isinstance(e, APIStatusError):
            hint = status_hint(e.status_code, KEY_VARIABLE)
            return ProviderError(f"{where}: HTTP {e.status_code}: {_server_message(e)}{hint}")
        if isinstance(e, APITimeoutError):
            return ProviderError(f"{where}: request timed out after {self.timeout:g}s")
        if isinstance(e, APIConnectionError):
            what = "connection lost mid-stream" if phase == "stream" else "connection failed"
            hint = "" if phase == "stream" else connection_hint(self.base_url)
            return ProviderError(f"{where}: {what}: {_causes(e)}{hint}")
        if isinstance(e, APIError):  # an error event inside the stream
            return ProviderError(f"{where}: server reported an error: {e.message}")
        if isinstance(e, ValueError):
            return ProviderError(f"{where}: malformed response: {e}")
        return ProviderError(f"{where}: {type(e).__name__}: {e}")


def _without_reasoning(message: dict[str, Any]) -> dict[str, Any]:
    if "reasoning_content" not in message and "reasoning_signature" not in message:
        return message
    return {k: v for k, v in message.items() if not k.startswith("reasoning_")}


def _causes(e: APIConnectionError) -> str:
    return cause_chain(e, include_self=False)


def _server_message(e: APIStatusError) -> str:
    """The server's own words: OpenAI-style `{"error": {"message"}}`, else the raw body."""
    body = e.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error")
        if isinstance(message, dict):
            message = message.get("message")
        if message:
            return str(message)
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return e.message


async def list_models(base_url: str | None, timeout: float = 5.0) -> list[str]:
    """The models the server offers (`GET /models`); ProviderError if it cannot say."""
    key = resolve_key(None, KEY_VARIABLE)
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    problem = missing_key(key, base_url, DEFAULT_BASE_URL, KEY_VARIABLE)
    if problem is not None:
        raise ProviderError(f"openai provider: cannot list models: {problem}")
    client = AsyncOpenAI(
        api_key=key or PLACEHOLDER_API_KEY, base_url=base_url, timeout=timeout, max_retries=0
    )
    try:
        page = await client.models.list()
        return sorted(model.id for model in page.data)
    except (OpenAIError, ValueError) as e:
        raise ProviderError(f"openai provider: cannot list models: {e}") from e
    finally:
        await client.close()
