"""What an engine needs from the runtime that runs it: small typed interfaces.

`EngineHost` is what any engine (`agent/engine.py`) gets: fenced transcript writes, the
events it streams, consent, file access rules and terminals. `TurnHost` adds the model
services the builtin engine (the agent loop) uses: the provider, the context, the tools
offered, MCP calls. Engines are transport-free and store-free; everything they do to the
world goes through these methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from protocol.values import Mode, Sandbox
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.output import CommandOutput
from sidecar.agent.context import ChatMessage
from sidecar.agent.mcp import McpCallResult, ToolSpec
from sidecar.agent.providers.base import Provider, Usage
from sidecar.domain.events import (
    AgentOptionsChanged,
    AgentTextChunk,
    AgentThoughtChunk,
    CommandsAvailable,
    PlanUpdated,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolOutputChunk,
    UsageUpdated,
)

if TYPE_CHECKING:
    from sidecar.domain.permissions import PermissionRequest, Verdict
from sidecar.domain.transcript import Entry

# What an engine streams: text, thought, a tool call's life, usage, a plan, its commands.
EngineEvent = (
    AgentTextChunk
    | AgentThoughtChunk
    | ToolCallStarted
    | ToolCallRunning
    | ToolOutputChunk
    | ToolCallFinished
    | UsageUpdated
    | PlanUpdated
    | CommandsAvailable
    | AgentOptionsChanged
)


class EngineHost(Protocol):
    """The host services every engine uses."""

    @property
    def cwd(self) -> str: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def limits(self) -> CommandLimits: ...

    async def record(self, entry: Entry) -> None:
        """Append to the transcript (fenced) and to the provider context."""

    def record_last(self, entry: Entry) -> None:
        """The turn's last entry (the loop returns right after): written together with the
        end of the turn, in the same transaction, before the turn is answered."""

    def publish(self, event: EngineEvent) -> None:
        """One event of the turn, to every client (numbered, replayable)."""

    async def authorize(self, request: PermissionRequest) -> Verdict:
        """Rules, the approval setting, and if need be the user: may this call run?"""

    @property
    def sandbox(self) -> Sandbox:
        """What commands run under (the effective sandbox)."""

    @property
    def hidden(self) -> tuple[str, ...]:
        """Real paths of the directories the sandbox hides from commands (the sidecar's
        data and config dirs): the file tools, which run in the sidecar, refuse them too."""

    def command_output(self, call_id: str, on_output: Callable[[str], None]) -> CommandOutput:
        """Where a command's output goes (the model's part, the live stream, the spool)."""

    async def execute(self, command: str, output: CommandOutput) -> CommandResult:
        """Run one command on the session's backend (pipe or pty)."""

    async def before_tool_call(self) -> None:
        """Right before a tool that may change files runs: the turn's checkpoint is taken."""

    async def propose_title(self, title: str) -> None:
        """The engine's own name for the session (an external agent's title): taken while
        the session has no name the user gave it (one line, cut short)."""

    def count_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Tokens an engine's model used this turn (an external agent's report): added to
        the turn's and the session's totals (stored with the end of the turn)."""

    def engine_lost(self, reason: str) -> None:
        """Between turns, what runs the engine is gone (an external agent's process
        exited): the session goes to error (lastError: `reason`) and its next prompt starts
        a new generation. Ignored while a turn runs: that turn fails by itself."""

    def contain(self, argv: Sequence[str], writable: Sequence[str]) -> list[str]:
        """`argv` wrapped in the session's sandbox as a long-lived agent process: its own
        PID namespace, the cwd and `writable` writable in `workspace`, the network kept.
        Raises SandboxUnavailable (nothing may run uncontained)."""


class TurnHost(EngineHost, Protocol):
    """The builtin engine's host: the services above and the model's."""

    @property
    def provider(self) -> Provider: ...

    def provider_context(self) -> list[ChatMessage]:
        """System prompt plus the context, in Chat Completions form."""

    def add_usage(self, usage: Usage | None, context_window: int | None) -> None:
        """A model call's tokens: counted for the turn and the session, told to clients."""

    async def before_model_call(self) -> None:
        """A hook before each model call (automatic compaction, MCP servers connected)."""

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools offered to the model now (built-in and MCP), as function schemas."""

    def mcp_tool(self, name: str) -> ToolSpec | None:
        """The MCP tool the model may call by this public name in this mode, if any."""

    async def call_mcp(self, name: str, arguments: dict[str, Any]) -> McpCallResult:
        """One MCP tool call (failures are results; cancellation propagates)."""
