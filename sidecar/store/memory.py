"""In-process store for tests and `--store memory`. Same contract as SQLite, no disk."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sidecar.errors import SessionNotFound, StaleGeneration, StoreError
from sidecar.records import (
    LIVE_STATES,
    UPDATABLE_FIELDS,
    SessionRecord,
    SessionState,
    now,
)
from sidecar.store.base import INTERRUPTED_MARKER


class MemorySessionStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, SessionRecord] = {}
        self._seq: dict[str, int] = {}
        self._transcripts: dict[str, list[dict[str, Any]]] = {}
        self._next_seq = 1

    def insert(self, record: SessionRecord) -> None:
        with self._lock:
            if record.session_id in self._records:
                raise StoreError(f"session {record.session_id} already exists")
            self._records[record.session_id] = record
            self._seq[record.session_id] = self._next_seq
            self._next_seq += 1
            self._transcripts[record.session_id] = []

    def get(self, session_id: str) -> SessionRecord:
        with self._lock:
            return self._get(session_id)

    def _get(self, session_id: str) -> SessionRecord:
        try:
            return self._records[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    def list_page(
        self, *, cwd: str | None = None, cursor: int | None = None, limit: int = 100
    ) -> tuple[list[SessionRecord], int | None]:
        with self._lock:
            ordered = sorted(self._seq.items(), key=lambda item: item[1], reverse=True)
            page: list[SessionRecord] = []
            last_seq: int | None = None
            for session_id, seq in ordered:
                if cursor is not None and seq >= cursor:
                    continue
                record = self._records[session_id]
                if cwd is not None and record.cwd != cwd:
                    continue
                if len(page) == limit:
                    return page, last_seq
                page.append(record)
                last_seq = seq
            return page, None

    def _fenced(self, session_id: str, generation: int) -> SessionRecord:
        record = self._get(session_id)
        if record.generation != generation or record.status is SessionState.CLOSED:
            raise StaleGeneration(session_id, generation, record.generation)
        return record

    def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> SessionRecord:
        unknown = set(changes) - UPDATABLE_FIELDS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        if "status" in changes:
            changes["status"] = SessionState(changes["status"])
        with self._lock:
            record = self._fenced(session_id, generation)
            if append is not None:
                self._append(record, append)  # checks the message before changing anything
                record = self._records[session_id]
            updated = record.replace(**changes, updated_at=now())
            self._records[session_id] = updated
            return updated

    def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        with self._lock:
            record = self._get(session_id)
            if record.generation != expected_generation:
                raise StaleGeneration(session_id, expected_generation, record.generation)
            updated = record.replace(
                generation=record.generation + 1,
                status=SessionState.CREATING,
                last_error=None,
                lease_owner=lease_owner,
                lease_expires=lease_expires,
                updated_at=now(),
            )
            self._records[session_id] = updated
            return updated

    def append_message(self, session_id: str, generation: int, message: Mapping[str, Any]) -> int:
        with self._lock:
            record = self._fenced(session_id, generation)
            return self._append(record, message)

    def _append(self, record: SessionRecord, message: Mapping[str, Any]) -> int:
        transcript = self._transcripts[record.session_id]
        try:
            # A JSON round trip: the same copy semantics and the same refusals as SQLite.
            stored = json.loads(json.dumps(dict(message)))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"message is not JSON-serialisable: {exc}") from None
        transcript.append(stored)
        self._records[record.session_id] = record.replace(
            message_count=len(transcript), updated_at=now()
        )
        return len(transcript) - 1

    def messages(self, session_id: str, offset: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            self._get(session_id)
            return copy.deepcopy(self._transcripts[session_id][offset : offset + limit])

    def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        with self._lock:
            self._get(source_id)
            if record.session_id in self._records:
                raise StoreError(f"session {record.session_id} already exists")
            copied = copy.deepcopy(self._transcripts[source_id][: max(upto, 0)])
            stored = record.replace(message_count=len(copied))
            self._records[stored.session_id] = stored
            self._seq[stored.session_id] = self._next_seq
            self._next_seq += 1
            self._transcripts[stored.session_id] = copied
            return stored

    def delete(self, session_id: str) -> None:
        with self._lock:
            self._get(session_id)
            del self._records[session_id]
            del self._seq[session_id]
            del self._transcripts[session_id]

    def renew_leases(self, owner: str, expires: float) -> set[str]:
        with self._lock:
            held = set()
            for session_id, record in self._records.items():
                if record.lease_owner == owner:
                    self._records[session_id] = record.replace(lease_expires=expires)
                    held.add(session_id)
            return held

    def reconcile_orphans(
        self, is_orphan: Callable[[SessionRecord], bool] | None = None
    ) -> list[SessionRecord]:
        with self._lock:
            changed: list[SessionRecord] = []
            for session_id, record in list(self._records.items()):
                if record.status not in LIVE_STATES:
                    continue
                if is_orphan is not None and not is_orphan(record):
                    continue
                was_running = record.status is SessionState.RUNNING
                updated = record.replace(
                    status=SessionState.CLOSED,
                    interrupted=record.interrupted or was_running,
                    lease_owner=None,
                    lease_expires=None,
                    updated_at=now(),
                )
                self._records[session_id] = updated
                if was_running:
                    self._append(updated, INTERRUPTED_MARKER)
                changed.append(self._records[session_id])
            return changed

    def close(self) -> None:
        return None
