"""The engine seam: what runs a session's turns, behind one small typed interface.

A runtime (`sidecar/core/runtime.py`) makes one `Engine` per generation
(`RuntimeDeps.make_engine`) and its turn runner (`core/turns.py`) knows only this
interface: it records the user's message, then `run_turn`s the engine with the prompt;
the engine streams what happens as typed events (`EngineEvent`: text, thought, a tool
call's start, running, output and end, usage) through `host.publish`, writes the
transcript through `host.record` / `host.record_last` (fenced, by the runtime), and
reaches the world only through the host's services (`agent/host.py: EngineHost`):
permission (`authorize`: the session's rules, approval setting and the user), file
access (`cwd`, `hidden`, `sandbox`, `before_tool_call` for the checkpoint) and
terminals (`command_output`, `execute`: contained in bubblewrap). Lifecycle, leases,
approvals, checkpoints, the transcript and both edges are the host's, whatever engine
runs.

Cancel: `cancel()` is told first (an engine that runs elsewhere, an external agent,
asks it to stop), then the task running `run_turn` is cancelled; an engine ends
promptly on `CancelledError` and leaves the host to record the turn as cancelled.
`start()` once, while the runtime starts (an external agent's process and session:
`agent/external`); `close()` when the runtime's generation ends. An engine streams plans
and the commands it offers too, and may name the session (`host.propose_title`: taken
while the user has not named it; the host names an untitled session after its first
prompt).

Today's agent loop (a provider and the builtin tools: `agent/loop.py`) is the `builtin`
engine: it also uses the host's model services (`TurnHost`: the provider, the context,
the tool list, MCP calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sidecar.agent.host import EngineEvent, EngineHost, TurnHost
from sidecar.agent.loop import run_turn
from sidecar.agent.outcome import TurnOutcome
from sidecar.domain.agent_options import BUILTIN, AgentOption
from sidecar.domain.errors import InvalidInput
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord

__all__ = [
    "BUILTIN",
    "BuiltinEngine",
    "Engine",
    "EngineEvent",
    "EngineFactory",
    "EngineHost",
    "EngineStart",
    "builtin_engine",
]


@dataclass(frozen=True, slots=True)
class EngineStart:
    """What a started engine tells the runtime: the external agent's session id (stored
    in the record: the next generation loads or resumes it) and, when an earlier
    conversation could not be carried over, a note saying so (put in the transcript)."""

    agent_session: str | None = None
    note: str | None = None


class Engine(Protocol):
    """One runtime generation's turns. `host` is the runtime's `TurnHost`: an engine that
    needs no model services of the host takes it as an `EngineHost`."""

    @property
    def name(self) -> str: ...

    @property
    def uses_provider(self) -> bool:
        """Whether the runtime makes it a provider client (the builtin loop's model)."""
        ...

    @property
    def embeds_files(self) -> bool:
        """Whether a mentioned small text file reaches the agent embedded (an ACP
        `resource` with its text, read here within the session's confinement) rather
        than as the link: an external agent that takes embedded context."""
        ...

    async def start(self, host: EngineHost) -> EngineStart:
        """Before the first turn, while the runtime starts (an external agent's process
        and session). A failure is the runtime's start failure (lastError)."""
        ...

    def options(self) -> tuple[AgentOption, ...]:
        """The engine's own settings (an external agent's model and modes); () for ours."""
        ...

    async def set_option(self, option_id: str, value: str) -> None:
        """Change one of `options()` (the agent is told); InvalidInput for a bad one."""
        ...

    def refuses(self, prompt: UserPrompt) -> str | None:
        """Why the engine cannot take this prompt (None: it can), asked before the turn
        starts: content it has no way to give its model, an image say."""
        ...

    async def run_turn(self, host: TurnHost, prompt: UserPrompt) -> TurnOutcome:
        """One turn whose user message (`prompt`) the host already recorded; returns how
        it ended. Its last transcript row goes through `host.record_last`."""
        ...

    def cancel(self) -> None:
        """The running turn is being cancelled (its task is cancelled right after)."""
        ...

    async def close(self) -> None:
        """The generation ends: release what the engine holds. Idempotent."""
        ...


class EngineFactory(Protocol):
    """A new engine per runtime generation, for the session as stored when it starts
    (its cwd, mode, model: what an engine elsewhere is started with)."""

    def __call__(self, record: SessionRecord) -> Engine: ...


class BuiltinEngine:
    """The agent loop: a provider asked, the tools it calls run, until it stops."""

    @property
    def name(self) -> str:
        return BUILTIN

    @property
    def uses_provider(self) -> bool:
        return True

    @property
    def embeds_files(self) -> bool:
        return False  # its model gets a mention's text in the message itself

    async def start(self, host: EngineHost) -> EngineStart:
        del host
        return EngineStart()

    def options(self) -> tuple[AgentOption, ...]:
        return ()  # the session's own settings are all there is

    async def set_option(self, option_id: str, value: str) -> None:
        raise InvalidInput("configId", f"the builtin agent has no option {option_id!r}")

    def refuses(self, prompt: UserPrompt) -> str | None:
        if prompt.has("audio"):
            return "the builtin agent gives its model no audio: send text, images, files or links"
        return None  # images: the host refuses them where the provider takes none

    async def run_turn(self, host: TurnHost, prompt: UserPrompt) -> TurnOutcome:
        del prompt  # already in the provider context the host keeps
        return await run_turn(host)

    def cancel(self) -> None:
        """Nothing to tell: cancelling the task abandons the provider request and stops
        a running command's processes."""

    async def close(self) -> None:
        """Nothing held: the provider client and the commands are the runtime's."""


def builtin_engine(record: SessionRecord) -> Engine:
    """The default `EngineFactory`: the agent loop (the provider is the runtime's)."""
    del record
    return BuiltinEngine()
