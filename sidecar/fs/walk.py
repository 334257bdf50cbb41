"""The paths under a directory that is not in a git repository, for completion: a bounded,
breadth-first walk that honours every `.gitignore` on the way down (each applies below its
own directory, as git's do, through `pathspec`), skips `.git`, and never leaves the
directory: a symlinked directory is listed but not entered, and a symlink whose target lies
outside is not listed at all.

Breadth first, so a walk cut at `max_entries` keeps the shallow paths (what completion
offers first). Unreadable directories are skipped, not fatal: a listing is a best effort.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Final

import pathspec

from sidecar.fs.path_index import Kind

IGNORE_FILE: Final = ".gitignore"
IGNORE_MAX: Final = 1024 * 1024  # a larger .gitignore is read this far
Specs = list[tuple[str, pathspec.GitIgnoreSpec]]  # (the directory's prefix, its rules)


def ignores(directory: str) -> pathspec.GitIgnoreSpec | None:
    """The directory's own `.gitignore`, or None (none, unreadable, or not a plain file)."""
    path = os.path.join(directory, IGNORE_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not os.path.isfile(path):
            return None
        data = os.read(fd, IGNORE_MAX)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = data.decode(errors="replace").splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:  # a line that is no pattern (a lone "!"): git skips it, so do we
        return pathspec.GitIgnoreSpec.from_lines(line for line in lines if _pattern(line))


def _pattern(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def inside(top: str, path: str) -> bool:
    """Whether `path`, symlinks resolved, is `top` or below it (`top` already resolved)."""
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip("/") + "/")


def walk(
    top: str, max_entries: int, hidden: Sequence[str] = ()
) -> tuple[list[tuple[str, Kind]], bool]:
    """(relative path, kind) of what lies under `top`, and whether the walk was cut."""
    root = os.path.realpath(top)
    found: list[tuple[str, Kind]] = []
    hidden_real = {os.path.realpath(path) for path in hidden}
    queue: deque[tuple[str, str, Specs]] = deque([(root, "", [])])
    while queue:
        directory, prefix, specs = queue.popleft()
        own = ignores(directory)
        if own is not None:
            specs = [*specs, (prefix, own)]
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git" or not _utf8(entry.name):
                continue
            relative = prefix + entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                link = entry.is_symlink()
            except OSError:
                continue
            if _ignored(specs, relative, is_dir):
                continue
            if link:
                if not inside(root, entry.path):
                    continue  # pointing out of the directory: never offered
                kind: Kind = "dir" if os.path.isdir(entry.path) else "file"
            else:
                kind = "dir" if is_dir else "file"
            if is_dir and entry.path in hidden_real:
                continue
            if len(found) >= max_entries:
                return found, True
            found.append((relative, kind))
            if is_dir:  # never a symlink here: those are not entered
                queue.append((entry.path, relative + "/", specs))
    return found, False


def _utf8(name: str) -> bool:
    """A name that is not UTF-8 (undecodable bytes kept as surrogates) is left out: no
    client could send it back as a mention."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _ignored(specs: Specs, relative: str, is_dir: bool) -> bool:
    for base, spec in specs:
        below = relative[len(base) :]
        if spec.match_file(below + "/" if is_dir else below):
            return True
    return False
