"""Domain events and stored transcripts -> ACP notifications.

Built with `acp.schema` models so every update we send is one the official SDK
accepts. Streamed command output rides in `_meta.output` of a tool_call_update (ACP's
`content` replaces, it does not append); the final update carries the whole result as
content. The SDK is imported where an update is built, not at module level, so the
sidecar's first requests (which send none of these) are answered before ACP's schema
has loaded (sidecar/app.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from protocol.methods import Method
from sidecar.acp import preload
from sidecar.acp.session_config import config_options
from sidecar.core.events import Event
from sidecar.domain.events import (
    Compacted,
    InstructionsChanged,
    McpServersChanged,
    Origin,
    PermissionAsked,
    PermissionSettled,
    StateChanged,
    TurnEnded,
)
from sidecar.domain.files import FileDiff, Location
from sidecar.domain.plans import UPDATE_PLAN, PlanError, parse_plan
from sidecar.domain.transcript import (
    AssistantEntry,
    Entry,
    MarkerEntry,
    ToolResultEntry,
    UserEntry,
)
from sidecar.wire.events import (
    AgentText,
    Changes,
    Commands,
    Compaction,
    ModeSet,
    PlanShown,
    QueueShown,
    Settings,
    State,
    Title,
    ToolStart,
    ToolUpdate,
    TurnEnd,
    Usage,
    UserText,
    ViewOf,
    WireEvent,
    command_list,
    plan_entries,
    translate,
)
from sidecar.wire.transcript import tool_input, tool_kind, tool_title

if TYPE_CHECKING:
    from acp.schema import ToolCallLocation

Notification = tuple[str, dict[str, Any]]


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
STATE_EVENTS = (
    StateChanged,
    PermissionAsked,
    PermissionSettled,
    McpServersChanged,
    InstructionsChanged,
)


# The events no ACP notification says (the turn's end: the prompt's answer does; a
# compaction: the compact request's answer does): `to_acp` gives None for each.
SILENT_EVENTS = (TurnEnded, Compacted)


def _chunk(session_id: str, kind: str, text: str) -> Notification:
    """What `session_update(session_id, update_agent_message_text(text))` (or the thought
    variant) dumps to, built directly: a turn streams many of these
    (tests/test_acp_interop.py checks the SDK's models parse it unchanged)."""
    update = {"content": {"text": text, "type": "text"}, "sessionUpdate": kind}
    return Method.SESSION_UPDATE, {"sessionId": session_id, "update": update}


def event_notification(event: Event, view_of: ViewOf) -> Notification | None:
    """The notification a numbered event becomes, or None (turn ends: the prompt's answer
    says it; compactions: the compact request's answer). What to say is decided once, by
    `wire.events.translate` (the SSE edge serialises the same values); this is how ACP
    says it."""
    return to_acp(event.session_id, translate(event.body, view_of))


def to_acp(session_id: str, value: WireEvent) -> Notification | None:
    """A translated event as an ACP notification (None: ACP has none for it)."""
    if isinstance(value, AgentText):
        return _chunk(session_id, value.kind, value.text)
    if isinstance(value, State):
        return Method.STATE, value.summary
    if isinstance(value, QueueShown):
        return Method.QUEUE_UPDATE, {"sessionId": session_id, **value.body}
    if isinstance(value, Usage):
        usage = {"used": value.used, "size": value.size, "sessionUpdate": "usage_update"}
        return Method.SESSION_UPDATE, {"sessionId": session_id, "update": usage}
    if isinstance(value, Changes):
        return Method.TURN_CHANGES, {"sessionId": session_id, **value.body}
    if isinstance(value, Compaction | TurnEnd):
        return None
    if isinstance(value, PlanShown):
        plan = {"sessionUpdate": "plan", "entries": plan_entries(value)}
        return Method.SESSION_UPDATE, {"sessionId": session_id, "update": plan}
    if isinstance(value, Settings):
        options = {
            "sessionUpdate": "config_option_update",
            "configOptions": config_options(value.view, ()),
        }
        return Method.SESSION_UPDATE, {"sessionId": session_id, "update": options}
    if isinstance(value, Commands):
        commands = {
            "sessionUpdate": "available_commands_update",
            "availableCommands": command_list(value),
        }
        return Method.SESSION_UPDATE, {"sessionId": session_id, "update": commands}
    if isinstance(value, UserText) and value.origin is Origin.ACP:
        return None  # the ACP client sent it; echoing it back makes clients show it twice
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

    if isinstance(value, UserText):
        return session_update(session_id, update_user_message_text(value.text))
    if isinstance(value, Title):
        return session_update(
            session_id,
            SessionInfoUpdate(
                session_update="session_info_update",
                title=value.title,
                updated_at=value.updated_at,
            ),
        )
    if isinstance(value, ToolStart):
        return session_update(
            session_id,
            start_tool_call(
                value.call_id,
                value.title,
                kind=value.kind.value,
                status=value.status,
                content=_diffs(value.diffs) or None,
                locations=_locations(value.locations),
                raw_input=dict(value.raw_input),
            ),
        )
    if isinstance(value, ToolUpdate):
        if value.finished:
            assert value.content is not None
            content: list[Any] = [*_diffs(value.diffs), tool_content(text_block(value.content))]
            content += [tool_content(image_block(data, mime)) for mime, data in value.images]
            return session_update(
                session_id,
                update_tool_call(
                    value.call_id,
                    status=value.status,
                    content=content,
                    raw_output={"exitCode": value.exit_code, "cancelled": value.cancelled},
                ),
            )
        if value.output is not None:
            update = update_tool_call(value.call_id)
            update.field_meta = {"output": value.output}
            return session_update(session_id, update)
        return session_update(session_id, update_tool_call(value.call_id, status=value.status))
    assert isinstance(value, ModeSet)
    return session_update(session_id, update_current_mode(value.mode_id))


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

    plans: dict[str, PlanShown] = {}  # update_plan calls seen, by id: shown once they succeed
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
                if call.name == UPDATE_PLAN:
                    shown = _stored_plan(call.arguments)
                    if shown is not None:
                        plans[call.call_id] = shown
                        arguments = {"entries": len(shown.entries)}  # as it was shown live
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
            shown = plans.pop(item.call_id, None)
            if shown is not None and item.succeeded:
                # The plan as the call set it: the last one replayed is the current plan.
                plan = {"sessionUpdate": "plan", "entries": plan_entries(shown)}
                yield Method.SESSION_UPDATE, {"sessionId": session_id, "update": plan}
        elif isinstance(item, MarkerEntry) and item.text:
            # Markers (interrupted, compaction): shown as agent text so every client sees them.
            yield session_update(session_id, update_agent_message_text(item.text))


def _stored_plan(arguments: str) -> PlanShown | None:
    """A stored update_plan call's plan, read as the tool read it (None: it was refused)."""
    try:
        items = parse_plan(arguments).items
    except PlanError:
        return None
    return PlanShown(tuple((i.content, i.priority, i.status) for i in items))
