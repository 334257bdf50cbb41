"""A new tree from an old one with a few paths changed, written without an index.

Only the directories on the way to the changed paths are read (one `git ls-tree` naming
each of them: git lists what is directly in each and goes into none of the rest) and
only those are written again, bottom-up, by one `git mktree --batch` answering a tree id
per directory. So the cost follows the number of changed paths and the size of the
directories they are in, never the size of the whole tree -- unlike anything that reads
the index, which holds every file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
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
        self._listing = (
            listing  # directory -> name -> entry; a directory read is never in its parent
        )
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

    async def write(self, converse: Converse, edits: dict[str, Entry | None]) -> str:
        """The tree with `edits` made (path -> its new entry, None: gone, with whatever
        was below it); every path edited must be under the directories read."""
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
        built: dict[str, str | None] = {}
        deepest_first = sorted(self._dirs, key=lambda d: d.count("/") + bool(d), reverse=True)
        async with converse("mktree", "--batch", "-z", "--missing") as mktree:
            for directory in deepest_first:
                entries = dict(self._listing.get(directory, {}))
                for name, entry in by_dir.get(directory, {}).items():
                    if entry is None:
                        entries.pop(name, None)
                    else:
                        entries[name] = entry
                for sub in children.get(directory, ()):
                    oid = built[sub]
                    if oid is not None:  # None: empty, as it is gone (a read one is never listed)
                        entries[sub.rpartition("/")[2]] = (TREE, oid)
                built[directory] = await _made(mktree, entries) if entries else None
        return built[""] or EMPTY_TREE


async def _made(mktree: Conversation, entries: dict[str, Entry]) -> str:
    lines = b"".join(
        f"{mode} {_kind(mode)} {oid}\t{name}\0".encode(errors="surrogateescape")
        for name, (mode, oid) in entries.items()
    )
    answer = (await mktree.ask(lines + b"\0")).decode()
    if len(answer) not in (40, 64):
        raise CheckpointError(f"git mktree answered {answer!r}")
    return answer
