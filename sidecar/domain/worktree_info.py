"""A session's own git worktree, as its record keeps it (JSON in `SessionRecord.worktree`):
the main repository, the worktree's directory (the session's cwd), its branch and the
base it started from, and the host whose disk holds it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class WorktreeInfo:
    repo: str
    path: str
    branch: str
    base: str
    host: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | None) -> WorktreeInfo | None:
        """None for a session without one, or for a value this version cannot read."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(
                **{key: str(data[key]) for key in ("repo", "path", "branch", "base", "host")}
            )
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True, slots=True)
class WorktreeState:
    """What git says of it now (asked after each turn of a live session)."""

    ahead: int
    behind: int
    dirty: bool
