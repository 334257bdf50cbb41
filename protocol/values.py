"""The value sets both sides of the wire share: session status, mode, backend, stop reason.

Defined once, here, as string enums: the sidecar's records use them as they are, and the
wire models validate against them, so a status or mode can never mean two things.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Status(StrEnum):
    CREATING = "creating"
    IDLE = "idle"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"
    ERROR = "error"


class Mode(StrEnum):
    CRAFT = "craft"
    PLAN = "plan"
    ASK = "ask"


class Backend(StrEnum):
    PIPE = "pipe"
    PTY = "pty"


class Approval(StrEnum):
    """When the client is asked before a tool call that could change something."""

    ASK = "ask"  # ask, unless a rule decides
    AUTO = "auto"  # never ask
    DENY = "deny"  # never ask; refuse what would have been asked


class Sandbox(StrEnum):
    """What the operating system lets a command touch (bubblewrap)."""

    READ_ONLY = "read-only"  # the whole filesystem read-only, private /tmp, no network
    WORKSPACE = "workspace"  # the same, but the session cwd writable and the network on
    OFF = "off"  # as the user; still its own PID namespace


class StopReason(StrEnum):
    """ACP's stop reasons, the ones a turn of ours can end with."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"


class RewindScope(StrEnum):
    """What `_session/rewind` takes back: the files, the model's context, or both."""

    CODE = "code"
    CONVERSATION = "conversation"
    BOTH = "both"


MODE_DESCRIPTIONS: Final[dict[Mode, tuple[str, str]]] = {
    Mode.CRAFT: (
        "Craft",
        "Change the workspace: the agent may run shell commands to build things.",
    ),
    Mode.PLAN: ("Plan", "Investigate and propose a plan; shell commands allowed for reading."),
    Mode.ASK: ("Ask", "Answer questions only; no tools."),
}


def available_modes() -> list[dict[str, str]]:
    """ACP `availableModes` entries, in a fixed order."""
    return [
        {"id": mode.value, "name": name, "description": text}
        for mode, (name, text) in MODE_DESCRIPTIONS.items()
    ]
