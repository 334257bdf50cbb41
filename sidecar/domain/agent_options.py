"""An external agent's own settings (its model, its modes, its reasoning effort), as the
session offers them next to ours: each a choice among values, changed through the agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

BUILTIN: Final = "builtin"  # the agent of a session our own loop runs (the default)
PREFIX: Final = "agent."  # our config option id for the agent's option `x` is `agent.x`
MODE_ID: Final = "mode"  # the agent's session modes, offered as one more option


@dataclass(frozen=True, slots=True)
class AgentOption:
    option_id: str  # the agent's own id (ours is PREFIX + it)
    name: str
    current: str
    choices: tuple[tuple[str, str], ...]  # (value, name)
    description: str | None = None
