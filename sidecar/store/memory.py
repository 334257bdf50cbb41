"""In-process store for tests and `--store memory`. Same contract as SQLite, no disk.

The rules are `repository.SessionRepository`'s; this driver keeps rows in dicts. Rows
are kept as the JSON text the repository encodes (read back as fresh dicts, like SQLite).
A transaction is the block itself: the store runs on one event loop and a block never
awaits anything that yields, and the repository checks everything before the first write,
so nothing needs rolling back.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from sidecar.domain.errors import SessionNotFound, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord
from sidecar.store import search
from sidecar.store.base import ListCursor
from sidecar.store.repository import Seq, SessionRepository


class _Block:
    """A transaction: the block itself (a class, not an async generator: every write makes
    one, and asyncio tracks each async generator it sees)."""

    def __init__(self, store: MemorySessionStore) -> None:
        self._store = store

    async def __aenter__(self) -> MemorySessionStore:
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        return None


class MemorySessionStore(SessionRepository):
    def __init__(self) -> None:
        self._records: dict[str, SessionRecord] = {}
        self._seq: dict[str, int] = {}
        self._ids: dict[int, str] = {}
        self._transcripts: dict[str, list[str]] = {}
        self._next_seq = 1

    def _get(self, session_id: str) -> SessionRecord:
        try:
            return self._records[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    # ---- the driver (repository.StoreDriver): this object is its own transaction --------

    def _transaction(self) -> _Block:
        return _Block(self)

    async def locked(self, session_id: str, *, share: bool = False) -> tuple[Seq, SessionRecord]:
        record = self._get(session_id)
        return self._seq[session_id], record

    async def save(
        self, seq: Seq, record: SessionRecord, names: Sequence[str], fence: int | None
    ) -> None:
        self._records[self._ids[seq]] = record

    async def insert_row(self, record: SessionRecord) -> Seq:
        if record.session_id in self._records:
            raise StoreError(f"session {record.session_id} already exists")
        seq = self._next_seq
        self._next_seq += 1
        self._records[record.session_id] = record
        self._seq[record.session_id] = seq
        self._ids[seq] = record.session_id
        self._transcripts[record.session_id] = []
        return seq

    async def add_message(self, seq: Seq, index: int, body: str) -> None:
        rows = self._transcripts[self._ids[seq]]
        if index != len(rows):
            raise StoreError(f"session {self._ids[seq]}: row {index} after {len(rows)} rows")
        rows.append(body)

    async def add_messages(self, seq: Seq, bodies: Sequence[str]) -> None:
        self._transcripts[self._ids[seq]].extend(bodies)

    async def copy_messages(self, source: Seq, seq: Seq, count: int) -> None:
        self._transcripts[self._ids[seq]] = self._transcripts[self._ids[source]][:count]

    async def live_rows(self) -> list[tuple[Seq, SessionRecord]]:
        return [
            (self._seq[sid], record)
            for sid, record in self._records.items()
            if record.status in LIVE_STATES
        ]

    async def _listed(
        self,
        *,
        cwd: str | None,
        cursor: ListCursor | None,
        rows: int,
        query: str | None,
        archived: bool | None,
    ) -> list[tuple[Seq, SessionRecord]]:
        words = search.terms(query)
        ordered = sorted(
            ((record.updated_at, self._seq[sid], sid) for sid, record in self._records.items()),
            reverse=True,
        )
        found: list[tuple[Seq, SessionRecord]] = []
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
                    (record.title,),
                    (search.row_text(json.loads(b)) for b in self._transcripts[session_id]),
                ),
            ):
                continue
            found.append((seq, record))
            if len(found) == rows:
                break
        return found

    async def _messages(self, session_id: str, start: int, stop: int) -> list[dict[str, Any]]:
        self._get(session_id)
        return [json.loads(body) for body in self._transcripts[session_id][start:stop]]

    # ---- the rest of SessionStore ------------------------------------------------------

    async def get(self, session_id: str) -> SessionRecord:
        return self._get(session_id)

    async def delete(self, session_id: str) -> None:
        self._get(session_id)
        del self._records[session_id]
        del self._ids[self._seq.pop(session_id)]
        del self._transcripts[session_id]

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        held = set()
        for session_id, record in self._records.items():
            if record.lease_owner == owner:
                self._records[session_id] = record.replace(lease_expires=expires)
                held.add(session_id)
        return held

    async def clock(self) -> float:
        return time.time()

    async def close(self) -> None:
        return None
