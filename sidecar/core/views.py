"""A session as the manager sees it right now: the durable record joined with what is live.

The store never claims liveness; this join is the only place `live` and the endpoint are
decided, from the runtime registry of this process. Edges render it (`sidecar/wire/`).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.values import RewindScope
from sidecar.domain.agent_options import AgentOption
from sidecar.domain.files import CodeRewind, InstructionFile
from sidecar.domain.records import SessionRecord
from sidecar.domain.worktree_info import WorktreeState


@dataclass(frozen=True, slots=True)
class Awaiting:
    call_id: str
    title: str
    since: float


@dataclass(frozen=True, slots=True)
class McpServerView:
    """One MCP server of the session, as a user may see it (never its env or headers)."""

    name: str
    transport: str  # stdio | http | sse
    status: str  # connecting | connected | failed | closed
    tools: int
    error: str | None


@dataclass(frozen=True, slots=True)
class SessionView:
    record: SessionRecord
    live: bool  # this process holds a runtime for it
    url: str | None  # the runtime's listener, when live and listening
    token: str | None  # the listener's bearer token (never shown over HTTP)
    held_by: str | None  # another live sidecar process that runs it, if one does
    awaiting: Awaiting | None = None  # a tool call waiting for the user's consent
    sandbox_problem: str | None = None  # why commands cannot be contained, if they cannot
    mcp: tuple[McpServerView, ...] = ()
    checkpoint_problem: str | None = None  # why turns are not checkpointed, if they are not
    # An external agent's own settings (its model, modes), as it last said them.
    agent_options: tuple[AgentOption, ...] = ()
    worktree_state: WorktreeState | None = None  # ahead/behind/dirty, while live
    # The project instruction files the builtin engine's prompt holds, while live.
    instructions: tuple[InstructionFile, ...] = ()

    @property
    def session_id(self) -> str:
        return self.record.session_id


@dataclass(frozen=True, slots=True)
class TerminalSize:
    rows: int
    cols: int


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    compacted: bool
    cancelled: bool = False
    reason: str | None = None
    summary_index: int | None = None
    context_from: int | None = None
    context_chars: int | None = None


@dataclass(frozen=True, slots=True)
class RewindOutcome:
    scope: RewindScope
    turn: int | None  # None: a code rewind undone
    code: CodeRewind | None  # the files' part (scope code or both)
    marker_index: int | None  # the conversation's part: its marker in the transcript
    dry_run: bool = False
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class ImageData:
    digest: str
    mime_type: str
    data: str  # base64
