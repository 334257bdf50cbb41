"""What a finished turn reports back to whoever started it (stdio or HTTP)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.values import StopReason
from sidecar.agent.providers.base import Usage


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    response: str  # the last text the model gave
    stop_reason: StopReason
    usage: Usage = Usage()  # the turn's tokens, over all its model calls
    turn: int | None = None  # the turn's number in the session (from 1)
