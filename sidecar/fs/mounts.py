"""Which file system a directory is on, to know whether inotify sees every change there.

inotify reports what this machine's kernel does to a file. On a local file system that
is every change; on a network or FUSE file system a change made elsewhere (another
machine, the FUSE daemon itself) is never reported. So a watch is trusted only on a file
system known to be local; any other (unknown included) is looked at whole each time.
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


def file_system(path: str) -> str | None:
    """The type of the file system `path` (resolved) is on, or None if unknown."""
    real = os.path.realpath(path)
    try:
        with open(_MOUNTINFO, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        # "id parent major:minor root mount-point options [optional...] - type source super"
        left, sep, right = line.partition(" - ")
        fields = left.split(" ")
        if not sep or len(fields) < 5 or not right:
            continue
        mount = _unescape(fields[4])
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):  # the last of equal mounts is the visible one
            best, kind = mount, right.split(" ")[0]
    return kind


def changes_all_seen(path: str) -> bool:
    """Whether inotify reports every change under `path` (a local file system)."""
    return file_system(path) in LOCAL
