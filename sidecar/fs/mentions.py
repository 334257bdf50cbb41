"""A mentioned file (an ACP `resource_link` with a `file://` uri, what `@path` sends) as text
for the model: its contents under a heading with its path when it is small UTF-8 text
inside the session's directory, else one line saying what it is and why it was not
inlined. A mention never fails the turn: a path outside the directory, one that vanished,
a directory, a binary or a huge file each become a note the model can read and act on
(with its own tools, which apply their own rules).

Nothing is read whole to find out: the file is opened non-blocking (a FIFO cannot hang
the turn), its size and type come from `fstat`, and at most `limit + 1` bytes are read
(a file that grew past the limit since is caught by that extra byte). The path is
resolved through symlinks before it is judged, so a link inside pointing out is refused
like the path it points to; the resolved path is then opened without following a final
symlink.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, urlsplit

MENTION_MAX: Final = 64 * 1024  # bytes inlined per mentioned file


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def file_path(uri: str) -> str | None:
    """The absolute path a `file://` uri names (percent-decoded), or None when `uri` is
    not a local file uri."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:
        return None
    return os.path.normpath(path)


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class Mentioned:
    """A mentioned file as found: its text when it may be given whole (small UTF-8 text
    inside the session's directory), else the one line saying what it is and why not."""

    shown: str  # its path relative to the session's directory (or the uri, when none)
    text: str | None
    note: str = ""


def mentioned_file(
    uri: str, cwd: str, *, limit: int = MENTION_MAX, hidden: Sequence[str] = ()
) -> Mentioned:
    """The file a `file://` uri names, read if it may be (see the module's docstring).
    `hidden`: directories no session may see (the sidecar's data and config dirs)."""
    path = file_path(uri)
    if path is None:
        return Mentioned(uri, None, f"[mentioned {uri}: not inlined: not a local file:// path]")
    root = os.path.realpath(cwd)
    real = os.path.realpath(path)
    if not _inside(root, real):
        why = f"it is outside the session's directory {cwd}"
        return Mentioned(path, None, f"[mentioned file {path}: not inlined: {why}]")
    shown = os.path.relpath(real, root) if real != root else "."
    if any(_inside(os.path.realpath(h), real) for h in hidden):
        return _not(shown, "not inlined: the sidecar's own files are hidden")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return _not(shown, "not found (moved or deleted since it was mentioned)")
    except IsADirectoryError:
        return _directory(shown)
    except OSError as exc:
        cause = "a symlink changed under it" if exc.errno == errno.ELOOP else exc.strerror
        return _not(shown, f"not inlined: cannot be read ({cause})")
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return _directory(shown)
        if not stat.S_ISREG(info.st_mode):
            return _not(shown, "not inlined: not a regular file")
        if info.st_size > limit:
            why = f"not inlined: larger than {_size(limit)}; read the parts you need"
            return _not(shown, why, info.st_size)
        data = _read(fd, limit + 1)
    except OSError as exc:
        return _not(shown, f"not inlined: cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    if len(data) > limit:
        why = f"larger than {_size(limit)} (it grew while being read); read the parts you need"
        return _not(shown, f"not inlined: {why}")
    if b"\x00" in data:
        return _not(shown, "not inlined: binary", len(data))
    try:
        return Mentioned(shown, data.decode("utf-8"))
    except UnicodeDecodeError:
        return _not(shown, "not inlined: not UTF-8 text (binary?)", len(data))


def _not(shown: str, why: str, size: int | None = None) -> Mentioned:
    sized = shown if size is None else f"{shown} ({_size(size)})"
    return Mentioned(shown, None, f"[mentioned file {sized}: {why}]")


def _directory(shown: str) -> Mentioned:
    return Mentioned(
        shown, None, f"[mentioned directory {shown}/: not inlined (a directory; list it to see it)]"
    )


def read_mention(
    uri: str, cwd: str, *, limit: int = MENTION_MAX, hidden: Sequence[str] = ()
) -> str:
    """The mention as the builtin agent's model gets it: a heading and the text, or the
    one-line note."""
    found = mentioned_file(uri, cwd, limit=limit, hidden=hidden)
    if found.text is None:
        return found.note
    text, shown = found.text, found.shown
    ending = "" if text.endswith("\n") or not text else "\n"
    return f"[file {shown}]\n{text}{ending}[end of {shown}]"


def _read(fd: int, most: int) -> bytes:
    chunks: list[bytes] = []
    left = most
    while left > 0:
        chunk = os.read(fd, min(left, 64 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
