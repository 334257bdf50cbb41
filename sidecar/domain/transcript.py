"""Transcript entries: what a session's history is made of, as frozen values.

The agent loop, the runtime and the manager speak only these types. The store keeps
each entry as one JSON row (`to_row`/`from_row`; the row format is the one databases
already hold, so no migration is needed); the edges translate entries into the wire's
`TranscriptEntry` (`sidecar/wire/transcript.py`). Nobody else sees a row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from sidecar.domain.images import ImageRef
from sidecar.domain.records import iso, now


class MarkerKind(StrEnum):
    """Notes in the transcript for people; never sent to the model."""

    INTERRUPTED = "interrupted"  # the sidecar died mid-turn
    COMPACTION = "compaction"  # older turns summarized (the summary is the text)
    CANCELLED = "cancelled"  # the user stopped the turn
    REWIND = "rewind"  # the conversation restarted before a turn (the later entries stay)
    AGENT = "agent"  # about the session's external agent (a new agent session started)
    UNKNOWN = "unknown"  # a row this version cannot read (kept, shown as is)


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call as the model asked for it."""

    call_id: str
    name: str
    arguments: str  # JSON text, as the model produced it (possibly malformed)


@dataclass(frozen=True, slots=True)
class UserEntry:
    text: str
    created_at: str = field(default_factory=lambda: iso(now()))
    turn: int | None = None  # turns are numbered from 1 in the order of user messages
    images: tuple[ImageRef, ...] = ()  # sent with the text (the image store keeps them)


@dataclass(frozen=True, slots=True)
class AssistantEntry:
    text: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    created_at: str = field(default_factory=lambda: iso(now()))
    thought: str = ""  # the model's reasoning, where the provider streams it
    thought_signature: str = ""  # kept to send the thought back (Anthropic requires it)


@dataclass(frozen=True, slots=True)
class ToolResultEntry:
    call_id: str
    tool: str
    content: str  # what the model is told
    exit_code: int | None = None  # commands only; None when stopped or not run
    truncated: bool = False
    created_at: str = field(default_factory=lambda: iso(now()))
    # Whether the call succeeded (None: rows from before this was kept; a command's exit
    # status says it).
    ok: bool | None = None

    @property
    def succeeded(self) -> bool:
        return self.ok if self.ok is not None else self.exit_code == 0


Skip = tuple[int, int]  # transcript indexes [start, end) left out of the provider context


@dataclass(frozen=True, slots=True)
class MarkerEntry:
    kind: MarkerKind
    text: str
    context_from: int | None = None  # compaction, rewind: where the context starts
    created_at: str = field(default_factory=lambda: iso(now()))
    # Compaction and rewind markers define the provider context when the record points at
    # them: the entries from `context_from` on, less `skips` (rewound turns), after the
    # summary (a compaction's own text; a rewind's `summary_index` marker's).
    summary_index: int | None = None
    skips: tuple[Skip, ...] = ()
    # The marker that defined the context before this one (None: the whole transcript), so
    # a rewind can find the context as it was when an earlier turn began.
    previous: int | None = None


Entry = UserEntry | AssistantEntry | ToolResultEntry | MarkerEntry

INTERRUPTED_TEXT: Final = "[turn interrupted: the sidecar stopped before this turn finished]"


CANCELLED_TEXT: Final = "[turn cancelled by the user]"


def cancelled_marker() -> MarkerEntry:
    return MarkerEntry(MarkerKind.CANCELLED, CANCELLED_TEXT)


def interrupted_marker() -> MarkerEntry:
    # No time: whoever reconciles does not know when the turn was cut off.
    return MarkerEntry(MarkerKind.INTERRUPTED, INTERRUPTED_TEXT, created_at="")


# ---- rows ------------------------------------------------------------------------------
# Rows are Chat-Completions-like dicts: {role, content, tool_calls?, tool_call_id?, name?,
# exitCode?, truncated?, kind?, contextFrom?, summaryIndex?, skips?, previous?, createdAt}. Only this module reads or writes
# them.


