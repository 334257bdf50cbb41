"""The session summary: the durable record joined with what is live right now.

The store never claims liveness; this join is the only place `live` and
`http` are decided, from the runtime registry of this process.
"""

from __future__ import annotations

from typing import Any

from sidecar.records import SessionRecord, iso


def build_summary(
    record: SessionRecord,
    *,
    held_by: str | None = None,
    live: bool,
    url: str | None,
    token: str | None,
    include_token: bool,
) -> dict[str, Any]:
    # Built as a plain dict: this runs on every status request and every list entry.
    # Its shape is `protocol.models.SessionSummary` (tests/test_records_and_events.py checks).
    http = None
    if live and url is not None:
        http = {"url": url, "token": token if include_token else None}
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "title": record.title,
        "status": record.status.value,
        "mode": record.mode,
        "backend": record.backend,
        "effectiveBackend": record.backend,
        "generation": record.generation,
        "live": live,
        "messageCount": record.message_count,
        "lastError": record.last_error,
        "interrupted": record.interrupted,
        "forkedFrom": record.forked_from,
        "heldBy": held_by,
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at),
        "http": http,
    }
