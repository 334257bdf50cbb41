"""The `SessionStore` interface: identity and history, never liveness.

Rules every implementation keeps (the contract suite in tests/ checks them):
- Copies at the boundary: records are frozen, messages are fresh dicts each read.
- Fenced writes: `update` and `append_message` name the writer's generation and
  are refused with StaleGeneration unless it is the record's current one and the
  record is not `closed` (a closed generation is over: nothing it says may land).
- Appending a message costs the same at message 10 and message 100,000.
- Listing never reads transcripts. Paging is by an opaque integer cursor.
- Every multi-row change is one transaction; write errors raise StoreError.
- Methods are synchronous: each is a short local operation, cheaper than a
  thread hop, and the one event loop is the only caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from sidecar.records import SessionRecord

# Appended to a transcript whose turn was cut off by a sidecar that died.
INTERRUPTED_MARKER: Final[dict[str, Any]] = {
    "role": "system",
    "kind": "interrupted",
    "content": "[turn interrupted: the sidecar stopped before this turn finished]",
}


class SessionStore(Protocol):
    def insert(self, record: SessionRecord) -> None:
        """Store a new record. Raises StoreError if the id exists."""

    def get(self, session_id: str) -> SessionRecord:
        """Raises SessionNotFound."""

    def list_page(
        self, *, cwd: str | None = None, cursor: int | None = None, limit: int = 100
    ) -> tuple[list[SessionRecord], int | None]:
        """Newest first. Returns the page and the cursor of the next page (None at the end)."""

    def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> SessionRecord:
        """Fenced change of UPDATABLE_FIELDS; sets updated_at. With `append`, that message
        joins the transcript in the same transaction (a turn's start: `running` and its
        user message land together or not at all). Returns the new record."""

    def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        """Resume: compare-and-set generation+1, status creating, last_error cleared,
        interrupted kept, and the lease set to the new runtime's process, in one
        transaction. Raises StaleGeneration if the generation moved meanwhile."""

    def renew_leases(self, owner: str, expires: float) -> set[str]:
        """Extend every lease `owner` holds; returns the ids it still holds (one statement
        for all of them, whatever their number)."""

    def append_message(self, session_id: str, generation: int, message: Mapping[str, Any]) -> int:
        """Fenced append; returns the message's index (0-based) in the transcript."""

    def messages(self, session_id: str, offset: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        """A page of the transcript in order. Raises SessionNotFound."""

    def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        """Insert `record` (a new id, message_count 0) with a copy of the source's first
        `upto` messages, in one transaction. Returns the stored record. Raises
        SessionNotFound for the source, StoreError if the new id exists."""

    def delete(self, session_id: str) -> None:
        """Remove record and transcript in one transaction. Raises SessionNotFound."""

    def reconcile_orphans(
        self, is_orphan: Callable[[SessionRecord], bool] | None = None
    ) -> list[SessionRecord]:
        """Records in a live state whose runtime is gone (`is_orphan`, default: all of
        them): mark closed and release the lease; if one was running, set interrupted and
        append INTERRUPTED_MARKER. One transaction. Returns the records as changed."""

    def close(self) -> None:
        """Release the store. Idempotent."""
