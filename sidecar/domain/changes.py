"""Record changes every store applies the same way: fencing, updates, new generations,
lease renewal and closing orphans.

A store reads the row, asks one of these functions for the new record (or for a
refusal), and writes it back in the same transaction. The rules live here once, so
the memory, SQLite and PostgreSQL stores cannot drift apart.

The version rule: every function here that changes a record returns it with `version`
one higher (`bumped`); a store writes one of them per change (a change that comes with a
transcript row is `updated_appending`, one bump, not two). Closing an orphan that was
running is two changes (closed, then the interrupted marker appended): two bumps, the
same in every store. A lease renewal is not a change of the record (`renew_leases`
writes only lease_expires, shown nowhere): no bump.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocol.values import Approval, Sandbox, Status
from sidecar.domain.errors import StaleGeneration
from sidecar.domain.records import (
    LIVE_STATES,
    METADATA_FIELDS,
    UPDATABLE_FIELDS,
    SessionRecord,
)


def check_fence(record: SessionRecord, generation: int) -> None:
    """A write names its runtime's generation: refused unless it is the record's current one
    and that generation is not over (a closed generation may say nothing more)."""
    if record.generation != generation or record.status is Status.CLOSED:
        raise StaleGeneration(record.session_id, generation, record.generation)


def validated_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Only UPDATABLE_FIELDS may change; a status is normalised to `Status`."""
    unknown = set(changes) - UPDATABLE_FIELDS
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    checked = dict(changes)
    if "status" in checked:
        checked["status"] = Status(checked["status"])
    if "approval" in checked:
        checked["approval"] = Approval(checked["approval"])
    if checked.get("sandbox") is not None:
        checked["sandbox"] = Sandbox(checked["sandbox"])
    return checked


def validated_metadata(changes: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(changes) - METADATA_FIELDS
    if unknown:
        raise ValueError(f"not metadata: {sorted(unknown)}")
    return dict(changes)


def bumped(record: SessionRecord) -> int:
    """The version a change of `record` gives it."""
    return record.version + 1


def updated(record: SessionRecord, changes: Mapping[str, Any], at: float) -> SessionRecord:
    return record.replace(**changes, updated_at=at, version=bumped(record))


def updated_appending(
    record: SessionRecord, changes: Mapping[str, Any], at: float
) -> SessionRecord:
    """`updated` and `appended` in one record: a change that came with a transcript row."""
    return record.replace(
        **changes, message_count=record.message_count + 1, updated_at=at, version=bumped(record)
    )


def appended(record: SessionRecord, at: float) -> SessionRecord:
    """One more transcript entry: the next index is the current message count."""
    return record.replace(
        message_count=record.message_count + 1, updated_at=at, version=bumped(record)
    )


def new_generation(
    record: SessionRecord,
    expected_generation: int,
    *,
    lease_owner: str | None,
    lease_expires: float | None,
    at: float,
) -> SessionRecord:
    """Resume: compare-and-set the generation; creating, last error cleared, interrupted
    kept, the lease taken by the new runtime's process."""
    if record.generation != expected_generation:
        raise StaleGeneration(record.session_id, expected_generation, record.generation)
    return record.replace(
        generation=record.generation + 1,
        status=Status.CREATING,
        last_error=None,
        lease_owner=lease_owner,
        lease_expires=lease_expires,
        updated_at=at,
        version=bumped(record),
    )


def closed_orphan(record: SessionRecord, at: float) -> tuple[SessionRecord, bool]:
    """A live-looking record whose runtime is gone: closed, lease released, interrupted if
    a turn was running. The flag says whether the interrupted marker must be appended."""
    if record.status not in LIVE_STATES:
        raise ValueError(f"session {record.session_id} is {record.status.value}, not live")
    was_running = record.status is Status.RUNNING
    return (
        record.replace(
            status=Status.CLOSED,
            interrupted=record.interrupted or was_running,
            lease_owner=None,
            lease_expires=None,
            updated_at=at,
            version=bumped(record),
        ),
        was_running,
    )


def forked(record: SessionRecord, copied: int) -> SessionRecord:
    """A new session's record, with the number of transcript entries copied into it; its
    version starts at 1 (a fork or an import is a new session, not a change of one)."""
    if record.message_count != 0:
        raise ValueError("a new session record must have message_count 0")
    return record.replace(message_count=copied, version=1)
