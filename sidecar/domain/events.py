"""What a session tells the world while it runs, as typed values.

A runtime publishes these into its numbered event stream (`sidecar/core/events.py`);
the ACP edge turns them into `session/update` and `_session/state` notifications, the
HTTP edge into Server-Sent Events. Nothing in the core knows either shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from protocol.values import Mode, StopReason
from sidecar.domain.agent_options import AgentOption
from sidecar.domain.files import FileDiff, Location, TurnChanges
from sidecar.domain.queue import PromptQueue
from sidecar.domain.records import SessionRecord


class Origin(StrEnum):
    """Who started a turn: the stdio (ACP) client, or a local tool over HTTP."""

    ACP = "acp"
    HTTP = "http"
    QUEUE = "queue"  # a queued message whose turn came (`core/queue.py`)


class ToolKind(StrEnum):
    """ACP's tool kinds: how a client may present a call."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class StateChanged:
    record: SessionRecord  # the record as stored by the write that changed the state


@dataclass(frozen=True, slots=True)
class UserMessageAdded:
    text: str
    origin: Origin


@dataclass(frozen=True, slots=True)
class AgentTextChunk:
    text: str


@dataclass(frozen=True, slots=True)
class AgentThoughtChunk:
    text: str


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    """After a model call: the context it filled, and how much there is."""

    used: int  # tokens in the context now (the call's input plus its output)
    size: int  # the model's context window (or the sidecar's compaction budget)


@dataclass(frozen=True, slots=True)
class TitleChanged:
    title: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    tool: str
    title: str
    kind: ToolKind
    raw_input: Mapping[str, Any] = field(default_factory=dict)
    locations: tuple[Location, ...] = ()
    diffs: tuple[FileDiff, ...] = ()  # a file tool's change, shown before it is made


@dataclass(frozen=True, slots=True)
class ToolCallRunning:
    call_id: str


@dataclass(frozen=True, slots=True)
class ToolOutputChunk:
    call_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    ok: bool
    content: str  # the whole result, as the model is told it
    exit_code: int | None
    cancelled: bool
    images: tuple[tuple[str, str], ...] = ()  # (mime type, base64 data): MCP tools
    diffs: tuple[FileDiff, ...] = ()  # what a file tool wrote


@dataclass(frozen=True, slots=True)
class PermissionAsked:
    """A tool call waits for the user's consent (the summary says so until it is settled)."""

    call_id: str
    title: str
    since: float
    record: SessionRecord  # the session as it is while it waits


@dataclass(frozen=True, slots=True)
class PermissionSettled:
    call_id: str
    record: SessionRecord


@dataclass(frozen=True, slots=True)
class McpServersChanged:
    """The session's MCP servers connected, failed or reconnected (see the summary)."""

    record: SessionRecord


@dataclass(frozen=True, slots=True)
class InstructionsChanged:
    """The project instruction files (AGENTS.md) the prompt holds changed (see the
    summary's `instructions`)."""

    record: SessionRecord


@dataclass(frozen=True, slots=True)
class ModeChanged:
    mode: Mode


@dataclass(frozen=True, slots=True)
class Compacted:
    summary_index: int
    context_from: int
    context_chars: int


@dataclass(frozen=True, slots=True)
class PlanItem:
    content: str
    priority: str  # high | medium | low (ACP's words)
    status: str  # pending | in_progress | completed


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    """The agent's plan for the turn, whole (each update replaces the one before)."""

    items: tuple[PlanItem, ...]


@dataclass(frozen=True, slots=True)
class CommandsAvailable:
    """The slash commands the session's agent offers now: (name, description) pairs."""

    commands: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AgentOptionsChanged:
    """The session's external agent changed its own settings (model, mode): all of them."""

    options: tuple[AgentOption, ...]


@dataclass(frozen=True, slots=True)
class SettingsChanged:
    """The session's config options changed (its agent's own, told by the agent): the
    record as the runtime holds it, for the view that lists them."""

    record: SessionRecord


@dataclass(frozen=True, slots=True)
class QueueChanged:
    """The session's queue of waiting messages, whole, after a change."""

    queue: PromptQueue


@dataclass(frozen=True, slots=True)
class TurnEnded:
    stop_reason: StopReason | None  # None: the turn failed (see error)
    error: str | None = None


SessionEvent = (
    StateChanged
    | UserMessageAdded
    | AgentTextChunk
    | AgentThoughtChunk
    | UsageUpdated
    | TitleChanged
    | ToolCallStarted
    | ToolCallRunning
    | ToolOutputChunk
    | ToolCallFinished
    | PermissionAsked
    | PermissionSettled
    | McpServersChanged
    | InstructionsChanged
    | ModeChanged
    | Compacted
    | PlanUpdated
    | CommandsAvailable
    | AgentOptionsChanged
    | SettingsChanged
    | QueueChanged
    | TurnEnded
    | TurnChanges  # a turn that changed files ended: what it changed (without the diff)
)
