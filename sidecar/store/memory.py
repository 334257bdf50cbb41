"""In-process store for tests and `--store memory`. Same contract as SQLite, no disk."""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from typing_extensions import Unpack

from sidecar.domain import changes as change
from sidecar.domain.errors import SessionNotFound, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord, now
from sidecar.store import search
from sidecar.store.base import INTERRUPTED_MARKER, ListCursor, OrphanTest, RecordChanges, Row


class MemorySessionStore:
    def __init__(self) -> None:
        self._records: dict[str, SessionRecord] = {}
        self._seq: dict[str, int] = {}
        self._transcripts: dict[str, list[dict[str, Any]]] = {}
        self._next_seq = 1

    def _get(self, session_id: str) -> SessionRecord:
        try:
            return self._records[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    def _add(self, record: SessionRecord, transcript: list[dict[str, Any]]) -> None:
        if record.session_id in self._records:
            raise StoreError(f"session {record.session_id} already exists")
        self._records[record.session_id] = record
        self._seq[record.session_id] = self._next_seq
        self._next_seq += 1
        self._transcripts[record.session_id] = transcript

    async def insert(self, record: SessionRecord) -> None:
        self._add(change.forked(record, 0), [])

    async def get(self, session_id: str) -> SessionRecord:
        return self._get(session_id)

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
        words = search.terms(query)
        ordered = sorted(
            ((record.updated_at, self._seq[sid], sid) for sid, record in self._records.items()),
            reverse=True,
        )
        page: list[SessionRecord] = []
        last: ListCursor | None = None
        for updated_at, seq, session_id in ordered:
            if cursor is not None and (updated_at, seq) >= cursor:
                continue
            record = self._records[session_id]
            if cwd is not None and record.cwd != cwd:
                continue
            if archived is not None and record.archived != archived:
                continue
            if words and not search.matches(
                words,
                itertools.chain(
                    (record.title,), map(search.row_text, self._transcripts[session_id])
                ),
            ):
                continue
            if len(page) == limit:
                return page, last
            page.append(record)
            last = (updated_at, seq)
        return page, None

    @staticmethod
    def _copy(row: Row) -> dict[str, Any]:
        try:
            # A JSON round trip: the same copy semantics and the same refusals as SQLite.
            stored: dict[str, Any] = json.loads(json.dumps(dict(row)))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"row is not JSON-serialisable: {exc}") from None
        return stored

    def _append(self, record: SessionRecord, stored: dict[str, Any]) -> SessionRecord:
        self._transcripts[record.session_id].append(stored)
        appended = change.appended(record, now())
        self._records[record.session_id] = appended
        return appended

    async def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Row | None = None,
        **changes: Unpack[RecordChanges],
    ) -> SessionRecord:
        checked = change.validated_changes(changes)
        record = self._get(session_id)
        change.check_fence(record, generation)
        if append is None:
            updated = change.updated(record, checked, now())
        else:
            stored = self._copy(append)  # checked before any change
            self._transcripts[session_id].append(stored)
            updated = change.updated_appending(record, checked, now())  # one change, one bump
        self._records[session_id] = updated
        return updated

    async def update_metadata(
        self,
        session_id: str,
        *,
        title: str | None = None,
        rules: str | None = None,
        archived: bool | None = None,
    ) -> SessionRecord:
        given = (("title", title), ("rules", rules), ("archived", archived))
        checked = change.validated_metadata({k: v for k, v in given if v is not None})
        updated = change.updated(self._get(session_id), checked, now())
        self._records[session_id] = updated
        return updated

    async def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        updated = change.new_generation(
            self._get(session_id),
            expected_generation,
            lease_owner=lease_owner,
            lease_expires=lease_expires,
            at=now(),
        )
        self._records[session_id] = updated
        return updated

    async def append_message(self, session_id: str, generation: int, row: Row) -> int:
        record = self._get(session_id)
        change.check_fence(record, generation)
        return self._append(record, self._copy(row)).message_count - 1

    async def messages(
        self, session_id: str, offset: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        self._get(session_id)
        return copy.deepcopy(self._transcripts[session_id][offset : offset + limit])

    async def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        self._get(source_id)
        copied = copy.deepcopy(self._transcripts[source_id][: max(upto, 0)])
        stored = change.forked(record, len(copied))
        self._add(stored, copied)
        return stored

    async def insert_with_transcript(
        self, record: SessionRecord, rows: Sequence[Row]
    ) -> SessionRecord:
        change.forked(record, 0)  # refuses a record that claims rows already
        copied = [self._copy(row) for row in rows]  # every row checked before anything lands
        stored = change.forked(record, len(copied))
        self._add(stored, copied)
        return stored

    async def delete(self, session_id: str) -> None:
        self._get(session_id)
        del self._records[session_id]
        del self._seq[session_id]
        del self._transcripts[session_id]

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        held = set()
        for session_id, record in self._records.items():
            if record.lease_owner == owner:
                self._records[session_id] = record.replace(lease_expires=expires)
                held.add(session_id)
        return held

    def _reconcile(self, record: SessionRecord) -> SessionRecord:
        closed, was_running = change.closed_orphan(record, now())
        self._records[record.session_id] = closed
        if was_running:
            closed = self._append(closed, copy.deepcopy(INTERRUPTED_MARKER))
        return closed

    async def reconcile_orphans(self, is_orphan: OrphanTest | None = None) -> list[SessionRecord]:
        return [
            self._reconcile(record)
            for record in list(self._records.values())
            if record.status in LIVE_STATES and (is_orphan is None or is_orphan(record))
        ]

    async def reconcile_one(self, session_id: str, is_orphan: OrphanTest) -> SessionRecord:
        record = self._get(session_id)
        if record.status in LIVE_STATES and is_orphan(record):
            return self._reconcile(record)
        return record

    async def clock(self) -> float:
        return time.time()

    async def close(self) -> None:
        return None
