"""The provider interface the agent loop talks to.

Messages and tools use the Chat Completions shapes (role/content/tool_calls,
`{"type": "function", "function": {...}}`): the lingua franca every provider
adapter converts from. A provider raises ProviderError for any failure of the
model service; cancellation (asyncio.CancelledError) must propagate untouched
so that an in-flight request is really abandoned.
"""

from __future__ import annotations

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
class ProviderReply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"


class Provider(Protocol):
    name: str
    model: str

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
    ) -> ProviderReply:
        """One model call. Streams text deltas to `on_text` as they arrive."""

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
