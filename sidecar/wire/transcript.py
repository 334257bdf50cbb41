"""Transcript entries as the wire's `TranscriptEntry` (`protocol.models`): what
`_session/messages`, `GET /agent/messages` and every client read.
"""

from __future__ import annotations

import json
from typing import Any

from sidecar.domain.events import ToolKind
from sidecar.domain.tools import FILE_TOOL_TITLES, UPDATE_PLAN, kind_of
from sidecar.domain.transcript import (
    AssistantEntry,
    Entry,
    MarkerEntry,
    ToolCallRequest,
    ToolResultEntry,
    UserEntry,
)


def tool_input(call: ToolCallRequest) -> dict[str, Any]:
    """The call's arguments as an object; text that is not a JSON object is kept whole."""
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError:
        return {"_raw": call.arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": call.arguments}


def tool_title(call: ToolCallRequest, arguments: dict[str, Any]) -> str:
    command = arguments.get("command")
    if isinstance(command, str) and command:
        return command
    path = arguments.get("path")
    if call.name in FILE_TOOL_TITLES and isinstance(path, str):
        return f"{FILE_TOOL_TITLES[call.name]} {path}"
    if call.name == UPDATE_PLAN:
        return "Update plan"
    return call.name or "tool"


def tool_kind(name: str) -> ToolKind:
    """How a stored call is presented again (MCP tools' kinds are not stored: other)."""
    return kind_of(name)


def entry(index: int, item: Entry) -> dict[str, Any]:
    if isinstance(item, UserEntry):
        return {
            "index": index,
            "type": "user",
            "turn": item.turn,
            "text": item.text,
            "images": [image.to_json() for image in item.images],
            "createdAt": item.created_at,
        }
    if isinstance(item, AssistantEntry):
        calls = []
        for call in item.tool_calls:
            arguments = tool_input(call)
            calls.append(
                {
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "title": tool_title(call, arguments),
                    "input": arguments,
                }
            )
        shaped: dict[str, Any] = {
            "index": index,
            "type": "assistant",
            "text": item.text,
            "toolCalls": calls,
            "createdAt": item.created_at,
        }
        if item.thought:  # the model's reasoning, where the provider streamed it
            shaped["thought"] = item.thought
        return shaped
    if isinstance(item, ToolResultEntry):
        return {
            "index": index,
            "type": "tool_result",
            "toolCallId": item.call_id,
            "tool": item.tool,
            "text": item.content,
            "exitCode": item.exit_code,
            "truncated": item.truncated,
            "ok": item.succeeded,
            "createdAt": item.created_at,
        }
    assert isinstance(item, MarkerEntry)
    return {
        "index": index,
        "type": "marker",
        "kind": item.kind.value,
        "text": item.text,
        "createdAt": item.created_at,
    }


def page(entries: list[tuple[int, Entry]], total: int) -> dict[str, Any]:
    return {"messages": [entry(index, item) for index, item in entries], "total": total}
