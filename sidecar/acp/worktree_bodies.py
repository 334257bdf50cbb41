"""A worktree's diff in our wire shape: files with their hunks (ids stable across calls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.worktrees.hunks import FileDiff, Hunk


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


def hunk_bodies(hunks: Sequence[Hunk]) -> list[dict[str, Any]]:
    return [{"id": hunk.id, "header": hunk.header, "lines": list(hunk.lines)} for hunk in hunks]
