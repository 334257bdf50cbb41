"""The `SessionStore` interface: identity and history, never liveness.

Rules every implementation keeps (the contract suite in tests/ checks them):
- Copies at the boundary: records are frozen, rows are fresh dicts each read.
- Fenced writes: `update` and `append_message` name the writer's generation and are
  refused with StaleGeneration unless it is the record's current one and the record is
  not `closed` (the rule itself is `domain.changes.check_fence`).
- Appending a row costs the same at row 10 and row 100,000.
- Listing without a query never reads transcripts. Listing is by last activity (updated_at,
  newest first; ties by insertion, newest first) and pages by a keyset cursor
  (`ListCursor`: the last entry's updated_at and insertion number). A search query is
  answered from an index kept in step by the same transaction as each write (SQLite
  FTS5, PostgreSQL GIN); the memory store scans.
- Every multi-row change is one transaction; write errors raise StoreError.
- The store only persists: every record change it makes comes from `domain.changes`, and
  bumps the record's `version` by one (never a refused write, never a lease renewal).
- The rules above are written once, in `repository.SessionRepository`; memory, SQLite and
  PostgreSQL are thin drivers under it (`repository.StoreDriver`).
- The methods are coroutines so that a store on the network (PostgreSQL) never blocks
  the event loop; the local stores do their short work inline (no thread hop).
- `clock()` is the clock leases are judged by: shared by every sidecar on the store, so
  hosts whose own clocks disagree still agree on when a lease ends.
- A store shared across hosts may also be a `ChangeFeed`: it tells a sidecar which
  sessions other sidecars changed (memory and SQLite do not: no cross-process news).
Transcript rows are JSON objects (`domain.transcript.to_row` makes them); the store
keeps them as they are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypedDict, runtime_checkable

from typing_extensions import Unpack

from protocol.values import Approval, Sandbox, Status
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import interrupted_marker, to_row

Row = Mapping[str, Any]
# Where the next page of a listing starts: (updated_at, seq) of the last entry returned.
ListCursor = tuple[float, int]

# Appended to a transcript whose turn was cut off by a sidecar that died.
INTERRUPTED_MARKER: Final[dict[str, Any]] = to_row(interrupted_marker())


class RecordChanges(TypedDict, total=False):
    """The fields `update` may change (`domain.records.UPDATABLE_FIELDS`)."""

    status: Status | str
    last_error: str | None
    interrupted: bool
    mode: str
    title: str
    model: str | None
    context_from: int
    summary_index: int | None
    lease_owner: str | None
    lease_expires: float | None
    usage_input: int
    usage_output: int
    approval: Approval | str
    sandbox: Sandbox | str | None
    rules: str
    mcp_servers: str
    turns: int
    agent_session: str | None
    worktree: str | None
    queue: str | None


OrphanTest = Callable[[SessionRecord], bool]
# Told the id of a session another sidecar changed (or deleted).
ChangeCallback = Callable[[str], Awaitable[None]]


class SessionStore(Protocol):
    async def insert(self, record: SessionRecord) -> None:
        """Store a new record. Raises StoreError if the id exists."""

    async def get(self, session_id: str) -> SessionRecord:
        """Raises SessionNotFound."""

    async def list_page(
        self,
        *,
        cwd: str | None = None,
        cursor: ListCursor | None = None,
        limit: int = 100,
        query: str | None = None,
        archived: bool | None = False,
    ) -> tuple[list[SessionRecord], ListCursor | None]:
        """Most recent activity first. Returns the page and the cursor of the next page
        (None at the end). `query`: only sessions with every word of it (`store.search`)
        in their title or transcript. `archived`: False (default) only those not archived,
        True only archived ones, None all."""

    async def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Row | None = None,
        **changes: Unpack[RecordChanges],
    ) -> SessionRecord:
        """Fenced change of UPDATABLE_FIELDS; sets updated_at. With `append`, that row joins
        the transcript in the same transaction (a turn's start: `running` and its user
        message land together or not at all). Returns the new record."""

    async def update_metadata(
        self,
        session_id: str,
        *,
        title: str | None = None,
        rules: str | None = None,
        archived: bool | None = None,
        forget_worktree: bool = False,
        queue: str | None | bool = False,
    ) -> SessionRecord:
        """Unfenced change of METADATA_FIELDS (any sidecar may rename a session, live or
        not); only those columns are written. Raises SessionNotFound."""

    async def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        """Resume: `domain.changes.new_generation` in one transaction. Raises
        StaleGeneration if the generation moved meanwhile."""

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        """Extend every lease `owner` holds; returns the ids it still holds (one statement
        for all of them, whatever their number)."""

    async def append_message(self, session_id: str, generation: int, row: Row) -> int:
        """Fenced append; returns the row's index (0-based) in the transcript."""

    async def messages(
        self, session_id: str, offset: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        """A page of the transcript in order. Raises SessionNotFound."""

    async def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        """Insert `record` (a new id, message_count 0) with a copy of the source's first
        `upto` rows, in one transaction. Returns the stored record. Raises
        SessionNotFound for the source, StoreError if the new id exists."""

    async def insert_with_transcript(
        self, record: SessionRecord, rows: Sequence[Row]
    ) -> SessionRecord:
        """Insert `record` (a new id, message_count 0) with `rows` as its whole transcript,
        in one transaction (an import: all or nothing). Returns the stored record. Raises
        StoreError if the id exists or a row cannot be stored."""

    async def delete(self, session_id: str) -> None:
        """Remove record and transcript in one transaction. Raises SessionNotFound."""

    async def reconcile_orphans(self, is_orphan: OrphanTest | None = None) -> list[SessionRecord]:
        """Records in a live state whose runtime is gone (`is_orphan`, default: all of
        them): `domain.changes.closed_orphan`, and INTERRUPTED_MARKER appended to those
        that were running. One transaction. Returns the records as changed."""

    async def reconcile_one(self, session_id: str, is_orphan: OrphanTest) -> SessionRecord:
        """The same for one session (read by its key, nothing else scanned); returns the
        record, changed or not. Raises SessionNotFound."""

    async def clock(self) -> float:
        """Seconds since the epoch on the store's clock (a local store: this host's)."""

    async def close(self) -> None:
        """Release the store. Idempotent."""


@runtime_checkable
class ChangeFeed(Protocol):
    async def watch_changes(self, on_change: ChangeCallback) -> None:
        """Until cancelled: call `on_change` (one call at a time) with the id of each
        session another sidecar changed, surviving lost connections. Changes made through
        this store object are not reported."""
