"""Session events as Server-Sent Events: (event name, JSON data) per numbered event.

The names and data keys are the HTTP contract (`protocol/openapi.json`, `/agent/events`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.core.views import SessionView
from sidecar.domain.events import (
    AgentTextChunk,
    AgentThoughtChunk,
    Compacted,
    McpServersChanged,
    ModeChanged,
    PermissionAsked,
    PermissionSettled,
    SessionEvent,
    StateChanged,
    TitleChanged,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolOutputChunk,
    TurnEnded,
    UsageUpdated,
    UserMessageAdded,
)
from sidecar.domain.files import TurnChanges
from sidecar.domain.records import SessionRecord, iso
from sidecar.wire.changes import changes_body
from sidecar.wire.summary import summary

ViewOf = Callable[[SessionRecord], SessionView]


def sse_event(body: SessionEvent, view_of: ViewOf) -> tuple[str, dict[str, Any]]:
    if isinstance(body, StateChanged | McpServersChanged):
        return "state", summary(view_of(body.record))
    if isinstance(body, PermissionAsked):
        return "permission_request", {
            "toolCallId": body.call_id,
            "title": body.title,
            "since": iso(body.since),
        }
    if isinstance(body, PermissionSettled):
        return "permission_settled", {"toolCallId": body.call_id}
    if isinstance(body, UserMessageAdded):
        return "user_message", {"text": body.text, "origin": body.origin.value}
    if isinstance(body, AgentTextChunk):
        return "agent_message_chunk", {"text": body.text}
    if isinstance(body, AgentThoughtChunk):
        return "agent_thought_chunk", {"text": body.text}
    if isinstance(body, UsageUpdated):
        return "usage_update", {"used": body.used, "size": body.size}
    if isinstance(body, TitleChanged):
        return "session_info_update", {"title": body.title, "updatedAt": iso(body.updated_at)}
    if isinstance(body, ToolCallStarted):
        return "tool_call", {
            "toolCallId": body.call_id,
            "title": body.title,
            "kind": body.kind.value,
            "status": "pending",
            "command": body.raw_input.get("command"),
            "locations": [{"path": w.path, "line": w.line} for w in body.locations],
            "diffs": [
                {"path": d.path, "oldText": d.old_text, "newText": d.new_text} for d in body.diffs
            ],
        }
    if isinstance(body, ToolCallRunning):
        return "tool_call_update", {"toolCallId": body.call_id, "status": "in_progress"}
    if isinstance(body, ToolOutputChunk):
        return "tool_call_update", {"toolCallId": body.call_id, "output": body.text}
    if isinstance(body, ToolCallFinished):
        return "tool_call_update", {
            "toolCallId": body.call_id,
            "status": "completed" if body.ok else "failed",
            "exitCode": body.exit_code,
            "cancelled": body.cancelled,
            "content": body.content,
        }
    if isinstance(body, TurnChanges):
        return "turn_changes", changes_body(body)
    if isinstance(body, ModeChanged):
        return "current_mode_update", {"modeId": body.mode.value}
    if isinstance(body, Compacted):
        return "compaction", {
            "compacted": True,
            "summaryIndex": body.summary_index,
            "contextFrom": body.context_from,
            "contextChars": body.context_chars,
        }
    assert isinstance(body, TurnEnded)
    if body.stop_reason is None:
        return "turn_end", {"stopReason": "error", "error": body.error}
    return "turn_end", {"stopReason": body.stop_reason.value}
