"""Files of the shadow repository replaced whole: a reader sees the old or the new one."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """`durable`: on disk before the rename (a journal, a record); False for a hint that is
    rebuilt if lost (the cost of an fsync each time is not worth it)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)


def remove_quietly(path: Path) -> None:
    """A scratch file gone or never made: either is fine."""
    path.unlink(missing_ok=True)
