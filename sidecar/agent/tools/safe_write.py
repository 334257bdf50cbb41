"""Replace a file at exactly the approved path, never through a symlink nobody asked for.

Why: the agent's own commands can change the cwd at any moment, including while the user
is deciding on a write. A write by path name re-resolves that name when it acts, so a
symlink planted in the meantime (at the temporary file's name, at the target, or in place
of a parent directory) would send the approved text, and the approved file's mode, to a
file outside the cwd. Here nothing is resolved twice:

- The directory is reached from `/` one component at a time, each opened with
  `O_PATH|O_DIRECTORY|O_NOFOLLOW` relative to the one before (`openat`-style). The target
  was planned as a real path (`files.resolve`: no symlink in it), so a component that is a
  symlink now was swapped since the approval: `Changed`, nothing written. A missing
  directory is created (as `mkdir -p` would) and then opened the same way.
- The current file is opened `O_NOFOLLOW|O_NONBLOCK` in that directory and its content
  compared with what was approved (`fingerprint`); a symlink or a special file there now is
  `Changed` too.
- The new content goes to a temporary file with a random name (`secrets.token_hex`),
  created `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted name cannot be opened, only collided
  with), given the old file's mode with `fchmod` (a new file gets `NEW_FILE_MODE`; as root
  the old owner too, with `fchown`), fsynced, and renamed over the target with both names
  relative to the directory's descriptor. Any failure removes the temporary file.

A rename replaces a name, never writes into an inode: a hard link to a file elsewhere is
replaced in the cwd, the file elsewhere left as it was.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Final

NEW_FILE_MODE: Final = 0o644  # a new file's mode (an existing file keeps its own)
NAME_MAX: Final = 255  # bytes in one path component (Linux, every common filesystem)
_DIRECTORY: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Changed(Exception):
    """The path or the file is no longer what was approved; the text says what (or is
    empty when only the content differs)."""


def fingerprint(data: bytes | None) -> str | None:
    """What `replace` compares: a file's content (None: there was no file)."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to `limit` + 1 bytes from `fd` (one more than allowed tells a caller it is too
    much, whatever the file's size said)."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def replace(target: Path, data: bytes, approved: str | None, limit: int) -> None:
    """Write `data` as `target` (a real path: no symlink in it when it was planned) if the
    file there is still the one approved (`approved`: its fingerprint, None for no file).
    Raises `Changed`, or the OSError that stopped it."""
    parent = _open_directory(target.parent)
    try:
        current = _current(parent, target, limit)
        if fingerprint(None if current is None else current[1]) != approved:
            raise Changed("")
        _write_and_rename(parent, target.name, data, None if current is None else current[0])
    finally:
        os.close(parent)


def _open_directory(directory: Path) -> int:
    """An O_PATH descriptor of `directory`, reached from `/` without following a symlink."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    here = Path("/")
    try:
        for name in directory.parts[1:]:
            here = here / name
            step = _step(fd, name, here)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(parent: int, name: str, here: Path) -> int:
    for _ in range(3):  # a directory made (or removed) by someone else meanwhile: look again
        try:
            return os.open(name, _DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            if _is_symlink(parent, name):
                raise Changed(f"{here} is now a symbolic link") from None
            raise NotADirectoryError(
                errno.ENOTDIR, f"{here} is not a directory", str(here)
            ) from None
    raise FileNotFoundError(errno.ENOENT, f"{here} keeps disappearing", str(here))


def _is_symlink(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _current(parent: int, target: Path, limit: int) -> tuple[os.stat_result, bytes] | None:
    """The file now at the target (its status and up to `limit` + 1 bytes), None if none."""
    try:
        fd = os.open(target.name, _READ, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Changed(f"{target} is now a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Changed(f"{target} is no longer a regular file")
        return info, read_at_most(fd, limit)
    finally:
        os.close(fd)


def _temporary_name(name: str) -> str:
    """`.<name>.tmp-<random>`, the name cut so the whole fits in one component."""
    suffix = f".tmp-{secrets.token_hex(8)}"
    kept = os.fsencode(name)[: NAME_MAX - len(suffix) - 1]
    return "." + os.fsdecode(kept) + suffix


def _write_and_rename(parent: int, name: str, data: bytes, old: os.stat_result | None) -> None:
    temporary = _temporary_name(name)
    fd = os.open(temporary, _CREATE, 0o600, dir_fd=parent)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if old is not None and os.geteuid() == 0:
                os.fchown(fd, old.st_uid, old.st_gid)  # before fchmod: chown clears setuid
            os.fchmod(fd, NEW_FILE_MODE if old is None else stat.S_IMODE(old.st_mode))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
