"""What a turn changed and what a rewind did, as the wire's JSON (`_session/changes`,
`_session/turn_changes`, `_session/rewind`, and their HTTP twins)."""

from __future__ import annotations

from typing import Any

from sidecar.core.views import RewindOutcome
from sidecar.domain.files import TurnChanges


def changes_body(changes: TurnChanges, *, with_diff: bool = False) -> dict[str, Any]:
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
    return body


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
