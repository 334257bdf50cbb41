"""An external agent's `session/update`s as our domain events and transcript entries.

The agent's output is untrusted: every value is read through the ACP SDK's models (the
connection validated them), texts are kept as text, and the transcript stays well formed
whatever the agent sends: a tool call it announces gets exactly one result row, the
turn's text is one assistant row before each tool call and one at the end, and a call it
never finishes is closed when the turn ends. Clients see exactly what our own engine
would have produced for the same work (`EngineEvent`s through `host.publish`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from acp import schema

from sidecar.agent.host import EngineHost
from sidecar.domain.events import (
    AgentTextChunk,
    AgentThoughtChunk,
    CommandsAvailable,
    PlanUpdated,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolKind,
    ToolOutputChunk,
    UsageUpdated,
)
from sidecar.domain.files import FileDiff, Location
from sidecar.domain.plans import relayed_plan
from sidecar.domain.transcript import AssistantEntry, ToolCallRequest, ToolResultEntry

log = logging.getLogger(__name__)

RAW_INPUT_CHARS: Final = 8192  # of a tool call's raw input kept in the transcript
UNFINISHED: Final = "No result: the agent did not finish this call before the turn ended."


@dataclass(slots=True)
class _Call:
    title: str
    kind: ToolKind
    running: bool = False
    output: list[str] = field(default_factory=list)


def _text_of(block: Any) -> str:
    """A content block as text: text as is, anything else named (images and resources
    are not shown as text)."""
    if isinstance(block, schema.TextContentBlock):
        return block.text
    if isinstance(block, schema.ResourceContentBlock):
        return f"[{block.name}]({block.uri})"
    kind = getattr(block, "type", "content")
    return f"[{kind}]"


def tool_kind(value: str | None) -> ToolKind:
    try:
        return ToolKind(value or "other")
    except ValueError:
        return ToolKind.OTHER


def _locations(items: Sequence[schema.ToolCallLocation] | None) -> tuple[Location, ...]:
    return tuple(Location(item.path, item.line) for item in items or ())


def _diffs(content: Sequence[Any] | None) -> tuple[FileDiff, ...]:
    return tuple(
        FileDiff(item.path, item.old_text, item.new_text)
        for item in content or ()
        if isinstance(item, schema.FileEditToolCallContent)
    )


def _texts(content: Sequence[Any] | None) -> list[str]:
    return [
        _text_of(item.content)
        for item in content or ()
        if isinstance(item, schema.ContentToolCallContent)
    ]


def _raw_input(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {} if value is None else {"input": value}


class Relay:
    """One session's updates, turn by turn. `replaying`: a `session/load`'s history is
    being sent again (it is in our transcript already): nothing is relayed."""

    def __init__(self, host: EngineHost, on_settings: Callable[[Any], None]) -> None:
        self._host = host
        self._on_settings = on_settings  # the agent's config options or mode changed
        self.replaying = False
        self._calls: dict[str, _Call] = {}
        self._text: list[str] = []
        self._thought: list[str] = []
        self.final_text = ""

    # ---- from the agent --------------------------------------------------------------

    async def update(self, update: Any) -> None:
        """One `session/update`, in the order the agent sent them."""
        if self.replaying:
            return
        host = self._host
        if isinstance(update, schema.AgentMessageChunk):
            text = _text_of(update.content)
            self._text.append(text)
            host.publish(AgentTextChunk(text))
        elif isinstance(update, schema.AgentThoughtChunk):
            text = _text_of(update.content)
            self._thought.append(text)
            host.publish(AgentThoughtChunk(text))
        elif isinstance(update, schema.ToolCallStart):
            await self._start(update)
        elif isinstance(update, schema.ToolCallProgress):
            await self._progress(update)
        elif isinstance(update, schema.AgentPlanUpdate):
            entries = [(e.content, str(e.priority), str(e.status)) for e in update.entries]
            host.publish(PlanUpdated(relayed_plan(entries)))  # bounded as the builtin's
        elif isinstance(update, schema.UsageUpdate):
            host.publish(UsageUpdated(update.used, update.size))
        elif isinstance(update, schema.AvailableCommandsUpdate):
            commands = tuple(
                (command.name, command.description) for command in update.available_commands
            )
            host.publish(CommandsAvailable(commands))
        elif isinstance(update, schema.ConfigOptionUpdate | schema.CurrentModeUpdate):
            self._on_settings(update)
        elif isinstance(update, schema.SessionInfoUpdate):
            if update.title:
                await host.propose_title(update.title)
        elif isinstance(update, schema.UserMessageChunk):
            pass  # our client's own prompt, told back: it is in the transcript already
        else:
            log.debug("agent update %s: not relayed", type(update).__name__)

    async def announce(self, call: schema.ToolCallUpdate) -> None:
        """A permission request for a call the agent never announced: announced here
        (the user must see what they are asked about; the transcript must hold it)."""
        if call.tool_call_id in self._calls:
            return
        start = schema.ToolCallStart(
            session_update="tool_call",
            tool_call_id=call.tool_call_id,
            title=call.title or "Unannounced tool call",
            kind=call.kind,
            content=call.content,
            locations=call.locations,
            raw_input=call.raw_input,
        )
        await self._start(start)

    def known(self, call_id: str) -> bool:
        return call_id in self._calls

    def call_title(self, call_id: str) -> str:
        call = self._calls.get(call_id)
        return call.title if call else call_id

    def call_kind(self, call_id: str) -> ToolKind:
        call = self._calls.get(call_id)
        return call.kind if call else ToolKind.OTHER

    def running_calls(self) -> list[str]:
        """Calls announced and not finished (a file write or command the agent asks us
        for belongs to one of them)."""
        return list(self._calls)

    async def _start(self, update: schema.ToolCallStart) -> None:
        call_id = update.tool_call_id
        if call_id in self._calls:
            await self._progress(
                schema.ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=call_id,
                    status=update.status,
                    content=update.content,
                )
            )
            return
        kind = tool_kind(update.kind)
        raw_input = _raw_input(update.raw_input)
        self._calls[call_id] = _Call(update.title, kind)
        arguments = json.dumps(raw_input, ensure_ascii=False, default=str)[:RAW_INPUT_CHARS]
        # The text so far, and the call, as one assistant row (as our own loop writes them).
        entry = AssistantEntry(
            self._take_text(),
            (ToolCallRequest(call_id, kind.value, arguments),),
            thought=self._take_thought(),
        )
        await self._host.record(entry)
        self._host.publish(
            ToolCallStarted(
                call_id,
                kind.value,
                update.title,
                kind,
                raw_input,
                _locations(update.locations),
                _diffs(update.content),
            )
        )
        if update.status in ("in_progress", "completed", "failed"):
            await self._progress(
                schema.ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=call_id,
                    status=update.status,
                    content=update.content,
                )
            )

    async def _progress(self, update: schema.ToolCallProgress) -> None:
        call = self._calls.get(update.tool_call_id)
        if call is None:
            log.warning(
                "agent: update for tool call %r it never announced: ignored",
                update.tool_call_id[:80],
            )
            return
        if update.title:
            call.title = update.title
        texts = _texts(update.content)
        if texts:
            call.output = texts
        if not call.running and update.status in ("in_progress", "completed", "failed"):
            call.running = True
            self._host.publish(ToolCallRunning(update.tool_call_id))
        if update.status == "in_progress" and texts:
            self._host.publish(ToolOutputChunk(update.tool_call_id, "\n".join(texts)))
        if update.status in ("completed", "failed"):
            await self._finish(
                update.tool_call_id, update.status == "completed", _diffs(update.content)
            )

    async def _finish(
        self,
        call_id: str,
        ok: bool,
        diffs: tuple[FileDiff, ...] = (),
        *,
        content: str | None = None,
        cancelled: bool = False,
    ) -> None:
        call = self._calls.pop(call_id)
        text = content if content is not None else "\n".join(call.output)
        await self._host.record(ToolResultEntry(call_id, call.kind.value, text, None, ok=ok))
        self._host.publish(ToolCallFinished(call_id, ok, text, None, cancelled, diffs=diffs))

    # ---- the turn's end --------------------------------------------------------------

    async def end_turn(self, *, cancelled: bool = False) -> str:
        """Close the calls the agent left open and hand the turn's last text row to the
        host (written with the end of the turn). Returns the turn's final text."""
        for call_id in list(self._calls):
            await self._finish(call_id, False, content=UNFINISHED, cancelled=cancelled)
        text, thought = self._take_text(), self._take_thought()
        if text or thought:
            self._host.record_last(AssistantEntry(text, thought=thought))
            self.final_text = text
        return text

    def _take_text(self) -> str:
        text, self._text = "".join(self._text), []
        return text

    def _take_thought(self) -> str:
        thought, self._thought = "".join(self._thought), []
        return thought
