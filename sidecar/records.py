"""The durable half of a session: its record, its states and the one transition table.

A `SessionRecord` holds only facts that survive a runtime: no sockets, ports,
tokens, tasks or locks. Records are frozen; the store hands out new ones.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from sidecar.errors import InvalidState


class SessionState(StrEnum):
    CREATING = "creating"
    IDLE = "idle"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"
    ERROR = "error"


S = SessionState
# closed -> creating is resume: legal only together with a generation bump (store.begin_generation).
TRANSITIONS: Final[dict[SessionState, frozenset[SessionState]]] = {
    S.CREATING: frozenset({S.IDLE, S.ERROR, S.CLOSING}),
    S.IDLE: frozenset({S.RUNNING, S.CLOSING, S.ERROR}),
    S.RUNNING: frozenset({S.IDLE, S.CLOSING, S.ERROR}),
    S.CLOSING: frozenset({S.CLOSED, S.ERROR}),
    S.CLOSED: frozenset({S.CREATING}),
    S.ERROR: frozenset({S.CLOSING}),
}
# A record in one of these states claims a runtime exists somewhere.
LIVE_STATES: Final[frozenset[SessionState]] = frozenset({S.CREATING, S.IDLE, S.RUNNING, S.CLOSING})


def check_transition(session_id: str, current: SessionState, new: SessionState) -> None:
    """The single place a state change is judged. Raises InvalidState."""
    if new not in TRANSITIONS[current]:
        raise InvalidState(f"session {session_id}: cannot go from {current.value} to {new.value}")


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    cwd: str
    title: str
    mode: str
    backend: str
    status: SessionState
    generation: int
    created_at: float
    updated_at: float
    model: str | None = None
    last_error: str | None = None
    interrupted: bool = False
    message_count: int = 0
    forked_from: str | None = None
    # Compaction: the provider context is the summary at `summary_index` (a marker message)
    # followed by the messages from `context_from` on. The transcript itself stays whole.
    context_from: int = 0
    summary_index: int | None = None
    # Lease: which live sidecar process runs this session now, and until when (renewed).
    lease_owner: str | None = None
    lease_expires: float | None = None

    def replace(self, **changes: Any) -> SessionRecord:
        return dataclasses.replace(self, **changes)


# Fields a runtime or the manager may change through `SessionStore.update`.
UPDATABLE_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "status",
        "last_error",
        "interrupted",
        "mode",
        "title",
        "model",
        "context_from",
        "summary_index",
        "lease_owner",
        "lease_expires",
    }
)
