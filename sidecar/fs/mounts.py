"""Which file system a directory is on, to know whether inotify sees every change there.

inotify reports what this machine's kernel does to a file. On a local file system that
is every change; on a network or FUSE file system a change made elsewhere (another
machine, the FUSE daemon itself) is never reported. So a watch is trusted only where the
directory and everything mounted below it are file systems known to be local; anywhere
else (unknown included) the tree is looked at whole each time.
"""

from __future__ import annotations

import os
from typing import Final

LOCAL: Final = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "bcachefs",
        "f2fs",
        "zfs",
        "tmpfs",
        "ramfs",
        "overlay",
        "jfs",
        "reiserfs",
        "nilfs2",
        "hfsplus",
        "vfat",
        "exfat",
        "ntfs3",
    }
)
_MOUNTINFO: Final = "/proc/self/mountinfo"


def _unescape(field: str) -> str:
    r"""mountinfo writes space, tab, newline and backslash in paths as octal (`\040`)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mounts() -> list[tuple[str, str]] | None:
    """(mount point, file system type) of every mount this process sees, in order."""
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        # "id parent major:minor root mount-point options [optional...] - type source super"
        left, sep, right = line.partition(" - ")
        fields = left.split(" ")
        if sep and len(fields) >= 5 and right:
            found.append((_unescape(fields[4]), right.split(" ")[0]))
    return found


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def file_system(path: str) -> str | None:
    """The type of the file system `path` (resolved) is on, or None if unknown."""
    real = os.path.realpath(path)
    best, kind = "", None
    for mount, fs_type in _mounts() or []:
        if _inside(real, mount) and len(mount) >= len(best):  # the last of equals is seen
            best, kind = mount, fs_type
    return kind


def changes_all_seen(path: str) -> bool:
    """Whether inotify reports every change under `path`: it is on a local file system,
    and so is everything mounted below it."""
    real = os.path.realpath(path)
    below = [fs_type for mount, fs_type in _mounts() or [] if _inside(mount, real)]
    return file_system(real) in LOCAL and all(fs_type in LOCAL for fs_type in below)
