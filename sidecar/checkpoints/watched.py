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
made or removed), a change inside a directory holding a `.git` (what git takes there
depends on what the index already has), a data dir of ours not known yet, or more
changed paths than `limit`.
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
Seen = tuple[int, int, int, int, int]  # a file's inode, size, mode, mtime and ctime (ns)


def seen(info: os.stat_result) -> Seen:
    return (info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns, info.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class Git:
    """How the snapshot runs git: ShadowRepo's runners, and its scratch index files."""

    run: Run
    converse: Converse
    scratch: Path  # the index `git add` works in (made and removed each time)
    empty: Path  # an index that is never written: nothing is tracked in it
    objects: Path  # the repository's object directory


@dataclass(frozen=True, slots=True)
class Plan:
    files: tuple[str, ...]  # regular files and symlinks, for `git add`
    gone: tuple[str, ...]  # not there any more: out, with what was below
    dirs: tuple[str, ...]  # directories now: a file the snapshot had there goes
    # Neither (a FIFO, a socket, a device), which git never takes: a directory the
    # snapshot had there goes, a file stays (git keeps what it had for it).
    others: tuple[str, ...]
    big: dict[str, str]  # files too large to take -> why: out, and listed as skipped
    kept: dict[str, str]  # what was skipped and is not looked at again
    seen: dict[str, Seen]  # each of `files` as `lstat` found it before git read it


@dataclass(frozen=True, slots=True)
class Applied:
    tree: str
    skipped: dict[str, str]  # what is left out after this snapshot (path -> reason)
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
    if len(paths) > limit or _in_a_repository(exclusions.work_tree, paths):
        return None
    kept = {path: reason for path, reason in skipped.items() if path not in paths}
    files: list[str] = []
    gone: list[str] = []
    dirs: list[str] = []
    others: list[str] = []
    big: dict[str, str] = {}
    stats: dict[str, Seen] = {}
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
        reason = exclusions.size_reason(info)
        if reason is not None:
            big[path] = reason
        elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            files.append(path)
            stats[path] = seen(info)
        else:
            others.append(path)
    return Plan(tuple(files), tuple(gone), tuple(dirs), tuple(others), big, kept, stats)


def _in_a_repository(work_tree: str, paths: set[str]) -> bool:
    """Whether a path is inside a directory holding a `.git` (below the work tree's own):
    what git makes of a repository inside the tree depends on what it already tracks
    there, which only the index says (a stat per directory above the changed paths)."""
    seen: set[str] = set()
    for path in paths:
        for parent in parents(path):
            if not parent or parent in seen:
                break
            seen.add(parent)
            if os.path.lexists(os.path.join(work_tree, parent, ".git")):
                return True
    return False


async def apply(
    plan: Plan,
    base: str,
    git: Git,
    skipped: dict[str, str],
    leave_out: Callable[[dict[str, str]], None],
) -> Applied | None:
    """The tree `base` with the plan's paths as they are now; None when git's answer is
    not the one expected (the tree changed again meanwhile): the walk then decides.
    `skipped`: what was left out before; `leave_out`: tells git what is left out now,
    called before anything reads it."""
    if not (plan.files or plan.gone or plan.dirs or plan.others or plan.big):
        return Applied(base, dict(plan.kept), 0)  # nothing to look at: no git at all
    tree = await TreeDirs.read(
        git.run, base, (*plan.files, *plan.gone, *plan.dirs, *plan.others, *plan.big)
    )
    now = dict(plan.kept)
    # A file too large is skipped if the snapshots held it, or held it back before, or
    # would take it (a new file no ignore rule covers), as a walk lists it.
    new = [p for p in plan.big if p not in skipped and _file(tree.entry(p)) is None]
    listed = await _listed(new, git) if new else set()
    if listed is None:
        return None
    now.update({p: why for p, why in plan.big.items() if p not in new or p in listed})
    if now != skipped:
        leave_out(now)
    had = {path: tree.entry(path) for path in plan.files}
    taken = await _taken(plan.files, had, git)
    if taken is None:
        return None
    edits: dict[str, Entry | None] = {path: None for path in (*plan.gone, *plan.big)}
    for path in plan.dirs:
        if _file(tree.entry(path)) is not None:
            edits[path] = None
    for path in plan.others:
        entry = tree.entry(path)
        if entry is not None and entry[0] == TREE:
            edits[path] = None
    added = 0
    for path in plan.files:
        entry = taken.get(path)
        before = had[path]
        if entry != before:
            edits[path] = entry
        if entry is not None and _file(before) is None:
            added += 1
    if not edits:
        return Applied(base, now, added)  # touched, not changed: the same tree
    return Applied(await tree.write(git.converse, edits, git.objects), now, added)


def _file(entry: Entry | None) -> Entry | None:
    """The entry if it is a file's (not a directory's)."""
    return entry if entry is not None and entry[0] != TREE else None


async def _listed(paths: list[str], git: Git) -> set[str] | None:
    """Which of these new files a walk would list (those no ignore rule covers): git's
    own listing, against an empty index."""
    try:
        out = await git.run(
            "ls-files", "-z", "--others", "--exclude-standard", "--", *paths, index=git.empty
        )
    except CheckpointError:
        return None
    return set(out.decode(errors="surrogateescape").split("\0")) - {""}


async def _taken(
    files: tuple[str, ...], had: dict[str, Entry | None], git: Git
) -> dict[str, Entry] | None:
    """What `git add -A` makes of `files` (absent: ignored, or gone meanwhile), on a
    scratch index holding what the snapshot had for them."""
    if not files:
        return {}
    run, scratch = git.run, git.scratch
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
