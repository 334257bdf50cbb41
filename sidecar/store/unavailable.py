"""The store that could not be opened, standing in so the sidecar stays up.

A corrupt, foreign, too-new or unreadable database must not crash the sidecar at
start (its host would restart it in a loop, and the client would only see a dead
pipe). Instead every store operation fails with the reason, which reaches the
client as a store error, and nothing is written anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NoReturn

from typing_extensions import Unpack

from sidecar.domain.errors import StoreError
from sidecar.domain.records import SessionRecord
from sidecar.store.base import ListCursor, OrphanTest, RecordChanges, Row


class UnavailableStore:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def _fail(self) -> NoReturn:
        raise StoreError(f"the session store is unavailable: {self.reason}")

    async def insert(self, record: SessionRecord) -> None:
        self._fail()

    async def get(self, session_id: str) -> SessionRecord:
        self._fail()

    async def list_page(
        self,
        *,
        cwd: str | None = None,
        cursor: ListCursor | None = None,
        limit: int = 100,
        query: str | None = None,
        archived: bool | None = False,
    ) -> tuple[list[SessionRecord], ListCursor | None]:
        self._fail()

    async def update(
        self,
        session_id: str,
        generation: int,
        *,
        append: Row | None = None,
        **changes: Unpack[RecordChanges],
    ) -> SessionRecord:
        self._fail()

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
        self._fail()

    async def begin_generation(
        self,
        session_id: str,
        expected_generation: int,
        *,
        lease_owner: str | None = None,
        lease_expires: float | None = None,
    ) -> SessionRecord:
        self._fail()

    async def renew_leases(self, owner: str, expires: float) -> set[str]:
        return set()  # nothing can be held

    async def append_message(self, session_id: str, generation: int, row: Row) -> int:
        self._fail()

    async def messages(
        self, session_id: str, offset: int = 0, limit: int = 100
    ) -> list[dict[str, Any]]:
        self._fail()

    async def fork(self, source_id: str, record: SessionRecord, upto: int) -> SessionRecord:
        self._fail()

    async def insert_with_transcript(
        self, record: SessionRecord, rows: Sequence[Row]
    ) -> SessionRecord:
        self._fail()

    async def delete(self, session_id: str) -> None:
        self._fail()

    async def reconcile_orphans(self, is_orphan: OrphanTest | None = None) -> list[SessionRecord]:
        return []  # nothing readable to reconcile

    async def reconcile_one(self, session_id: str, is_orphan: OrphanTest) -> SessionRecord:
        self._fail()

    async def clock(self) -> float:
        return time.time()  # leases need a clock even when nothing can be held

    async def close(self) -> None:
        return None
