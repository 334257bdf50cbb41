"""Runtime events and stored transcripts -> ACP `session/update` notifications.

Built with `acp.schema` models so every update we send is one the official SDK
accepts. Streamed command output rides in `_meta.output` of a tool_call_update
(ACP's `content` replaces, it does not append); the final update carries the
whole result as content.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_current_mode,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import SessionNotification

from protocol.methods import Method
from sidecar import events
from sidecar.events import Event

Notification = tuple[str, dict[str, Any]]


def _session_update(session_id: str, update: Any) -> Notification:
    notification = SessionNotification(session_id=session_id, update=update)
    return Method.SESSION_UPDATE, notification.model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )


def event_notification(session_id: str, event: Event) -> Notification | None:
    data = event.data
    if event.type == events.STATE:
        return Method.STATE, dict(data)
    if event.type == events.USER_MESSAGE:
        if data.get("origin") == "acp":
            return None  # the ACP client sent it; echoing it back makes clients show it twice
        return _session_update(session_id, update_user_message_text(data["text"]))
    if event.type == events.AGENT_MESSAGE_CHUNK:
        return _session_update(session_id, update_agent_message_text(data["text"]))
    if event.type == events.TOOL_CALL:
        return _session_update(
            session_id,
            start_tool_call(
                data["toolCallId"],
                data["title"],
                kind="execute",
                status="pending",
                raw_input={"command": data["command"]},
            ),
        )
    if event.type == events.TOOL_CALL_UPDATE:
        return _session_update(session_id, _tool_update(data))
    if event.type == events.MODE:
        return _session_update(session_id, update_current_mode(data["modeId"]))
    return None  # turn_end: the prompt response says it


def _tool_update(data: dict[str, Any]) -> Any:
    if "output" in data:
        update = update_tool_call(data["toolCallId"])
        update.field_meta = {"output": data["output"]}
        return update
    if "content" in data:
        return update_tool_call(
            data["toolCallId"],
            status=data["status"],
            content=[tool_content(text_block(data["content"]))],
            raw_output={"exitCode": data.get("exitCode"), "cancelled": data.get("cancelled")},
        )
    return update_tool_call(data["toolCallId"], status=data["status"])


def replay_notifications(
    session_id: str, messages: Iterable[dict[str, Any]]
) -> Iterator[Notification]:
    """A stored transcript as the updates a client would have seen live (session/load)."""
    for message in messages:
        role = message.get("role")
        content = str(message.get("content") or "")
        if role == "user":
            yield _session_update(session_id, update_user_message_text(content))
        elif role == "assistant":
            if content:
                yield _session_update(session_id, update_agent_message_text(content))
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                try:
                    raw_input = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    raw_input = {"arguments": function.get("arguments")}
                title = raw_input.get("command") if isinstance(raw_input, dict) else None
                yield _session_update(
                    session_id,
                    start_tool_call(
                        call.get("id", ""),
                        str(title or function.get("name") or "tool"),
                        kind="execute",
                        status="pending",
                        raw_input=raw_input,
                    ),
                )
        elif role == "tool":
            ok = message.get("exitCode") == 0
            yield _session_update(
                session_id,
                update_tool_call(
                    str(message.get("tool_call_id", "")),
                    status="completed" if ok else "failed",
                    content=[tool_content(text_block(content))],
                    raw_output={"exitCode": message.get("exitCode")},
                ),
            )
        elif content:
            # Markers (interrupted, cancelled): shown as agent text so every client sees them.
            yield _session_update(session_id, update_agent_message_text(content))
