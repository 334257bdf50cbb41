"""The session summary: the durable record joined with what is live right now.

The store never claims liveness; this join is the only place `live` and
`http` are decided, from the runtime registry of this process.
"""

from __future__ import annotations

from typing import Any

from protocol.models import HttpEndpoint, SessionSummary
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
    http = None
    if live and url is not None:
        http = HttpEndpoint(url=url, token=token if include_token else None)
    summary = SessionSummary(
        session_id=record.session_id,
        cwd=record.cwd,
        title=record.title,
        status=record.status.value,  # type: ignore[arg-type]
        mode=record.mode,  # type: ignore[arg-type]
        backend=record.backend,  # type: ignore[arg-type]
        effective_backend=record.backend,  # type: ignore[arg-type]
        generation=record.generation,
        live=live,
        message_count=record.message_count,
        last_error=record.last_error,
        interrupted=record.interrupted,
        forked_from=record.forked_from,
        held_by=held_by,
        created_at=iso(record.created_at),
        updated_at=iso(record.updated_at),
        http=http,
    )
    return summary.to_wire()
