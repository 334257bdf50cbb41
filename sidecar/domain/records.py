"""The durable half of a session: its record, its states and the one transition table.

A `SessionRecord` holds only facts that survive a runtime: no sockets, ports,
tokens, tasks or locks. Records are frozen; the store hands out new ones.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.domain.errors import InvalidState

SessionState = Status  # the one status definition lives in protocol.values

S = Status
# closed -> creating is resume: legal only together with a generation bump (changes.new_generation).
TRANSITIONS: Final[dict[Status, frozenset[Status]]] = {
    S.CREATING: frozenset({S.IDLE, S.ERROR, S.CLOSING}),
    S.IDLE: frozenset({S.RUNNING, S.CLOSING, S.ERROR}),
    S.RUNNING: frozenset({S.IDLE, S.CLOSING, S.ERROR}),
    S.CLOSING: frozenset({S.CLOSED, S.ERROR}),
    S.CLOSED: frozenset({S.CREATING}),
    S.ERROR: frozenset({S.CLOSING}),
}
# A record in one of these states claims a runtime exists somewhere.
LIVE_STATES: Final[frozenset[Status]] = frozenset({S.CREATING, S.IDLE, S.RUNNING, S.CLOSING})


def check_transition(session_id: str, current: Status, new: Status) -> None:
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
    mode: Mode
    backend: Backend
    status: Status
    generation: int
    created_at: float
    updated_at: float
    model: str | None = None
    last_error: str | None = None
    interrupted: bool = False
    message_count: int = 0
    forked_from: str | None = None
    # Compaction: the provider context is the summary at `summary_index` (a marker entry)
    # followed by the entries from `context_from` on. The transcript itself stays whole.
    context_from: int = 0
    summary_index: int | None = None
    # Lease: which live sidecar process runs this session now, and until when (renewed).
    lease_owner: str | None = None
    lease_expires: float | None = None
    # Token usage totals the providers reported, over the session's life.
    usage_input: int = 0
    usage_output: int = 0
    # Consent and containment (None: the mode's default sandbox).
    approval: Approval = Approval.ASK
    sandbox: Sandbox | None = None
    rules: str = "[]"  # JSON list of rules (domain.rules): durable, copied by fork
    # The MCP servers the client asked for, as given (JSON; may hold secrets: env, headers).
    mcp_servers: str = "[]"
    turns: int = 0  # user messages so far: turn N is the N-th (set with the message itself)
    archived: bool = False  # hidden from the default session list (metadata: any sidecar)
    imported_from: str | None = None  # the session id an imported export was taken from
    # Bumped by one by every write the store makes to this record (`domain.changes`), never
    # by a refused one nor by a lease renewal: of two summaries of a session, the higher
    # version is the newer, whatever order they arrived in. A new record starts at 1.
    version: int = 1
    # What runs the turns: "builtin" (our agent loop) or an external ACP agent's name
    # (`agent/external`), chosen at creation and kept across resume, fork and restart.
    agent: str = "builtin"
    # The external agent's own id for this session (loaded or resumed by the next
    # generation, where the agent can); None for builtin or before its first start.
    agent_session: str | None = None
    # The session's own git worktree (JSON: repo, path, branch, base, host), when it was
    # made in one (`sidecar/worktrees`); its path is the cwd. None: it works in its cwd.
    worktree: str | None = None
    # Messages waiting for their turn (JSON, `domain/queue.py`); None: none.
    queue: str | None = None

    def replace(self, **changes: Any) -> SessionRecord:
        """A copy with `changes` (what `dataclasses.replace` does, at half its cost: every
        store write makes one). An unknown field is a TypeError, as there."""
        unknown = changes.keys() - _FIELD_INDEX.keys()
        if unknown:
            raise TypeError(f"SessionRecord has no field(s) {sorted(unknown)}")
        values = list(_field_values(self))
        for name, value in changes.items():
            values[_FIELD_INDEX[name]] = value
        return SessionRecord(*values)


_FIELD_NAMES: Final = tuple(field.name for field in dataclasses.fields(SessionRecord))
_FIELD_INDEX: Final = {name: index for index, name in enumerate(_FIELD_NAMES)}
_field_values: Final = operator.attrgetter(*_FIELD_NAMES)


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
        "usage_input",
        "usage_output",
        "approval",
        "sandbox",
        "rules",
        "mcp_servers",
        "turns",
        "agent_session",
        "worktree",
        "queue",
    }
)
# Fields any sidecar may change without holding the session (a rename of a closed
# session, say): written alone, so they never clobber what a live runtime writes.
METADATA_FIELDS: Final[frozenset[str]] = frozenset(
    {"title", "rules", "archived", "worktree", "queue"}
)
DEFAULT_TITLE: Final = "Untitled session"


def effective_sandbox(mode: Mode, setting: Sandbox | None) -> Sandbox:
    """What commands really run under: `plan` is always read-only, whatever is set;
    otherwise the setting, or `workspace` when none was chosen."""
    if mode is Mode.PLAN:
        return Sandbox.READ_ONLY
    return setting or Sandbox.WORKSPACE
