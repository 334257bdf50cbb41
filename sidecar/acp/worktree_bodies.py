"""A worktree's diff in our wire shape: files with their hunks (ids stable across calls)."""

from __future__ import annotations

from typing import Any

from sidecar.wire.changes import hunk_bodies
from sidecar.worktrees.hunks import FileDiff


def file_body(diff: FileDiff) -> dict[str, Any]:
    return {
        "path": diff.path,
        "oldPath": diff.old_path,
        "status": diff.status,
        "binary": diff.binary,
        "additions": diff.additions,
        "deletions": diff.deletions,
        "hunks": hunk_bodies(diff.hunks),
    }
