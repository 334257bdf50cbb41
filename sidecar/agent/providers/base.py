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