def to_row(entry: Entry) -> dict[str, Any]:
    if isinstance(entry, UserEntry):
        row: dict[str, Any] = {"role": "user", "content": entry.text}
        if entry.turn is not None:
            row["turn"] = entry.turn
        if entry.images:
            row["images"] = [image.to_json() for image in entry.images]
        row["createdAt"] = entry.created_at
        return row
    if isinstance(entry, AssistantEntry):
        row = {"role": "assistant", "content": entry.text}
        if entry.thought:
            row["reasoning_content"] = entry.thought
        if entry.thought_signature:
            row["reasoning_signature"] = entry.thought_signature
        if entry.tool_calls:
            row["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in entry.tool_calls
            ]
        row["createdAt"] = entry.created_at
        return row
    if isinstance(entry, ToolResultEntry):
        return {
            "role": "tool",
            "tool_call_id": entry.call_id,
            "name": entry.tool,
            "content": entry.content,
            "exitCode": entry.exit_code,
            "truncated": entry.truncated,
            "createdAt": entry.created_at,
            **({} if entry.ok is None else {"ok": entry.ok}),
        }
    marker: dict[str, Any] = {"role": "system", "kind": entry.kind.value, "content": entry.text}
    if entry.context_from is not None:
        marker["contextFrom"] = entry.context_from
    if entry.summary_index is not None:
        marker["summaryIndex"] = entry.summary_index
    if entry.skips:
        marker["skips"] = [list(skip) for skip in entry.skips]
    if entry.previous is not None:
        marker["previous"] = entry.previous
    if entry.created_at:
        marker["createdAt"] = entry.created_at
    return marker


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _calls(raw: Any) -> tuple[ToolCallRequest, ...]:
    calls: list[ToolCallRequest] = []
    for call in raw if isinstance(raw, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        calls.append(
            ToolCallRequest(
                _text(call.get("id")), _text(function.get("name")), _text(function.get("arguments"))
            )
        )
    return tuple(calls)


def _index(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _skips(raw: Any) -> tuple[Skip, ...]:
    found: list[Skip] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, list) and len(item) == 2:
            start, end = _index(item[0]), _index(item[1])
            if start is not None and end is not None and start < end:
                found.append((start, end))
    return tuple(found)


def from_row(row: Mapping[str, Any]) -> Entry:
    """Any stored row as an entry; one this version cannot read becomes an UNKNOWN marker
    (shown, never sent to the model) instead of breaking the whole transcript."""
    role = row.get("role")
    created = _text(row.get("createdAt"))
    content = _text(row.get("content"))
    kind = row.get("kind")
    if kind:
        try:
            marker_kind = MarkerKind(kind)
        except ValueError:
            marker_kind = MarkerKind.UNKNOWN
        return MarkerEntry(
            marker_kind,
            content,
            _index(row.get("contextFrom")),
            created,
            _index(row.get("summaryIndex")),
            _skips(row.get("skips")),
            _index(row.get("previous")),
        )
    if role == "user":
        turn = row.get("turn")
        return UserEntry(
            content, created, turn if type(turn) is int else None, _images(row.get("images"))
        )
    if role == "assistant":
        return AssistantEntry(
            content,
            _calls(row.get("tool_calls")),
            created,
            _text(row.get("reasoning_content")),
            _text(row.get("reasoning_signature")),
        )
    if role == "tool":
        exit_code = row.get("exitCode")
        return ToolResultEntry(
            _text(row.get("tool_call_id")),
            _text(row.get("name")),
            content,
            exit_code if type(exit_code) is int else None,
            bool(row.get("truncated")),
            created,
            row["ok"] if type(row.get("ok")) is bool else None,
        )
    return MarkerEntry(
        MarkerKind.UNKNOWN, content or json.dumps(dict(row), default=str), None, created
    )


def _images(raw: Any) -> tuple[ImageRef, ...]:
    if not isinstance(raw, list):
        return ()
    found = (ImageRef.from_json(item) for item in raw if isinstance(item, Mapping))
    return tuple(image for image in found if image is not None)
