"""What the runtime's parts see of it: narrow typed interfaces instead of the owner object.

The runtime (`runtime.py`) is the one writer of its record and status; its parts (turns,
compaction, rewind, approvals) are handed the runtime as these protocols, so each names
exactly what it uses and none imports the runtime back: `sidecar/core/` stays a DAG
(`.importlinter`, type-checking imports included). A part's own, wider needs are its
protocol, in its module (`turns.TurnOwner`, `approvals.ApprovalOwner`, ...), built on
`RecordWriter` here.
"""

from __future__ import annotations

from typing import Protocol

from typing_extensions import Unpack

from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import Entry
from sidecar.store.base import RecordChanges


class RecordWriter(Protocol):
    """One runtime generation's record: as it last wrote it, and its one fenced write."""

    @property
    def session_id(self) -> str: ...

    @property
    def generation(self) -> int: ...

    @property
    def record(self) -> SessionRecord: ...

    async def write(
        self, *, append: Entry | None = None, **changes: Unpack[RecordChanges]
    ) -> SessionRecord:
        """Fenced by the generation; `append` joins the transcript in the same write."""
        ...

    async def stored(self) -> SessionRecord:
        """The record as stored now (rows appended alone included)."""
        ...
