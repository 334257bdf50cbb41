"""The provider interface the agent loop talks to.

Messages and tools use the Chat Completions shapes (role/content/tool_calls,
`{"type": "function", "function": {...}}`): the lingua franca every provider
adapter converts from. A provider raises ProviderError for any failure of the
model service; cancellation (asyncio.CancelledError) must propagate untouched
so that an in-flight request is really abandoned.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

TextCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model produced it


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one model call used, as the provider reported them (or estimated)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class ProviderCommand:
    """A slash command the provider itself understands (advertised to clients)."""

    name: str
    description: str
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderReply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    # Chat Completions vocabulary: stop | length | tool_calls | content_filter (the loop
    # maps these to ACP stop reasons).
    finish_reason: str = "stop"
    usage: Usage | None = None
    thought: str = ""  # the model's reasoning, where the provider streams it
    thought_signature: str = ""  # Anthropic: sent back with the thinking block


class Provider(Protocol):
    model: str  # may be changed between calls (the session's model setting)
    context_window: int | None  # tokens, where known
    commands: tuple[ProviderCommand, ...]  # slash commands the provider understands

    @property
    def takes_images(self) -> bool:
        """Whether user messages may carry images (Chat Completions `image_url` parts),
        for the model as it is now."""
        ...

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
        on_thought: TextCallback | None = None,
    ) -> ProviderReply:
        """One model call. Streams text deltas to `on_text` (and reasoning, where the
        provider streams it, to `on_thought`) as they arrive."""

    async def aclose(self) -> None:
        """Release the client (connection pool)."""


def cause_chain(error: BaseException, *, include_self: bool = True) -> str:
    """The distinct messages down an exception's cause chain, for a ProviderError.

    The SDKs' own connection errors ("Connection error.") and their HTTP client's ("All
    connection attempts failed") hide the OS error that says what happened.
    """
    chain: list[BaseException] = [error] if include_self else []
    cause = error.__cause__ or error.__context__
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if not chain:
        return str(error)
    parts: list[str] = []
    for link in chain:
        text = str(link) or type(link).__name__
        if text not in parts:
            parts.append(text)
    return f"{'; '.join(parts)} ({type(chain[-1]).__name__})"


def gives_images(model: str, text_only: Sequence[str]) -> bool:
    """Whether the endpoint gives `model` images: not when a `--text-only-model` glob
    names it (the API says nothing of it before a request fails)."""
    return not any(fnmatch.fnmatchcase(model, glob) for glob in text_only)
