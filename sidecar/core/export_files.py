"""Export files: reading one for `_session/import` (regular files only, bounded, never
blocking) and writing one for `_session/export` (atomically, owner-only, through no
planted name). The ACP edge only names the path.

The path comes from the client and may name anything: a FIFO (an `open` for reading
waits for a writer forever, and the thread doing it then keeps the process from
exiting), `/dev/stdin` (which is the sidecar's own protocol stream: reading it swallows
the client's next requests), `/dev/zero` (endless), a directory, a socket. So the file
is opened with O_NONBLOCK (an open of a FIFO returns at once) and O_NOCTTY, and the
*opened* descriptor is checked with fstat -- no window between a check and the open for
the path to be swapped -- before a byte is read: anything but a regular file is
refused, naming what it is, and so is a file whose size is over the bound. The read
itself stops at the bound too (procfs files claim size 0). Blocking calls: run it in a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator

from sidecar.domain.errors import InvalidInput

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (a pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(path: str, mode: int) -> InvalidInput:
    return InvalidInput("path", f"{path} is {_kind(mode)}: an export is read from a regular file")


def _too_large(path: str, limit: int) -> InvalidInput:
    return InvalidInput("path", f"{path} is over {limit // (1024 * 1024)} MiB")


def read_export(path: str, limit: int) -> str:
    """The UTF-8 text of the regular file at `path` (at most `limit` bytes). Raises
    InvalidInput("path", ...) saying what is wrong: missing, unreadable, not a regular
    file (and what it is), too large, not UTF-8."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        try:
            mode = os.stat(path).st_mode  # a socket cannot be opened (ENXIO): say what it is
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise _refusal(path, mode) from None
        raise InvalidInput("path", f"cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(path, info.st_mode)
        if info.st_size > limit:
            raise _too_large(path, limit)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InvalidInput("path", f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise _too_large(path, limit)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("path", f"{path} is not UTF-8 text ({exc.reason})") from None


def check_directory(directory: str) -> None:
    """Refuses a directory an export cannot go to (blocking: run it in a worker thread)."""
    if not os.path.isdir(directory):
        raise InvalidInput("directory", f"no such directory: {directory}")


async def write_export(path: str, chunks: AsyncIterator[str]) -> int:
    """Write next to `path`, then rename over it: a reader never sees half an export.
    Owner-only (a transcript may hold secrets). Returns the bytes written.

    The temporary file is created new (O_EXCL|O_NOFOLLOW, after removing whatever has
    its name: unlink never follows a symlink): one planted under that name -- the
    directory may be a session's cwd, writable by its commands -- cannot send the
    export elsewhere. The rename replaces `path` itself, a symlink there included."""
    temporary = f"{path}.{os.getpid()}.partial"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise InvalidInput("directory", f"cannot write {temporary}: {exc.strerror}") from None
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in chunks:
                data = chunk.encode()
                await asyncio.to_thread(out.write, data)
                size += len(data)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise InvalidInput("directory", f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return size
