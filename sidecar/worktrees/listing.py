"""What git lists in a working tree, for completion (`_session/files`): the tracked files
and the untracked ones that no ignore rule hides (`.gitignore`s, `.git/info/exclude`, the
user's `core.excludesFile`), relative to the directory asked about, which may be a
subdirectory of the repository.

Three `ls-files` runs rather than one `-co`: `-s` gives each tracked file's mode (a symlink
is 120000, a submodule 160000), so only the untracked ones need an `lstat` to tell a
symlink; and `-d` names tracked files deleted from the tree, which are not offered.
`core.fsmonitor` is forced off: a repository's own config must not make listing it run a
program of its choosing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from sidecar.worktrees import git

_CONFIG: Final = ("core.fsmonitor=false", "core.untrackedCache=false")
NOT_A_REPOSITORY: Final = 128  # git's exit status outside a work tree


@dataclass(frozen=True, slots=True)
class GitPaths:
    tracked: list[tuple[str, str]]  # (path, mode as git gives it: "100644", "120000", ...)
    untracked: list[str]  # a trailing "/" names an embedded repository (a directory)
    deleted: frozenset[str]


def _split(out: bytes) -> list[str]:
    """NUL-separated paths; a name that is not UTF-8 is left out (no client could send
    it back as a mention)."""
    paths = []
    for raw in out.split(b"\0"):
        try:
            paths.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return [p for p in paths if p]


async def list_paths(cwd: str) -> GitPaths | None:
    """The paths under `cwd` as git sees them; None when `cwd` is in no work tree (or git
    is not installed). Other git failures raise `git.GitError`."""
    try:
        tracked, untracked, deleted = await asyncio.gather(
            git.run(cwd, "ls-files", "-z", "-s", ok=(0, NOT_A_REPOSITORY), config=_CONFIG),
            git.run(
                cwd,
                "ls-files",
                "-z",
                "-o",
                "--exclude-standard",
                ok=(0, NOT_A_REPOSITORY),
                config=_CONFIG,
            ),
            git.run(cwd, "ls-files", "-z", "-d", ok=(0, NOT_A_REPOSITORY), config=_CONFIG),
        )
    except git.GitNotInstalled:
        return None
    if NOT_A_REPOSITORY in (tracked.code, untracked.code, deleted.code):
        return None
    rows = []
    for line in _split(tracked.out):
        meta, _, path = line.partition("\t")
        rows.append((path, meta.split(" ", 1)[0]))
    return GitPaths(rows, _split(untracked.out), frozenset(_split(deleted.out)))
