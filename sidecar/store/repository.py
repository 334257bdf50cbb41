"""The rules every store applies, written once: `SessionRepository` over a `StoreDriver`.

A store is this repository plus a thin driver (memory, SQLite, PostgreSQL) that only
reads and writes rows. Here, once for all of them: argument checks, the order of each
write (read the row for update, judge the fence, ask `domain.changes` for the new
record, write the row and the fields it changed), the paging rule of a listing (one row
beyond the page says whether a next page exists) and the encoding of transcript rows.
So a store cannot fence, bump a version or page differently from another; the contract
suite (tests/test_store_contract.py) runs the same sequences against all three.

A driver keeps what is its own: reads that need no rule (`get`, and its cache in
SQLite), the listing's query, deletes, lease renewal, the clock, closing, and how a
transaction is made (SQLite BEGIN IMMEDIATE, PostgreSQL row locks, the memory store's
single event loop). Everything written inside one `transaction()` lands together or
not at all; the memory driver, which cannot roll back, is safe because the repository
checks everything (fence, JSON, a taken id) before its first write.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from typing_extensions import Unpack

from sidecar.domain import changes as change
from sidecar.domain.errors import StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord, now
from sidecar.store.base import INTERRUPTED_MARKER, ListCursor, OrphanTest, RecordChanges, Row

# Offsets and limits are clamped below SQLite's (and PostgreSQL's) 64-bit integer range.
MAX_INDEX: Final = 2**62
Seq = int  # a session's insertion number: the driver's key of its row
_MARKER_BODY: Final = json.dumps(INTERRUPTED_MARKER)
_NEW_GENERATION: Final = ("generation", "status", "last_error", "lease_owner", "lease_expires")
_ORPHAN_CLOSED: Final = ("status", "interrupted", "lease_owner", "lease_expires")


def encode(session_id: str, row: Row) -> str:
    """A transcript row as the text every driver stores (read back with json.loads: the
    same copy semantics, and the same refusals, in every store)."""
    try:
        return json.dumps(dict(row))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot store a row for session {session_id}: {exc}") from exc


class StoreDriver(Protocol):
    """What one write transaction of a driver offers the repository."""

    async def locked(self, session_id: str, *, share: bool = False) -> tuple[Seq, SessionRecord]:
        """The row, held against other writers until the transaction ends (`share`: only
        against its deletion). Raises SessionNotFound."""

    async def save(
        self, seq: Seq, record: SessionRecord, names: Sequence[str], fence: int | None
    ) -> None:
        """Write the named fields of `record`, and always updated_at and version. With
        `fence`, a driver that can re-check it in the statement itself does (StaleGeneration
        when the stored generation is no longer that one)."""

    async def insert_row(self, record: SessionRecord) -> Seq:
        """A new row; its seq. Raises StoreError if the id exists (nothing written)."""

    async def add_message(self, seq: Seq, index: int, body: str) -> None:
        """One transcript row at `index` (the record's message_count: O(1) at any length)."""

    async def add_messages(self, seq: Seq, bodies: Sequence[str]) -> None:
        """A new session's whole transcript, from index 0."""

    async def copy_messages(self, source: Seq, seq: Seq, count: int) -> None:
        """The first `count` transcript rows of `source` as the transcript of `seq`."""

    async def live_rows(self) -> list[tuple[Seq, SessionRecord]]:
        """The rows in a live state, by seq, held as `locked` holds one (a driver may skip
        a row another transaction is writing: it has a live writer)."""


class SessionRepository(ABC):
    """`SessionStore`'s writes, transcript pages and listing pages, over the driver a
    subclass provides (`_transaction`, `_listed`, `_messages`); the rest of the interface
    is the subclass's own."""

    @abstractmethod
    def _transaction(self) -> AbstractAsyncContextManager[StoreDriver]:
        """One write transaction, committed when the block ends, rolled back on an error."""

    @abstractmethod
    async def _listed(
        self,
        *,
        cwd: str | None,
        cursor: ListCursor | None,
        rows: int,
        query: str | None,
        archived: bool | None,
    ) -> list[tuple[Seq, SessionRecord]]:
        """Up to `rows` entries after `cursor`, by (updated_at, seq) descending."""

    @abstractmethod
    async def _messages(self, session_id: str, start: int, stop: int) -> list[dict[str, Any]]:
        """Transcript rows start..stop-1 in order (fresh dicts). Raises SessionNotFound."""

    async def insert(self, record: SessionRecord) -> None:
        stored = change.forked(record, 0)
        async with self._transaction() as tx:
            await tx.insert_row(stored)

    async def list_page(
        self,
        *,
        cwd: str | None = None,
        cursor: ListCursor | None = None,
        limit: int = 100,
        query: str | None = None,
        archived: bool | None = False,
    ) -> tuple[list[SessionRecord], ListCursor | None]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        rows = await self._listed(
            cwd=cwd, cursor=cursor, rows=min(limit, MAX_INDEX) + 1, query=query, archived=archived
        )
        page = rows[:limit]
        next_cursor = (page[-1][1].updated_at, page[-1][0]) if len(rows) > limit else None
        return [record for _, record in page], next_cursor

    async def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Row | None = None,
        **changes: Unpack[RecordChanges],
    ) -> SessionRecord:
        checked = change.validated_changes(changes)
        body = None if append is None else encode(session_id, append)
        names = list(checked)  # UPDATABLE_FIELDS are column names
        async with self._transaction() as tx:
            seq, record = await tx.locked(session_id)
            change.check_fence(record, generation)
            if body is None:
                updated = change.updated(record, checked, now())
            else:
                # The row and the changes it came with: one change, one write of the row
                # (a turn's two writes each carry a row: the hot path).
                await tx.add_message(seq, record.message_count, body)
                updated = change.updated_appending(record, checked, now())
                names.append("message_count")
            await tx.save(seq, updated, names, generation)
        return updated

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
        given = (("title", title), ("rules", rules), ("archived", archived))
        checked = change.validated_metadata({k: v for k, v in given if v is not None})
        if forget_worktree:  # a closed session's discarded worktree: it has none now
            checked["worktree"] = None
        if queue is not False:  # the queue's JSON, or None when it is empty
            checked["queue"] = queue
        async with self._transaction() as tx:
            seq, record = await tx.locked(session_id)
            updated = change.updated(record, checked, now())
            await tx.save(seq, updated, list(checked), None)
        return updated

    async def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        async with self._transaction() as tx:
            seq, record = await tx.locked(session_id)
            updated = change.new_generation(
                record,
                expected_generation,
                lease_owner=lease_owner,
                lease_expires=lease_expires,
                at=now(),
            )
            await tx.save(seq, updated, _NEW_GENERATION, expected_generation)
        return updated

    async def append_message(self, session_id: str, generation: int, row: Row) -> int:
        body = encode(session_id, row)
        async with self._transaction() as tx:
            seq, record = await tx.locked(session_id)
            change.check_fence(record, generation)
            await tx.add_message(seq, record.message_count, body)
            appended = change.appended(record, now())
            await tx.save(seq, appended, ("message_count",), generation)
        return record.message_count

    async def messages(
        self, session_id: str, offset: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        if offset < 0 or limit < 0:
            raise ValueError(f"offset and limit must be >= 0, got {offset}, {limit}")
        return await self._messages(
            session_id, min(offset, MAX_INDEX), min(offset + limit, MAX_INDEX)
        )

    async def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        change.forked(record, 0)  # refuses a record that claims rows already
        async with self._transaction() as tx:
            source_seq, source = await tx.locked(source_id, share=True)
            stored = change.forked(record, max(0, min(upto, source.message_count)))
            seq = await tx.insert_row(stored)
            await tx.copy_messages(source_seq, seq, stored.message_count)
        return stored

    async def insert_with_transcript(
        self, record: SessionRecord, rows: Sequence[Row]
    ) -> SessionRecord:
        change.forked(record, 0)  # refuses a record that claims rows already
        bodies = [encode(record.session_id, row) for row in rows]  # all checked first
        stored = change.forked(record, len(bodies))
        async with self._transaction() as tx:
            seq = await tx.insert_row(stored)
            await tx.add_messages(seq, bodies)
        return stored

    @staticmethod
    async def _reconcile(tx: StoreDriver, seq: Seq, record: SessionRecord) -> SessionRecord:
        closed, was_running = change.closed_orphan(record, now())
        names = list(_ORPHAN_CLOSED)
        if was_running:
            await tx.add_message(seq, closed.message_count, _MARKER_BODY)
            closed = change.appended(closed, now())
            names.append("message_count")
        await tx.save(seq, closed, names, record.generation)
        return closed

    async def reconcile_orphans(self, is_orphan: OrphanTest | None = None) -> list[SessionRecord]:
        changed: list[SessionRecord] = []
        async with self._transaction() as tx:
            for seq, record in await tx.live_rows():
                if is_orphan is None or is_orphan(record):
                    changed.append(await self._reconcile(tx, seq, record))
        return changed

    async def reconcile_one(self, session_id: str, is_orphan: OrphanTest) -> SessionRecord:
        async with self._transaction() as tx:
            seq, record = await tx.locked(session_id)
            if record.status in LIVE_STATES and is_orphan(record):
                return await self._reconcile(tx, seq, record)
            return record
