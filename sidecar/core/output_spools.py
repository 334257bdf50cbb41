"""Whole command output, spooled to a file per tool call, for the user to read later.

The model gets a bounded part of a command's output (`--tool-output-cap`); the rest would
be lost once the live stream is gone. Each command's output goes to
`<data-dir>/output/<sessionId>/<sha256(toolCallId)>.out`, up to `--tool-spool-cap` bytes,
readable in pages with `_session/output`, removed with the session. File names are a hash
of the call id: ids come from the provider and may hold any character.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from sidecar.domain.errors import InvalidInput
from sidecar.fs.trash import move_aside

DEFAULT_SPOOL_CAP: Final = 64 * 1024 * 1024
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass(frozen=True, slots=True)
class OutputPage:
    data: bytes
    offset: int
    total: int  # bytes spooled


class FileSpool:
    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    def write(self, data: bytes) -> None:
        self._handle.write(data)

    def close(self) -> None:
        self._handle.close()


class OutputSpools:
    def __init__(self, root: Path | None, cap: int = DEFAULT_SPOOL_CAP) -> None:
        self.root = root  # None: nothing is spooled
        self.cap = cap

    def _dir(self, session_id: str) -> Path | None:
        if self.root is None or not _SAFE_ID.fullmatch(session_id):
            return None
        return self.root / session_id

    def _path(self, session_id: str, call_id: str) -> Path | None:
        directory = self._dir(session_id)
        if directory is None:
            return None
        return directory / (hashlib.sha256(call_id.encode()).hexdigest()[:32] + ".out")

    def open(self, session_id: str, call_id: str) -> FileSpool | None:
        """A spool for one command (None when spooling is off or the file cannot be made:
        the command runs anyway)."""
        path = self._path(session_id, call_id)
        if path is None or self.cap <= 0:
            return None
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError:
            return None
        return FileSpool(os.fdopen(fd, "wb", buffering=64 * 1024))

    def read(self, session_id: str, call_id: str, offset: int, limit: int) -> OutputPage:
        path = self._path(session_id, call_id)
        if path is None:
            raise InvalidInput("toolCallId", "no output is kept for this session")
        try:
            with open(path, "rb") as handle:
                total = os.fstat(handle.fileno()).st_size
                handle.seek(min(offset, total))
                return OutputPage(handle.read(limit), min(offset, total), total)
        except FileNotFoundError:
            raise InvalidInput(
                "toolCallId", f"no output is kept for tool call {call_id!r} of this session"
            ) from None

    def detach(self, session_id: str) -> Path | None:
        """Move the session's spools aside (`sidecar.fs.trash`); where they went."""
        return move_aside(self._dir(session_id))

    def remove(self, session_id: str) -> None:
        directory = self._dir(session_id)
        if directory is not None and directory.exists():
            shutil.rmtree(directory)
