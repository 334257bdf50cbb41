"""File changes as values: a diff a user approves, what a turn changed, what a rewind did;
and the project instruction files (AGENTS.md) a builtin session's prompt holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One file's change, shown whole: `old_text` None for a file that does not exist yet."""

    path: str  # absolute (ACP wants absolute paths)
    old_text: str | None
    new_text: str


@dataclass(frozen=True, slots=True)
class Location:
    path: str  # absolute
    line: int | None = None


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """A project instruction file (AGENTS.md, CLAUDE.md) as the session's summary shows it:
    observed by the live runtime (`agent/instructions.py`), never stored."""

    path: str  # absolute
    size: int  # bytes on disk
    cut: bool  # only its first part is in the prompt (the cut is marked there)
    skipped: str | None = None  # why it is not in the prompt at all (binary, outside)


class FileStatus(StrEnum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str  # relative to the session cwd
    status: FileStatus
    additions: int
    deletions: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file checkpoints leave out (too large, a nested repository): never restored."""

    path: str
    reason: str


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff, with the id every listing gives it
    (`sidecar/worktrees/hunks.py` parses and names them)."""

    id: str
    header: str  # the whole "@@ -a,b +c,d @@ context" line
    lines: tuple[str, ...]  # each with its leading ' ', '+', '-' or '\\'


@dataclass(frozen=True, slots=True)
class TurnChanges:
    """What one turn changed in the working tree (by any tool), from its checkpoints."""

    turn: int
    files: tuple[FileChange, ...]
    total: int  # files changed (`files` may hold fewer: bounded)
    diff: str | None = None  # unified diff (bounded), when asked for
    diff_truncated: bool = False
    skipped: tuple[Skipped, ...] = ()  # left out of the checkpoints (as of the last one)
    # Each file's hunks, by path, when the diff is whole (a cut one's last hunk may be
    # partial: then None, as without a diff).
    hunks: Mapping[str, tuple[Hunk, ...]] | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class CodeRewind:
    """A code rewind's result (or, dry, its plan)."""

    restored: tuple[str, ...]  # written back to their checkpointed content
    removed: tuple[str, ...]  # created by the session since: deleted
    conflicts: tuple[Conflict, ...]  # changed outside the session since: left alone
    checkpoint: int | None  # the rewind's own number (undo it with `undo`), when done
