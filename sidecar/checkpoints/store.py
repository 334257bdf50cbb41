"""Where sessions' shadow repositories live, and their life with the session record:
copied by fork, removed by delete. One directory per session under the data dir.

Also which session directories are never snapshotted, decided from their path alone (no
walk, before any git runs): `/` (the whole file system), the home directory when the data
dir is inside it (the default layout: a session opened in `$HOME`), and any directory
inside the data dir. Those sessions run without checkpoints and say why.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Final

from sidecar.checkpoints.git import git_binary
from sidecar.checkpoints.history import history, rewind_ref, turn_ref
from sidecar.checkpoints.shadow import ShadowRepo
from sidecar.domain.errors import CheckpointError
from sidecar.fs.trash import move_aside
from sidecar.fs.tree_watch import WatchBudget

DEFAULT_MAX_FILE_BYTES: Final = 10 * 1024 * 1024
# Files a tree may have to be snapshotted (0: no bound). A large real project is well
# inside it (the Linux kernel has about 80,000), and so is a snapshot of it: git's stat
# walk of 100,000 unchanged files is a fraction of a second per turn, its index about
# 10 MB. Past it a directory is rarely a project (a home directory, a whole disk, a tree
# of build output), and one snapshot of it costs minutes and gigabytes.
DEFAULT_MAX_FILES: Final = 100_000
OFF: Final = "checkpoints are off for this session: "
_SAFE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


class CheckpointStore:
    def __init__(
        self,
        root: Path | None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        git: str | None = None,
        *,
        max_files: int = DEFAULT_MAX_FILES,
        data_dir: Path | None = None,
    ) -> None:
        self.root = root  # None: checkpoints are off
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files
        # The sidecar's data dir (default: the one the checkpoints are in): never snapshotted.
        self.data_dir = data_dir if data_dir is not None or root is None else root.parent
        self._git = git if git is not None else git_binary()
        # What the runtimes' watches of their trees may hold together (`fs/tree_watch.py`).
        self.watches = WatchBudget()

    @property
    def problem(self) -> str | None:
        """Why there are no checkpoints, if there are none."""
        if self.root is None:
            return "checkpoints are turned off (--no-checkpoints)"
        if self._git is None:
            return "checkpoints need git, and git is not installed"
        return None

    def refusal(self, cwd: str) -> str | None:
        """Why a session in `cwd` is never snapshotted, if it is not (from the path alone)."""
        real = os.path.realpath(cwd)
        if real == "/":
            return (
                OFF + "its directory is / (the whole file system), which is not a project; "
                "open the session in the project's own directory"
            )
        if self.data_dir is None:
            return None
        store = os.path.realpath(self.data_dir)
        if real == store or real.startswith(store + "/"):
            return OFF + f"its directory {cwd} is inside the sidecar's data dir {store}"
        home = os.path.realpath(os.path.expanduser("~"))
        if real == home and store.startswith(home + "/"):
            return (
                OFF + f"its directory {cwd} is the home directory, which holds the "
                f"sidecar's data dir ({store}); open the session in a project directory"
            )
        return None

    def _dir(self, session_id: str) -> Path:
        if self.root is None or not _SAFE_ID.fullmatch(session_id):
            raise CheckpointError(f"no checkpoints for session {session_id!r}")
        return self.root / session_id

    def repo(self, session_id: str, cwd: str) -> ShadowRepo:
        problem = self.problem or self.refusal(cwd)
        if problem is not None:
            raise CheckpointError(problem)
        assert self._git is not None
        return ShadowRepo(
            self._dir(session_id),
            cwd,
            self.max_file_bytes,
            self._git,
            max_files=self.max_files,
            data_dir=self.data_dir,
            watch=self.watches,
        )

    def detach(self, session_id: str) -> Path | None:
        """Move the session's repository aside (`sidecar.fs.trash`); where it went."""
        if self.root is None:
            return None
        return move_aside(self._dir(session_id))

    async def remove(self, session_id: str) -> None:
        if self.root is None:
            return
        repo = ShadowRepo(self._dir(session_id), "/", self.max_file_bytes, self._git or "git")
        await asyncio.to_thread(repo.remove)

    async def fork(self, source_id: str, dest_id: str, cwd: str, before_turn: int | None) -> None:
        """The new session starts with the source's checkpoints; forked before a turn, it
        keeps only those of the turns it has."""
        if self.problem is not None:
            return
        source = self.repo(source_id, cwd)
        if not source.exists:
            return
        dest = self.repo(dest_id, cwd)
        await asyncio.to_thread(source.copy_to, dest.git_dir)
        if before_turn is None:
            return
        later = []
        for step in await history(dest):
            turns, kind, number = step.key
            if kind == 0 and turns >= before_turn:
                later += [turn_ref(turns, "before"), turn_ref(turns, "after")]
            elif kind == 1 and turns >= before_turn:
                name = rewind_ref(turns, number)
                later += [name + "/before", name + "/after"]
        existing = await dest.refs("refs/turns/", "refs/rewinds/")
        await dest.delete_refs(name for name in later if name in existing)
