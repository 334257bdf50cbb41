"""What snapshots leave out, and how git is told: the shadow repository's `info/exclude`.

Left out: nested repositories and files larger than `max_file_bytes` (recorded with the
reason in `skipped.json`, listed as skipped, never touched by a restore), and every data
dir of ours inside the work tree (recorded in `data-dirs.json`: never listed, never
diffed, never restored). Our own data dir is known from its path; another one (a second
sidecar's, an older one's) is recognised from the paths git lists anyway, with no walk of
ours: a `sessions.db` beside a `checkpoints/` directory, or a `checkpoints/<id>/first-turn`
beside that repository's `HEAD` (a shadow repository of ours: a store other than SQLite
has no `sessions.db`). The work tree's own `.git/info/exclude` is copied in first, so
what the user's repository ignores stays out too; when it changes, it is copied again.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Final

from sidecar.checkpoints.atomic import write_atomically
from sidecar.domain.errors import CheckpointError

FIRST_TURN: Final = "first-turn"
SKIPPED: Final = "skipped.json"
STORES: Final = "data-dirs.json"  # the data dirs of ours found in the work tree ("dir/")
NESTED: Final = "a nested git repository"

Signature = tuple[int, int, int] | None  # (inode, size, mtime ns) of a file; None: absent


def exclude_line(path: str) -> str:
    """A gitignore line matching exactly this one path, from the work tree's root."""
    escaped = "".join("\\" + c if c in "*?[]\\!# " else c for c in path.rstrip("/"))
    return "/" + escaped + ("/" if path.endswith("/") else "")


def store_inside(data_dir: Path | None, work_tree: str) -> str | None:
    """`data_dir` as a path of the work tree ("dir/"), if it is inside it."""
    if data_dir is None:
        return None
    relative = os.path.relpath(os.path.realpath(data_dir), os.path.realpath(work_tree))
    if relative == "." or relative == ".." or relative.startswith("../"):
        return None
    return relative + "/"


def store_of(work_tree: str, path: str) -> str | None:
    """The data dir of ours a listed path lies in ("dir/"), if it is one (see the module's
    doc: two stats, only for the two names that can say so)."""
    parts = path.split("/")
    if parts[-1] == "sessions.db":
        root = parts[:-1]
        mark = os.path.join(work_tree, *root, "checkpoints")
        found = os.path.isdir(mark)
    elif len(parts) >= 3 and parts[-1] == FIRST_TURN and parts[-3] == "checkpoints":
        root = parts[:-3]
        found = os.path.isfile(os.path.join(work_tree, *parts[:-1], "HEAD"))
    else:
        return None
    return "/".join(root) + "/" if found and root else None


def under(path: str, dirs: set[str] | tuple[str, ...]) -> bool:
    """Whether `path` is one of `dirs` ("dir/") or inside one."""
    return path.startswith(tuple(dirs)) or path + "/" in dirs


def signature(path: str) -> Signature:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


class Exclusions:
    """The shadow repository's record of what is left out, read and written as a whole."""

    def __init__(self, git_dir: Path, work_tree: str, max_file_bytes: int) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.max_file_bytes = max_file_bytes
        self._users = os.path.join(work_tree, ".git", "info", "exclude")
        self.users_copied: Signature = None  # the user's exclude file as last copied in
        self.copied = False  # whether this process wrote info/exclude yet

    def skipped(self) -> dict[str, str]:
        """path -> why it is left out ("dir/" for a nested repository)."""
        try:
            raw = json.loads((self.git_dir / SKIPPED).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read {self.git_dir / SKIPPED}: {exc}") from None
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

    def stores(self) -> set[str]:
        try:
            raw = json.loads((self.git_dir / STORES).read_text())
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read {self.git_dir / STORES}: {exc}") from None
        return {str(p) for p in raw} if isinstance(raw, list) else set()

    def reason(self, path: str) -> str | None:
        """Why `path` (as git lists it) is left out, if it is."""
        if path.endswith("/"):
            return NESTED
        try:
            info = os.lstat(os.path.join(self.work_tree, path))
        except OSError:
            return None
        return self.size_reason(info)

    def size_reason(self, info: os.stat_result) -> str | None:
        if stat.S_ISREG(info.st_mode) and info.st_size > self.max_file_bytes:
            return f"larger than {self.max_file_bytes} bytes"
        return None

    def users_changed(self) -> bool:
        """Whether the work tree's own `.git/info/exclude` changed since it was copied in
        (by this process: a new one copies it again at its first look)."""
        return not self.copied or signature(self._users) != self.users_copied

    def write(self, skipped: dict[str, str], stores: set[str]) -> None:
        lines = ["# written by acp-session-host: what checkpoints leave out"]
        copied = signature(self._users)
        try:
            own = Path(self._users).read_text(errors="replace")
            lines += ["# the work tree's own .git/info/exclude:", own]
        except OSError:
            pass  # no repository there, or none of its own excludes: nothing to add
        lines += [exclude_line(path) for path in sorted(skipped)]
        # Last: no negation in the user's own excludes can bring a store of ours back in.
        lines += ["# data dirs of acp-session-host:"] + [exclude_line(p) for p in sorted(stores)]
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, exist_ok=True)
        write_atomically(info / "exclude", ("\n".join(lines) + "\n").encode())
        write_atomically(self.git_dir / SKIPPED, json.dumps(skipped).encode())
        write_atomically(self.git_dir / STORES, json.dumps(sorted(stores)).encode())
        self.users_copied, self.copied = copied, True
