"""Session events -> wire-neutral typed values, the one translation both edges serialise.

`translate` decides, once, what every edge says about a domain event: its kind name
(`agent_message_chunk`, `tool_call_update`, ...), a tool call's status, the summary a
state change carries, times as ISO text. `sse_event` serialises a value as a Server-Sent
Event (its names and data keys are the HTTP contract: `protocol/openapi.json`,
`/agent/events`); `sidecar/acp/updates.py` serialises the same values as ACP
notifications (with ACP's SDK: this module imports none of it, so it stays light).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sidecar.core.views import SessionView
from sidecar.domain.events import (
    AgentOptionsChanged,
    AgentTextChunk,
    AgentThoughtChunk,
    CommandsAvailable,
    Compacted,
    InstructionsChanged,
    McpServersChanged,
    ModeChanged,
    Origin,
    PermissionAsked,
    PermissionSettled,
    PlanUpdated,
    QueueChanged,
    SessionEvent,
    SettingsChanged,
    StateChanged,
    TitleChanged,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolKind,
    ToolOutputChunk,
    TurnEnded,
    UsageUpdated,
    UserMessageAdded,
)
from sidecar.domain.files import FileDiff, Location, TurnChanges
from sidecar.domain.queue import PromptQueue
from sidecar.domain.records import SessionRecord, iso
from sidecar.wire.changes import changes_body
from sidecar.wire.summary import summary

ViewOf = Callable[[SessionRecord], SessionView]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class State:
    """The session's summary changed (state, consent, MCP servers): its new summary.
    `permission` says when consent was asked ("asked") or settled ("settled")."""

    summary: dict[str, Any]
    permission: Literal["asked", "settled"] | None = None
    call_id: str | None = None
    title: str | None = None
    since: str | None = None


@dataclass(frozen=True, slots=True)
class UserText:
    text: str
    origin: Origin


@dataclass(frozen=True, slots=True)
class AgentText:
    kind: Literal["agent_message_chunk", "agent_thought_chunk"]
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    used: int
    size: int


@dataclass(frozen=True, slots=True)
class Title:
    title: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class ToolStart:
    call_id: str
    title: str
    kind: ToolKind
    raw_input: Mapping[str, Any]
    locations: tuple[Location, ...]
    diffs: tuple[FileDiff, ...]
    status: ToolStatus = "pending"


@dataclass(frozen=True, slots=True)
class ToolUpdate:
    """A tool call's progress: running (`status` only), a chunk of output (`output`
    only), or its end (status, the whole result, exit code, images, diffs)."""

    call_id: str
    status: ToolStatus | None = None
    output: str | None = None
    content: str | None = None
    exit_code: int | None = None
    cancelled: bool = False
    images: tuple[tuple[str, str], ...] = ()
    diffs: tuple[FileDiff, ...] = ()

    @property
    def finished(self) -> bool:
        return self.content is not None


@dataclass(frozen=True, slots=True)
class ModeSet:
    mode_id: str


@dataclass(frozen=True, slots=True)
class Changes:
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Compaction:
    summary_index: int
    context_from: int
    context_chars: int


@dataclass(frozen=True, slots=True)
class PlanShown:
    """The agent's plan, whole: (content, priority, status) per entry."""

    entries: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class Commands:
    """The slash commands the agent offers: (name, description) pairs."""

    commands: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Settings:
    """The session's config options changed (its external agent's own settings)."""

    view: SessionView


@dataclass(frozen=True, slots=True)
class TurnEnd:
    stop_reason: str | None  # None: the turn failed (see error)
    error: str | None


@dataclass(frozen=True, slots=True)
class QueueShown:
    """The session's waiting messages, whole (`_session/queue_update`, SSE `queue`)."""

    body: dict[str, Any]


WireEvent = (
    State
    | QueueShown
    | UserText
    | AgentText
    | Usage
    | Title
    | ToolStart
    | ToolUpdate
    | ModeSet
    | Changes
    | Compaction
    | PlanShown
    | Commands
    | Settings
    | TurnEnd
)


def translate(body: SessionEvent, view_of: ViewOf) -> WireEvent:
    """The one mapping from a domain event to what the edges say about it."""
    if isinstance(body, AgentTextChunk):
        return AgentText("agent_message_chunk", body.text)
    if isinstance(body, StateChanged | McpServersChanged | InstructionsChanged):
        return State(summary(view_of(body.record)))
    if isinstance(body, PermissionAsked):
        return State(
            summary(view_of(body.record)), "asked", body.call_id, body.title, iso(body.since)
        )
    if isinstance(body, PermissionSettled):
        return State(summary(view_of(body.record)), "settled", body.call_id)
    if isinstance(body, AgentThoughtChunk):
        return AgentText("agent_thought_chunk", body.text)
    if isinstance(body, UsageUpdated):
        return Usage(body.used, body.size)
    if isinstance(body, TurnChanges):
        return Changes(changes_body(body))
    if isinstance(body, UserMessageAdded):
        return UserText(body.text, body.origin)
    if isinstance(body, TitleChanged):
        return Title(body.title, iso(body.updated_at))
    if isinstance(body, ToolCallStarted):
        return ToolStart(
            body.call_id, body.title, body.kind, body.raw_input, body.locations, body.diffs
        )
    if isinstance(body, ToolCallRunning):
        return ToolUpdate(body.call_id, status="in_progress")
    if isinstance(body, ToolOutputChunk):
        return ToolUpdate(body.call_id, output=body.text)
    if isinstance(body, ToolCallFinished):
        return ToolUpdate(
            body.call_id,
            status="completed" if body.ok else "failed",
            content=body.content,
            exit_code=body.exit_code,
            cancelled=body.cancelled,
            images=body.images,
            diffs=body.diffs,
        )
    if isinstance(body, ModeChanged):
        return ModeSet(body.mode.value)
    if isinstance(body, Compacted):
        return Compaction(body.summary_index, body.context_from, body.context_chars)
    if isinstance(body, PlanUpdated):
        return PlanShown(tuple((i.content, i.priority, i.status) for i in body.items))
    if isinstance(body, CommandsAvailable):
        return Commands(body.commands)
    if isinstance(body, SettingsChanged):
        return Settings(view_of(body.record))
    if isinstance(body, QueueChanged):
        return QueueShown(queue_body(body.queue))
    if isinstance(body, AgentOptionsChanged):  # the host sends SettingsChanged instead
        raise TypeError("AgentOptionsChanged is an engine's event, not the edges'")
    assert isinstance(body, TurnEnded)
    if body.stop_reason is None:
        return TurnEnd(None, body.error)
    return TurnEnd(body.stop_reason.value, None)


