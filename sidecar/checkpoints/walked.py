"""A snapshot by a walk of the whole tree: what a snapshot is when no watch can say what
changed (the first of a runtime, after the watch lost track, after a change to what is
left out, and every so often to catch what no event reports).

The snapshots' index is git's stat cache: one listing (`ls-files --others --modified`,
the pass `git status` makes) names the new and changed files, only those are hashed
(`update-index`), and `write-tree` writes the tree. Snapshots taken from a watch do not
keep the index up to date, so first it is brought to the last snapshot's tree (only the
paths that differ: `diff-tree` between the two); then "in the snapshots" means "in the
last snapshot", as "tracked" means "in the index" to git.

A tree with more than `max_files` files to snapshot (0: no bound) is refused with
`TreeRefused` before anything is hashed or staged: the count is the index's entries plus
the new files git lists, and that listing is read only up to the bound (git is stopped
there). git still walks the directories' names before it prints (300,000 files: about
0.4 s here), so the caller refuses once and does not ask again each turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Final

from sidecar.checkpoints.exclusions import Exclusions, store_of, under
from sidecar.checkpoints.git import RecordCap
from sidecar.checkpoints.restore import chunks
from sidecar.domain.errors import CheckpointError
from sidecar.domain.files import Skipped

Run = Callable[..., Awaitable[bytes]]  # ShadowRepo._run
ZERO: Final = "0" * 40
# Walks staging only the paths git listed, between two that stage with a whole `add -A`
# pass (which also refreshes git's stat and untracked caches: a file touched but not
# changed is otherwise compared by content by every listing until then).
FULL_PASS_EVERY: Final = 32


class TreeRefused(CheckpointError):
    """The work tree is not one to snapshot (too many files); the session goes on without
    checkpoints."""


class Walker:
    def __init__(
        self,
        run: Run,
        exclusions: Exclusions,
        own_store: str | None,
        max_files: int,
    ) -> None:
        self._run = run
        self._exclusions = exclusions
        self._own_store = own_store
        self.max_files = max_files  # 0: no bound
        self._since_full_pass = FULL_PASS_EVERY  # the first walk stages everything

    async def snapshot(
        self, index_holds: str | None, last: str | None
    ) -> tuple[str, tuple[Skipped, ...]]:
        """The tree now and what it leaves out. `index_holds`: the tree the index was
        last written for (None: not known); `last`: the last snapshot's tree."""
        await self._sync_index(index_holds, last)
        skipped, changed = await self._refresh_skipped()
        await self._stage(changed)
        tree = (await self._run("write-tree")).decode().strip()
        return tree, skipped

    async def _sync_index(self, index_holds: str | None, last: str | None) -> None:
        if last is None or index_holds == last:
            return
        if index_holds is None:
            # Not known what it holds: all of it from the tree, the stat data kept for
            # every entry whose content is the same (git's one-tree `read-tree -m`).
            await self._run("read-tree", "-m", last)
            return
        out = await self._run("diff-tree", "-r", "-z", "--no-renames", index_holds, last)
        tokens = out.decode(errors="surrogateescape").split("\0")
        lines = []
        for meta, path in zip(tokens[0::2], tokens[1::2], strict=False):
            if not meta.startswith(":"):
                continue
            _old_mode, new_mode, _old, new, status = meta[1:].split(" ")
            gone = status == "D"
            lines.append(f"{'0' if gone else new_mode} {ZERO if gone else new}\t{path}\0")
        if lines:
            staged = "".join(lines).encode(errors="surrogateescape")
            await self._run("update-index", "-z", "--index-info", stdin=staged)

    async def _stage(self, changed: list[str] | None) -> None:
        """Bring the index to the work tree. `changed`: the paths git just listed as new,
        modified or deleted (nothing else can differ), or None when the exclusions changed
        since that listing (then only a whole pass knows what is in)."""
        self._since_full_pass += 1
        if changed is not None and self._since_full_pass < FULL_PASS_EVERY:
            if not changed:
                return
            listed = b"".join(p.encode(errors="surrogateescape") + b"\0" for p in changed)
            try:
                await self._run("update-index", "--add", "--remove", "-z", "--stdin", stdin=listed)
                return
            except CheckpointError:
                pass  # a path git takes only in a whole pass (unreadable, a file now a dir)
        # One pass over the tree; --ignore-errors: an unreadable file is left out, the
        # others still go in.
        await self._run("add", "-A", "--ignore-errors", ok=(0, 1))
        self._since_full_pass = 0

    def index_entries(self, git_dir: Path) -> int:
        """How many paths the index holds (its header says: no read of the rest)."""
        try:
            with open(git_dir / "index", "rb") as handle:
                head = handle.read(12)
        except FileNotFoundError:
            return 0
        if len(head) < 12 or head[:4] != b"DIRC":
            return 0
        return int.from_bytes(head[8:12], "big")

    def too_many(self) -> str:
        return (
            f"checkpoints are off for this session: {self._exclusions.work_tree} has more "
            f"than {self.max_files} files to snapshot (those .gitignore leaves in), too many "
            "to take before every turn; open the session in the project's own directory, or "
            "raise --checkpoint-max-files (0: no bound)"
        )

    async def _leave_out(self, stores: set[str], added: Iterable[str]) -> None:
        """Record the data dirs of ours, tell git to leave them out, and take out of the
        index whatever an older snapshot took of the `added` ones."""
        self._exclusions.write(self._exclusions.skipped(), stores)
        # -f: without it git refuses an entry whose file changed since (the store always has).
        for chunk in chunks(sorted(p.rstrip("/") for p in added)):
            await self._run("rm", "-r", "-f", "-q", "--cached", "--ignore-unmatch", "--", *chunk)

    async def _refresh_skipped(self) -> tuple[tuple[Skipped, ...], list[str] | None]:
        """Decide what this snapshot leaves out, and tell git (info/exclude). Looks only at
        new and modified files (git lists them from its caches) and at what was skipped
        before: an unchanged tree costs no extra stats. Also the listed paths that go in
        (None when the exclusions changed: the listing was made under the old ones)."""
        ex = self._exclusions
        before = ex.skipped()
        stores = ex.stores()
        exclude = ex.git_dir / "info" / "exclude"
        own = self._own_store
        if own is not None and own not in stores or not exclude.exists() or ex.users_changed():
            # Before the listing: git never walks into our own store, and applies the
            # user's own excludes as they are now.
            added = {own} - stores if own is not None else set()
            stores |= added
            await self._leave_out(stores, added)
        # One pass: new files ("? path") and changed tracked ones ("C path"), from git's
        # caches (the untracked cache, the index's stat data); cut once the new files alone
        # pass the bound.
        found: set[str] = set()
        work_tree = ex.work_tree

        def counts(record: bytes) -> bool:
            tag, _, raw = record.partition(b" ")
            path = raw.decode(errors="surrogateescape")
            store = store_of(work_tree, path)
            if store is not None and store not in stores:
                found.add(store)
            return tag == b"?" and not under(path, stores | found)

        cap = RecordCap(self.max_files, counts) if self.max_files else None
        listed = await self._run(
            "ls-files", "-z", "-t", "--others", "--modified", "--exclude-standard", records=cap
        )
        if cap is not None and cap.stopped:
            raise TreeRefused(self.too_many())
        candidates: set[str] = set()
        tracked_changed: set[str] = set()
        for record in listed.decode(errors="surrogateescape").split("\0"):
            tag, _, path = record.partition(" ")
            if not path:
                continue
            if cap is None:
                store = store_of(work_tree, path)
                if store is not None and store not in stores:
                    found.add(store)
            (candidates if tag == "?" else tracked_changed).add(path)
        stores_changed = bool(found)
        if found:
            stores |= found
            await self._leave_out(stores, found)
        candidates = {p for p in candidates if not under(p, stores)}
        tracked_changed = {p for p in tracked_changed if not under(p, stores)}
        if self.max_files and self.index_entries(ex.git_dir) + len(candidates) > self.max_files:
            raise TreeRefused(self.too_many())
        now: dict[str, str] = {}
        for path in candidates | tracked_changed | set(before):
            reason = ex.reason(path)
            if reason is not None:
                now[path] = reason
        changed: list[str] | None = sorted((candidates | tracked_changed) - set(now))
        if now != before:
            ex.write(now, stores)
            changed = None
        elif stores_changed:
            changed = None  # listed under the old exclusions
        newly_out = sorted(p for p in now if p in tracked_changed)
        for chunk in chunks(newly_out):
            # -f: the file changed since it was staged (it grew past the bound).
            await self._run("rm", "-f", "-q", "--cached", "--ignore-unmatch", "--", *chunk)
        return tuple(Skipped(path, reason) for path, reason in sorted(now.items())), changed
