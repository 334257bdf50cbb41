"""The data dir and database files are private: 0700 and 0600, ours, and never symlinks.

Sessions hold prompts, command output and file contents. A data dir that already
exists with a looser mode (0755, 0777) or a `sessions.db` created 0644 by an older
tool is tightened and logged, not used silently as it is. A data dir owned by another
user is refused (that user could read or replace every session). A database path that
is a symlink is refused rather than followed: a dangling link would otherwise create
its target wherever it points, with whatever mode.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Final

from sidecar.domain.errors import StoreError

log = logging.getLogger(__name__)

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
SIDE_FILES: Final = ("-wal", "-shm", "-journal")


def _refuse(path: Path, why: str) -> StoreError:
    return StoreError(f"cannot open session store {path}: {why}")


def _check_owner(path: Path, info: os.stat_result, what: str) -> None:
    if info.st_uid != os.geteuid():
        raise _refuse(
            path,
            f"the {what} is owned by uid {info.st_uid}, not by this user ({os.geteuid()}); "
            "another user could read or replace the sessions. Use a data dir of your own "
            "(--data-dir or SIDECAR_DATA_DIR)",
        )


def _tighten(path: Path, info: os.stat_result, mode: int, what: str) -> None:
    current = stat.S_IMODE(info.st_mode)
    if current & ~mode:
        os.chmod(path, mode)
        log.warning("tightened the %s %s from %04o to %04o", what, path, current, mode)


def secure_data_dir(directory: Path) -> None:
    """Create the data dir 0700, or check an existing one: ours, a directory, tightened."""
    if not directory.exists():
        directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        os.chmod(directory, DIR_MODE)  # mkdir's mode is narrowed by the umask; be exact
        return
    info = directory.stat()  # a symlinked data dir is fine; its target must be ours
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(directory, "the data dir is not a directory")
    _check_owner(directory, info, "data dir")
    _tighten(directory, info, DIR_MODE, "data dir")


def _secure_file(path: Path, *, create: bool) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        if create:
            flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW
            try:
                os.close(os.open(path, flags, FILE_MODE))
            except FileExistsError:
                _secure_file(path, create=False)  # made meanwhile (another sidecar): check it
        return
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(path, "it is a symbolic link; refusing to follow it")
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(path, "it is not a regular file")
    _check_owner(path, info, "database file")
    _tighten(path, info, FILE_MODE, "database file")


def secure_database(path: Path) -> None:
    """The database file (created 0600 if missing) and its WAL/SHM/journal side files."""
    secure_data_dir(path.parent)
    _secure_file(path, create=True)
    for suffix in SIDE_FILES:
        _secure_file(path.with_name(path.name + suffix), create=False)
