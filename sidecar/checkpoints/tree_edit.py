"""A new tree from an old one with a few paths changed, written without an index.

Only the directories on the way to the changed paths are read (one `git ls-tree` naming
each of them: git lists what is directly in each and goes into none of the rest) and
only those are written again, bottom-up, by one `git mktree --batch` answering a tree id
per directory (a level of the tree at a time: one exchange per level); a tree the
repository has already is not handed to git at all. So the cost follows the number of
changed paths and the size of the directories they are in, never the size of the whole
tree -- unlike anything that reads the index, which holds every file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Final, Protocol

from sidecar.checkpoints.git import Conversation
from sidecar.domain.errors import CheckpointError

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
TREE: Final = "040000"
GITLINK: Final = "160000"

Entry = tuple[str, str]  # (mode, object id): "040000" for a directory
ListTree = Callable[..., Awaitable[bytes]]  # ShadowRepo._run: git's stdout


class Converse(Protocol):
    def __call__(self, *args: str) -> AbstractAsyncContextManager[Conversation]: ...


def parents(path: str) -> Iterable[str]:
    """Every directory above `path`, the root ("") last."""
    while path:
        path = path.rpartition("/")[0]
        yield path


def _kind(mode: str) -> str:
    return "tree" if mode == TREE else "commit" if mode == GITLINK else "blob"


class TreeDirs:
    """What `tree` holds in the directories above some paths (read once, by `read`)."""

    def __init__(self, tree: str, listing: dict[str, dict[str, Entry]], dirs: set[str]) -> None:
        self.tree = tree
        # directory -> name -> entry; a directory that was read is never in its parent's
        self._listing = listing
        self._dirs = dirs

    @classmethod
    async def read(cls, run: ListTree, tree: str, paths: Iterable[str]) -> TreeDirs:
        dirs = {parent for path in paths for parent in parents(path)} | {""}
        wanted = ["."] + sorted(d + "/" for d in dirs if d)
        out = await run("ls-tree", "-z", tree, "--", *wanted)
        listing: dict[str, dict[str, Entry]] = {}
        for record in out.decode(errors="surrogateescape").split("\0"):
            if not record:
                continue
            meta, _, path = record.partition("\t")
            mode, _kind_name, oid = meta.split(" ")
            directory, _, name = path.rpartition("/")
            listing.setdefault(directory, {})[name] = (mode, oid)
        return cls(tree, listing, dirs)

    def entry(self, path: str) -> Entry | None:
        """`path`'s entry in the tree (a directory that was read: a tree with no id)."""
        directory, _, name = path.rpartition("/")
        if directory not in self._dirs:
            raise CheckpointError(f"{path} is not under a directory that was read")
        if path in self._dirs and self._holds(path):
            return (TREE, "")
        return self._listing.get(directory, {}).get(name)

    def _holds(self, directory: str) -> bool:
        """Whether the tree has a directory here (a read directory is never empty in git,
        so something was listed in it or below it)."""
        prefix = directory + "/"
        return directory in self._listing or any(d.startswith(prefix) for d in self._listing)

    async def write(self, converse: Converse, edits: dict[str, Entry | None], objects: Path) -> str:
        """The tree with `edits` made (path -> its new entry, None: gone, with whatever
        was below it); every path edited must be under the directories read. `objects`:
        the repository's object directory, where a tree stored already is found (a
        rewind's trees mostly are) and not handed to git again."""
        by_dir: dict[str, dict[str, Entry | None]] = {}
        for path, entry in edits.items():
            directory, _, name = path.rpartition("/")
            if directory not in self._dirs:
                raise CheckpointError(f"{path} is not under a directory that was read")
            by_dir.setdefault(directory, {})[name] = entry
        children: dict[str, list[str]] = {}
        for sub in self._dirs:
            if sub:
                children.setdefault(sub.rpartition("/")[0], []).append(sub)
        levels: dict[int, list[str]] = {}
        for directory in self._dirs:
            levels.setdefault(directory.count("/") + bool(directory), []).append(directory)
        built: dict[str, str | None] = {}
        async with AsyncExitStack() as stack:
            mktree: Conversation | None = None
            # A level at a time, deepest first: a directory needs its subdirectories' ids,
            # never those of its own level, so each level is one exchange with git.
            for depth in sorted(levels, reverse=True):
                made: dict[str, dict[str, Entry]] = {}
                for directory in levels[depth]:
                    entries = dict(self._listing.get(directory, {}))
                    for name, entry in by_dir.get(directory, {}).items():
                        if entry is None:
                            entries.pop(name, None)
                        else:
                            entries[name] = entry
                    for sub in children.get(directory, ()):
                        oid = built[sub]
                        if oid is not None:  # None: empty, so gone (a read one is not listed)
                            entries[sub.rpartition("/")[2]] = (TREE, oid)
                    stored = _stored(entries, objects) if entries else None
                    if stored is not None or not entries:
                        built[directory] = stored
                    else:
                        made[directory] = entries
                if not made:
                    continue
                if mktree is None:
                    mktree = await stack.enter_async_context(
                        converse("mktree", "--batch", "-z", "--missing")
                    )
                answers = await mktree.ask_all([_request(e) for e in made.values()])
                for directory, answer in zip(made, answers, strict=True):
                    built[directory] = _tree_id(answer)
        return built[""] or EMPTY_TREE


def _stored(entries: dict[str, Entry], objects: Path) -> str | None:
    """The id of this tree if the repository has it already. The id is git's tree
    format hashed here; a mistake in that could only miss a stored tree (no object of
    the repository has a wrong tree's id), never take another one for it."""
    if any(len(oid) != 40 for _mode, oid in entries.values()):
        return None  # not a SHA-1 repository: git decides
    named = sorted(
        (name.encode(errors="surrogateescape") + (b"/" if mode == TREE else b""), mode, oid)
        for name, (mode, oid) in entries.items()
    )
    body = b"".join(
        (b"40000" if mode == TREE else mode.encode()) + b" " + key.rstrip(b"/") + b"\0"
        + bytes.fromhex(oid)
        for key, mode, oid in named
    )  # fmt: skip
    oid = hashlib.sha1(b"tree %d\0" % len(body) + body, usedforsecurity=False).hexdigest()
    return oid if os.path.exists(objects / oid[:2] / oid[2:]) else None


def _request(entries: dict[str, Entry]) -> bytes:
    lines = b"".join(
        f"{mode} {_kind(mode)} {oid}\t{name}\0".encode(errors="surrogateescape")
        for name, (mode, oid) in entries.items()
    )
    return lines + b"\0"


def _tree_id(answer: bytes) -> str:
    text = answer.decode(errors="replace")
    if len(text) not in (40, 64):
        raise CheckpointError(f"git mktree answered {text!r}")
    return text