def queue_body(queue: PromptQueue) -> dict[str, Any]:
    """The queue as every edge shows it: its items in order, whether it is paused, and
    the message its turn refused (what paused it), if one did."""
    refused = queue.refused
    return {
        "queue": [
            {"id": i.id, "prompt": list(i.prompt), "createdAt": i.created_at} for i in queue.items
        ],
        "paused": queue.paused,
        "refused": None if refused is None else {"id": refused.item_id, "reason": refused.reason},
    }


def plan_entries(value: PlanShown) -> list[dict[str, str]]:
    """A plan's entries in ACP's (and the SSE stream's) shape."""
    return [
        {"content": content, "priority": priority, "status": status}
        for content, priority, status in value.entries
    ]


def agent_option_list(view: SessionView) -> list[dict[str, Any]]:
    """The external agent's own settings, as the SSE stream names them."""
    return [
        {
            "id": option.option_id,
            "name": option.name,
            "currentValue": option.current,
            "options": [{"value": value, "name": name} for value, name in option.choices],
        }
        for option in view.agent_options
    ]


def command_list(value: Commands) -> list[dict[str, str]]:
    return [{"name": name, "description": description} for name, description in value.commands]


def _diff(diff: FileDiff) -> dict[str, Any]:
    return {"path": diff.path, "oldText": diff.old_text, "newText": diff.new_text}


def _tool_update(value: ToolUpdate) -> dict[str, Any]:
    if value.finished:
        return {
            "toolCallId": value.call_id,
            "status": value.status,
            "exitCode": value.exit_code,
            "cancelled": value.cancelled,
            "content": value.content,
        }
    if value.output is not None:
        return {"toolCallId": value.call_id, "output": value.output}
    return {"toolCallId": value.call_id, "status": value.status}


def to_sse(value: WireEvent) -> tuple[str, dict[str, Any]]:
    """A translated event as (SSE event name, JSON data)."""
    if isinstance(value, State):
        if value.permission == "asked":
            return "permission_request", {
                "toolCallId": value.call_id,
                "title": value.title,
                "since": value.since,
            }
        if value.permission == "settled":
            return "permission_settled", {"toolCallId": value.call_id}
        return "state", value.summary
    if isinstance(value, UserText):
        return "user_message", {"text": value.text, "origin": value.origin.value}
    if isinstance(value, AgentText):
        return value.kind, {"text": value.text}
    if isinstance(value, Usage):
        return "usage_update", {"used": value.used, "size": value.size}
    if isinstance(value, Title):
        return "session_info_update", {"title": value.title, "updatedAt": value.updated_at}
    if isinstance(value, ToolStart):
        return "tool_call", {
            "toolCallId": value.call_id,
            "title": value.title,
            "kind": value.kind.value,
            "status": value.status,
            "command": value.raw_input.get("command"),
            "locations": [{"path": w.path, "line": w.line} for w in value.locations],
            "diffs": [_diff(d) for d in value.diffs],
        }
    if isinstance(value, ToolUpdate):
        return "tool_call_update", _tool_update(value)
    if isinstance(value, Changes):
        return "turn_changes", value.body
    if isinstance(value, ModeSet):
        return "current_mode_update", {"modeId": value.mode_id}
    if isinstance(value, Compaction):
        return "compaction", {
            "compacted": True,
            "summaryIndex": value.summary_index,
            "contextFrom": value.context_from,
            "contextChars": value.context_chars,
        }
    if isinstance(value, PlanShown):
        return "plan", {"entries": plan_entries(value)}
    if isinstance(value, Commands):
        return "available_commands_update", {"availableCommands": command_list(value)}
    if isinstance(value, Settings):
        return "agent_options", {"options": agent_option_list(value.view)}
    if isinstance(value, QueueShown):
        return "queue", value.body
    if value.stop_reason is None:
        return "turn_end", {"stopReason": "error", "error": value.error}
    return "turn_end", {"stopReason": value.stop_reason}


def sse_event(body: SessionEvent, view_of: ViewOf) -> tuple[str, dict[str, Any]]:
    return to_sse(translate(body, view_of))
