"""What a turn changed and what a rewind did, as the wire's JSON (`_session/changes`,
`_session/turn_changes`, `_session/rewind`, and their HTTP twins: `GET /agent/changes`,
the SSE `turn_changes`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.core.views import RewindOutcome
from sidecar.domain.files import Hunk, TurnChanges


def changes_body(changes: TurnChanges, *, with_diff: bool = False) -> dict[str, Any]:
    """With the diff, each file also has its hunks (ids included) when the diff is whole."""
    body: dict[str, Any] = {
        "turn": changes.turn,
        "files": [
            {
                "path": f.path,
                "status": f.status.value,
                "additions": f.additions,
                "deletions": f.deletions,
            }
            for f in changes.files
        ],
        "total": changes.total,
        "skipped": [{"path": s.path, "reason": s.reason} for s in changes.skipped],
    }
    if with_diff:
        body["diff"] = changes.diff or ""
        body["diffTruncated"] = changes.diff_truncated
        if changes.hunks is not None:
            for entry in body["files"]:
                entry["hunks"] = hunk_bodies(changes.hunks.get(entry["path"], ()))
    return body


def hunk_bodies(hunks: Sequence[Hunk]) -> list[dict[str, Any]]:
    return [{"id": hunk.id, "header": hunk.header, "lines": list(hunk.lines)} for hunk in hunks]


def rewind_body(outcome: RewindOutcome) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scope": outcome.scope.value,
        "turn": outcome.turn,
        "dryRun": outcome.dry_run,
        "cancelled": outcome.cancelled,
    }
    if outcome.code is not None:
        code = outcome.code
        body["code"] = {
            "restored": list(code.restored),
            "removed": list(code.removed),
            "conflicts": [{"path": c.path, "reason": c.reason} for c in code.conflicts],
            "rewind": code.checkpoint,
        }
    if outcome.marker_index is not None:
        body["conversation"] = {"markerIndex": outcome.marker_index}
    return body
