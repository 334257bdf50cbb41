"""The provider context of one runtime: what the model is sent, kept in memory.

It is the session's latest compaction summary (if any) followed by the transcript
from `context_from` on, converted from transcript entries to the Chat Completions
form every provider adapter starts from. It is loaded once per runtime
generation, on the first model call (never at resume, so resuming a long session
stays cheap), and then follows every append. Compaction replaces older turns by
a summary here only: the stored transcript stays whole and pageable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import (
    AssistantEntry,
    Entry,
    MarkerEntry,
    MarkerKind,
    Skip,
    ToolResultEntry,
    UserEntry,
)

PAGE: Final = 1000
ChatMessage = dict[str, Any]
# Reads a page of transcript entries: (offset, limit) -> entries.
PageReader = Callable[[int, int], Awaitable[list[Entry]]]

COMPACTION_PROMPT: Final = (
    "You compact a coding agent's conversation. Summarize the conversation below so the "
    "agent can continue the task without it: the user's goals, decisions taken, commands "
    "run and their important results, files touched, open questions. Be concise and factual."
)


def to_provider_message(entry: Entry) -> ChatMessage | None:
    """Transcript entry -> Chat Completions message; markers are for people."""
    if isinstance(entry, UserEntry):
        if entry.images:  # by reference: the runner gives the provider their bytes
            return {"role": "user", "content": entry.text, "images": list(entry.images)}
        return {"role": "user", "content": entry.text}
    if isinstance(entry, AssistantEntry):
        message: ChatMessage = {"role": "assistant", "content": entry.text}
        if entry.thought:
            # Providers that need the reasoning back take these keys; the others drop them.
            message["reasoning_content"] = entry.thought
            if entry.thought_signature:
                message["reasoning_signature"] = entry.thought_signature
        if entry.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in entry.tool_calls
            ]
        return message
    if isinstance(entry, ToolResultEntry):
        result: ChatMessage = {"role": "tool", "tool_call_id": entry.call_id}
        if entry.tool:
            result["name"] = entry.tool
        result["content"] = entry.content
        return result
    assert isinstance(entry, MarkerEntry)
    return None


async def _marker(read: PageReader, index: int) -> MarkerEntry | None:
    found = await read(index, 1)
    return found[0] if found and isinstance(found[0], MarkerEntry) else None


def with_image_parts(message: ChatMessage, data: dict[str, str]) -> ChatMessage:
    """A user message whose images are references, as Chat Completions content parts:
    its text (none for a message of only images), then each image as a base64 data URL
    (`data`: digest -> base64)."""
    text = str(message.get("content") or "")
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for image in message.get("images", ()):
        encoded = data.get(image.digest)
        if encoded is not None:
            url = f"data:{image.mime_type};base64,{encoded}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {k: v for k, v in message.items() if k != "images"} | {"content": parts}


def _size(message: ChatMessage) -> int:
    size = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or []:
        size += len(str(call.get("function", {}).get("arguments", "")))
    return size


class ProviderContext:
    def __init__(self, summary: str | None = None, skips: tuple[Skip, ...] = ()) -> None:
        self.summary = summary
        self.skips = skips  # rewound ranges left out (kept for the next compaction marker)
        self._entries: list[tuple[int, ChatMessage]] = []  # (transcript index, message)
        # What the provider is sent, kept well formed incrementally so a model call does
        # not re-check the whole context: only the part from the last message that made
        # tool calls (`_open`) may still need fixing, until the next user message.
        self._sent: list[ChatMessage] = []
        self._open: int | None = None
        self.chars = len(summary or "")
        self.with_images = 0  # messages that carry images (none: a model call skips them)

    @classmethod
    async def load(cls, read: PageReader, record: SessionRecord) -> ProviderContext:
        """The context the record points at: its marker (a compaction or a rewind) says
        which summary and which rewound ranges; the entries are read from `context_from`,
        jumping over the ranges."""
        summary: str | None = None
        skips: tuple[Skip, ...] = ()
        if record.summary_index is not None:
            marker = await _marker(read, record.summary_index)
            if marker is not None:
                skips = marker.skips
                if marker.kind is MarkerKind.COMPACTION:
                    summary = marker.text
                elif marker.summary_index is not None:
                    source = await _marker(read, marker.summary_index)
                    summary = source.text if source is not None else None
        context = cls(summary, skips)
        offset = record.context_from
        ordered = sorted(skips)
        while True:
            for start, end in ordered:
                if start <= offset < end:
                    offset = end
            limit = min([PAGE, *(start - offset for start, _ in ordered if start > offset)])
            page = await read(offset, limit)
            if not page:
                break
            for index, entry in enumerate(page, start=offset):
                context.append(index, entry)
            offset += len(page)
        context._settle()
        return context

    def _settle(self) -> None:
        """Re-check everything (after loading or compacting: the only times a problem can
        sit in the middle, e.g. a call whose result was compacted away)."""
        self._sent = _well_formed([message for _, message in self._entries])
        self._open = None

    def append(self, index: int, entry: Entry) -> None:
        converted = to_provider_message(entry)
        if converted is None:
            return
        self._entries.append((index, converted))
        self.chars += _size(converted)
        if "images" in converted:
            self.with_images += 1
        if converted.get("role") == "user" and self._open is not None:
            self._sent[self._open :] = _well_formed(self._sent[self._open :])
            self._open = None
        opens = converted.get("tool_calls") or converted.get("role") == "tool"
        if opens and self._open is None:
            self._open = len(self._sent)
        self._sent.append(converted)

    def messages(self, system_prompt: str) -> list[ChatMessage]:
        head = [{"role": "system", "content": system_prompt}]
        if self.summary:
            head.append(
                {
                    "role": "system",
                    "content": f"Summary of the earlier conversation:\n{self.summary}",
                }
            )
        if self._open is None:
            return head + self._sent
        return head + self._sent[: self._open] + _well_formed(self._sent[self._open :])

    def split_point(self, keep_turns: int) -> int | None:
        """Transcript index where the last `keep_turns` turns begin, if anything precedes it."""
        starts = [i for i, (_, m) in enumerate(self._entries) if m.get("role") == "user"]
        if len(starts) <= keep_turns:
            return None
        if keep_turns == 0:  # everything: the kept context starts after the last entry
            return self._entries[-1][0] + 1
        position = starts[-keep_turns]
        return self._entries[position][0] if position > 0 else None

    def render_before(self, index: int) -> str:
        """The part to summarize, as plain text (the previous summary first)."""
        lines = [f"[earlier summary]\n{self.summary}"] if self.summary else []
        for transcript_index, message in self._entries:
            if transcript_index >= index:
                break
            text = str(message.get("content") or "")
            for call in message.get("tool_calls") or []:
                text += f"\n(tool call {call.get('function', {}).get('arguments', '')})"
            lines.append(f"[{message.get('role')}] {text}")
        return "\n\n".join(lines)

    def compact(self, summary: str, keep_from: int) -> None:
        self._entries = [(i, m) for i, m in self._entries if i >= keep_from]
        self.summary = summary
        self.skips = tuple(skip for skip in self.skips if skip[1] > keep_from)
        self.chars = len(summary) + sum(_size(m) for _, m in self._entries)
        self.with_images = sum("images" in m for _, m in self._entries)
        self._settle()


def _well_formed(context: list[ChatMessage]) -> list[ChatMessage]:
    """Keep only tool calls that got a result, and results that follow their call, so
    providers accept the context (a crash mid-command, or compaction, can break pairs)."""
    asked: set[Any] = set()
    answered: set[Any] = set()
    kept_results: set[int] = set()
    for position, message in enumerate(context):
        for call in message.get("tool_calls") or []:
            asked.add(call.get("id"))
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id in asked and call_id not in answered:
                answered.add(call_id)
                kept_results.add(position)
    fixed: list[ChatMessage] = []
    for position, message in enumerate(context):
        if message.get("role") == "tool":
            if position in kept_results:
                fixed.append(message)
            continue
        calls = message.get("tool_calls")
        if calls:
            kept = [c for c in calls if c.get("id") in answered]
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            if kept:
                message["tool_calls"] = kept
        fixed.append(message)
    return fixed
