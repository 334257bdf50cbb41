"""A snapshot from the paths a watch saw change: the last snapshot's tree with only those
paths looked at again, so its cost follows what changed, not the size of the tree.

Each changed path is `lstat`ed: gone (with whatever was below it), a directory now (its
files come as their own changed paths), a file or symlink to take, or one too large to
take (left out as skipped). The files are handed to `git add -A` on a scratch index that
holds what the last snapshot had for them -- so git itself decides what it always
decides in a snapshot: its ignore rules for new files (a file the snapshots already hold
stays in, as git keeps a tracked file), the work tree's attributes and line endings, the
executable bit, symlinks -- and the new tree is the old one with those entries changed
(`tree_edit.py`). Nothing here reads the snapshots' index, which holds every file.

What this cannot decide is left to a walk of the whole tree (`plan` answers None): a
changed `.gitignore`, `.gitattributes` or `.gitmodules` (what is in may change anywhere),
anything named like git's own directory (a nested repository, the user's repository
made or removed), a data dir of ours not known yet, or more changed paths than `limit`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sidecar.checkpoints.atomic import remove_quietly
from sidecar.checkpoints.exclusions import Exclusions, store_of, under
from sidecar.checkpoints.tree_edit import GITLINK, TREE, Converse, Entry, TreeDirs, parents
from sidecar.domain.errors import CheckpointError

# A change to one of these can change what is in anywhere in the tree.
RULES: Final = frozenset({".gitignore", ".gitattributes", ".gitmodules"})
Run = Callable[..., Awaitable[bytes]]  # ShadowRepo._run


@dataclass(frozen=True, slots=True)
class Plan:
    files: tuple[str, ...]  # regular files and symlinks, for `git add`
    gone: tuple[str, ...]  # not there any more (or too large): out, with what was below
    dirs: tuple[str, ...]  # directories now: a file the snapshot had there goes
    skipped: dict[str, str]  # what is left out after this snapshot (path -> reason)


@dataclass(frozen=True, slots=True)
class Applied:
    tree: str
    added: int  # files the snapshots did not hold before


def _gitlike(name: str) -> bool:
    """`.git` as git on any system reads it (`.GIT`, `.git.`, `git~1`): a repository."""
    lowered = name.lower()
    return lowered.rstrip(". ") == ".git" or lowered == "git~1"


def _unsure(path: str) -> bool:
    parts = path.split("/")
    return parts[-1] in RULES or any(_gitlike(part) for part in parts)


def plan(
    changed: set[str],
    exclusions: Exclusions,
    skipped: dict[str, str],
    stores: set[str],
    limit: int,
) -> Plan | None:
    """What the changed paths are now; None when only a walk can tell (module doc)."""
    nested = {path for path in skipped if path.endswith("/")}
    paths: set[str] = set()
    for path in changed:
        if _unsure(path):
            return None
        found = store_of(exclusions.work_tree, path)
        if found is not None and found not in stores:
            return None
        if not under(path, stores) and not under(path, nested):
            paths.add(path)
    if len(paths) > limit:
        return None
    now = {path: reason for path, reason in skipped.items() if path not in paths}
    files: list[str] = []
    gone: list[str] = []
    dirs: list[str] = []
    not_dirs: set[str] = set()  # changed paths that are no directory now
    for path in sorted(paths):  # a directory before what is in it
        if any(parent in not_dirs for parent in parents(path)):
            not_dirs.add(path)  # below something gone, or now a file: covered by it
            continue
        try:
            info = os.lstat(os.path.join(exclusions.work_tree, path))
        except (FileNotFoundError, NotADirectoryError):
            gone.append(path)
            not_dirs.add(path)
            continue
        except OSError:
            return None  # cannot be looked at: the walk says what git makes of it
        if stat.S_ISDIR(info.st_mode):
            dirs.append(path)
            continue
        not_dirs.add(path)
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            continue  # a FIFO, a socket, a device: git takes none (it keeps what it had)
        reason = exclusions.size_reason(info)
        if reason is not None:
            now[path] = reason
            gone.append(path)
        else:
            files.append(path)
    return Plan(tuple(files), tuple(gone), tuple(dirs), now)


async def apply(
    plan: Plan, base: str, run: Run, converse: Converse, scratch: Path
) -> Applied | None:
    """The tree `base` with the plan's paths as they are now; None when git's answer is
    not the one expected (the tree changed again meanwhile): the walk then decides."""
    tree = await TreeDirs.read(run, base, (*plan.files, *plan.gone, *plan.dirs))
    had = {path: tree.entry(path) for path in plan.files}
    taken = await _taken(plan.files, had, run, scratch)
    if taken is None:
        return None
    edits: dict[str, Entry | None] = {path: None for path in plan.gone}
    for path in plan.dirs:
        entry = tree.entry(path)
        if entry is not None and entry[0] != TREE:
            edits[path] = None
    added = 0
    for path in plan.files:
        entry = taken.get(path)
        before = had[path]
        if entry != before:
            edits[path] = entry
        if entry is not None and (before is None or before[0] == TREE):
            added += 1
    return Applied(await tree.write(converse, edits), added)


async def _taken(
    files: tuple[str, ...], had: dict[str, Entry | None], run: Run, scratch: Path
) -> dict[str, Entry] | None:
    """What `git add -A` makes of `files` (absent: ignored, or gone meanwhile), on a
    scratch index holding what the snapshot had for them."""
    if not files:
        return {}
    remove_quietly(scratch)
    try:
        seeds = b"".join(
            f"{entry[0]} {entry[1]}\t{path}\0".encode(errors="surrogateescape")
            for path, entry in had.items()
            if entry is not None and entry[0] != TREE
        )
        if seeds:
            await run("update-index", "-z", "--index-info", stdin=seeds, index=scratch)
        listed = b"".join(path.encode(errors="surrogateescape") + b"\0" for path in files)
        # --ignore-errors: an unreadable file keeps what the snapshot had (as in a walk);
        # exit 1 also says some path was ignored, which is an answer, not a failure.
        await run(
            "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
            stdin=listed, ok=(0, 1), index=scratch,
        )  # fmt: skip
        out = await run("ls-files", "-s", "-z", index=scratch)
    except CheckpointError:
        return None  # e.g. a path that vanished meanwhile ("did not match any files")
    finally:
        remove_quietly(scratch)
    wanted = set(files)
    taken: dict[str, Entry] = {}
    for record in out.decode(errors="surrogateescape").split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, oid, stage = meta.split(" ")
        if path not in wanted or stage != "0" or mode == GITLINK:
            return None  # something git found that was not asked for: a walk decides
        taken[path] = (mode, oid)
    return taken
