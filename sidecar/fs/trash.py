"""Deleted sessions' directories: moved aside at once, removed after the answer.

Removing a tree costs one unlink per file -- a fresh shadow repository alone takes tens of
milliseconds on a disk mounted with `discard` -- while the session is already gone from
the store. So `session/delete` renames each of the session's directories into
`<root>/.trash/` (one rename on the same file system: microseconds, and the session's own
path is gone at once) and a worker thread removes the trees afterwards. A sidecar that dies
first leaves them there; the next one sweeps `.trash` at start, in the background. `.trash`
can never be a session's directory: session ids have no dots.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

TRASH: Final = ".trash"


def move_aside(directory: Path | None) -> Path | None:
    """Rename `directory` into its parent's trash; None when there was nothing to move.
    Raises OSError when it exists and cannot be moved."""
    if directory is None:
        return None
    trash = directory.parent / TRASH
    target = trash / f"{directory.name}.{secrets.token_hex(4)}"
    try:
        os.rename(directory, target)
    except FileNotFoundError:
        if not directory.exists():
            return None  # nothing to remove (the common case: no tool ever ran)
        trash.mkdir(mode=0o700, exist_ok=True)  # the first delete under this root
        os.rename(directory, target)
    return target


def _remove(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.error("could not remove %s (a deleted session's files): %s", path, exc)


class Trash:
    """Removes moved-aside trees in a worker thread, one batch at a time per call."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[None]] = set()

    def remove_later(self, paths: Iterable[Path | None]) -> None:
        found = [path for path in paths if path is not None]
        if not found:
            return
        task = asyncio.get_running_loop().run_in_executor(None, _remove, found)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def sweep(self, roots: Iterable[Path | None]) -> None:
        """What a previous process moved aside and did not get to remove."""
        left: list[Path] = []
        for root in roots:
            if root is None:
                continue
            try:
                left.extend((root / TRASH).iterdir())
            except OSError:
                continue  # no trash (or no root): nothing to sweep
        self.remove_later(left)

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
