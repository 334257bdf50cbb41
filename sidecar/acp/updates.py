"""Domain events and stored transcripts -> ACP notifications.

Built with `acp.schema` models so every update we send is one the official SDK
accepts. Streamed command output rides in `_meta.output` of a tool_call_update (ACP's
`content` replaces, it does not append); the final update carries the whole result as
content. The SDK is imported where an update is built, not at module level, so the
sidecar's first requests (which send none of these) are answered before ACP's schema
has loaded (sidecar/app.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from protocol.methods import Method
from sidecar.acp import preload
from sidecar.core.events import Event
from sidecar.core.views import SessionView
from sidecar.domain.events import (
    AgentTextChunk,
    AgentThoughtChunk,
    McpServersChanged,
    ModeChanged,
    Origin,
    PermissionAsked,
    PermissionSettled,
    StateChanged,
    TitleChanged,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolOutputChunk,
    UsageUpdated,
    UserMessageAdded,
)
from sidecar.domain.files import FileDiff, Location, TurnChanges
from sidecar.domain.records import SessionRecord, iso
from sidecar.domain.transcript import (
    AssistantEntry,
    Entry,
    MarkerEntry,
    ToolResultEntry,
    UserEntry,
)
from sidecar.wire.changes import changes_body
from sidecar.wire.summary import summary
from sidecar.wire.transcript import tool_input, tool_kind, tool_title

if TYPE_CHECKING:
    from acp.schema import ToolCallLocation

Notification = tuple[str, dict[str, Any]]
ViewOf = Callable[[SessionRecord], SessionView]


def session_update(session_id: str, update: Any) -> Notification:
    preload.ACP.ensure()
    from acp.schema import SessionNotification

    notification = SessionNotification(session_id=session_id, update=update)
    return Method.SESSION_UPDATE, notification.model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )


def _diffs(diffs: Iterable[FileDiff]) -> list[Any]:
    preload.ACP.ensure()
    from acp.helpers import tool_diff_content

    return [tool_diff_content(d.path, d.new_text, d.old_text) for d in diffs]


def _locations(locations: Iterable[Location]) -> list[ToolCallLocation] | None:
    preload.ACP.ensure()
    from acp.schema import ToolCallLocation

    found = [ToolCallLocation(path=where.path, line=where.line) for where in locations]
    return found or None


# The events that become our `_session/state` extension notification (and nothing else).
STATE_EVENTS = (StateChanged, PermissionAsked, PermissionSettled, McpServersChanged)


def _chunk(session_id: str, kind: str, text: str) -> Notification:
    """What `session_update(session_id, update_agent_message_text(text))` (or the thought
    variant) dumps to, built directly: a turn streams many of these
    (tests/test_acp_interop.py checks the SDK's models parse it unchanged)."""
    update = {"content": {"text": text, "type": "text"}, "sessionUpdate": kind}
    return Method.SESSION_UPDATE, {"sessionId": session_id, "update": update}


def event_notification(event: Event, view_of: ViewOf) -> Notification | None:
    """The notification a numbered event becomes, or None (turn ends: the prompt's answer
    says it; compactions: the compact request's answer)."""
    session_id, body = event.session_id, event.body
    if isinstance(body, AgentTextChunk):
        return _chunk(session_id, "agent_message_chunk", body.text)
    if isinstance(body, STATE_EVENTS):
        return Method.STATE, summary(view_of(body.record))
    if isinstance(body, AgentThoughtChunk):
        return _chunk(session_id, "agent_thought_chunk", body.text)
    if isinstance(body, UsageUpdated):
        usage = {"used": body.used, "size": body.size, "sessionUpdate": "usage_update"}
        return Method.SESSION_UPDATE, {"sessionId": session_id, "update": usage}
    if isinstance(body, TurnChanges):
        return Method.TURN_CHANGES, {"sessionId": session_id, **changes_body(body)}
    # The rest are built with ACP's SDK (imported here, not at start: see the module's doc).
    preload.ACP.ensure()
    from acp.helpers import (
        image_block,
        start_tool_call,
        text_block,
        tool_content,
        update_current_mode,
        update_tool_call,
        update_user_message_text,
    )
    from acp.schema import SessionInfoUpdate

    if isinstance(body, UserMessageAdded):
        if body.origin is Origin.ACP:
            return None  # the ACP client sent it; echoing it back makes clients show it twice
        return session_update(session_id, update_user_message_text(body.text))
    if isinstance(body, TitleChanged):
        return session_update(
            session_id,
            SessionInfoUpdate(
                session_update="session_info_update",
                title=body.title,
                updated_at=iso(body.updated_at),
            ),
        )
    if isinstance(body, ToolCallStarted):
        return session_update(
            session_id,
            start_tool_call(
                body.call_id,
                body.title,
                kind=body.kind.value,
                status="pending",
                content=_diffs(body.diffs) or None,
                locations=_locations(body.locations),
                raw_input=dict(body.raw_input),
            ),
        )
    if isinstance(body, ToolCallRunning):
        return session_update(session_id, update_tool_call(body.call_id, status="in_progress"))
    if isinstance(body, ToolOutputChunk):
        update = update_tool_call(body.call_id)
        update.field_meta = {"output": body.text}
        return session_update(session_id, update)
    if isinstance(body, ToolCallFinished):
        content: list[Any] = [*_diffs(body.diffs), tool_content(text_block(body.content))]
        content += [tool_content(image_block(data, mime)) for mime, data in body.images]
        return session_update(
            session_id,
            update_tool_call(
                body.call_id,
                status="completed" if body.ok else "failed",
                content=content,
                raw_output={"exitCode": body.exit_code, "cancelled": body.cancelled},
            ),
        )
    if isinstance(body, ModeChanged):
        return session_update(session_id, update_current_mode(body.mode.value))
    return None


def replay_notifications(session_id: str, entries: Iterable[Entry]) -> Iterator[Notification]:
    """A stored transcript as the updates a client would have seen live (session/load)."""
    preload.ACP.ensure()
    from acp.helpers import (
        start_tool_call,
        text_block,
        tool_content,
        update_agent_message_text,
        update_agent_thought_text,
        update_tool_call,
        update_user_message_text,
    )

    for item in entries:
        if isinstance(item, UserEntry):
            yield session_update(session_id, update_user_message_text(item.text))
        elif isinstance(item, AssistantEntry):
            if item.thought:
                yield session_update(session_id, update_agent_thought_text(item.thought))
            if item.text:
                yield session_update(session_id, update_agent_message_text(item.text))
            for call in item.tool_calls:
                arguments = tool_input(call)
                yield session_update(
                    session_id,
                    start_tool_call(
                        call.call_id,
                        tool_title(call, arguments),
                        kind=tool_kind(call.name).value,
                        status="pending",
                        raw_input=arguments,
                    ),
                )
        elif isinstance(item, ToolResultEntry):
            yield session_update(
                session_id,
                update_tool_call(
                    item.call_id,
                    status="completed" if item.succeeded else "failed",
                    content=[tool_content(text_block(item.content))],
                    raw_output={"exitCode": item.exit_code},
                ),
            )
        elif isinstance(item, MarkerEntry) and item.text:
            # Markers (interrupted, compaction): shown as agent text so every client sees them.
            yield session_update(session_id, update_agent_message_text(item.text))
