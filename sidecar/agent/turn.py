"""What a finished turn reports back to whoever started it (stdio or HTTP)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    response: str
    stop_reason: str  # ACP StopReason: end_turn | max_turn_requests | cancelled | ...
