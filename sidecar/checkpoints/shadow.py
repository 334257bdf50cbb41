"""A session's shadow repository: snapshots of its working tree, as git trees under refs.

The repository lives in the sidecar's data dir (one per session), is bare, and is used
with the session cwd as work tree. Snapshots are trees (no commits), kept alive by refs;
the refs are the checkpoints. What they leave out is `exclusions.py`'s.

A snapshot is taken one of two ways. With a watch of the tree (`watch`: the runtime's
checkpoints keep one, `fs/live_watch.py`), it is the last snapshot with only the paths
the kernel saw change since looked at again (`watched.py`): a handful of git processes
whatever the size of the tree. Otherwise -- no watch, the first snapshot of a runtime,
the watch lost track (its queue overflowed, a directory moved out, too many changes), a
change only a walk can judge (a `.gitignore`), and every `verify_every`-th snapshot, for
a change no event reports (a write through a shared memory mapping, or through a hard link
from outside the tree) -- it is a walk of
the whole tree with the index as git's stat cache (`walked.py`). Both give the same
tree for the same files (tests/test_checkpoint_watch.py holds them to it).

Every git child runs with umask 077 and in its own process group (`git.py`); `stop` kills
the running ones, closes the watch and refuses new ones (a runtime closing never waits on
a snapshot: what a killed git leaves, a stale `index.lock`, is cleared by the next use).

Only the session's one runtime writes here (the lease); an operation cut short (a
SIGKILL mid-snapshot, mid-restore) is finished or undone by the next `open`: a stale
`index.lock` is removed, and a restore's journal is replayed to the end (`restore.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sidecar.checkpoints import restore as restoring
from sidecar.checkpoints import watched
from sidecar.checkpoints.atomic import remove_quietly, write_atomically
from sidecar.checkpoints.exclusions import FIRST_TURN, Exclusions, store_inside
from sidecar.checkpoints.git import (
    Children,
    Conversation,
    RecordCap,
    converse_git,
    run_git,
    stop_children,
)
from sidecar.checkpoints.restore import RestorePlan, chunks
from sidecar.checkpoints.walked import TreeRefused, Walker
from sidecar.domain.errors import CheckpointError
from sidecar.domain.files import FileChange, FileStatus, Skipped
from sidecar.fs.live_watch import LiveWatch
from sidecar.fs.tree_watch import WatchBudget

__all__ = ["RestorePlan", "ShadowRepo", "Snapshot", "TreeRefused"]

STOPPED: Final = "checkpoints stopped: the session is closing"
STATE: Final = "snapshot-state.json"  # the last snapshot's tree, the tree the index holds
WATCHED_INDEX: Final = "index.watched"  # the scratch index of snapshots from a watch
EMPTY_INDEX: Final = "index.none"  # never written: an index with nothing in it
MAX_DIFF_BYTES: Final = 512 * 1024
# Snapshots from a watch between two walks (a walk also catches what no event reports).
VERIFY_EVERY: Final = 64
# Changed paths a snapshot from a watch looks at, at most (past it, hashing them one by
# one through git's pathspecs costs more than a walk): a tenth of the tree, within these.
LOOK_AT: Final = (100, 1000)
# Paths a watch holds between two snapshots; past it the watch gives up (a walk follows).
WATCH_HOLDS: Final = 10_000
SEEN_AT_MOST: Final = 100_000  # files remembered as last hashed (past it: forgotten)


@dataclass(frozen=True, slots=True)
class Snapshot:
    tree: str
    skipped: tuple[Skipped, ...] = ()


def _make_private(git_dir: Path) -> None:
    """A repository made before git ran with umask 077: group and others lose every bit."""
    for top, _dirs, files in os.walk(git_dir):
        os.chmod(top, 0o700)
        for name in files:
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, stat.S_IMODE(mode) & 0o700)


class ShadowRepo:
    def __init__(
        self,
        git_dir: Path,
        work_tree: str,
        max_file_bytes: int,
        git: str,
        *,
        max_files: int = 0,
        data_dir: Path | None = None,
        watch: WatchBudget | None = None,
        verify_every: int = VERIFY_EVERY,
    ) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.max_file_bytes = max_file_bytes
        self._git = git
        self._own_store = store_inside(data_dir, work_tree)
        self._exclusions = Exclusions(git_dir, work_tree, max_file_bytes)
        self._walker = Walker(self._run, self._exclusions, self._own_store, max_files)
        self._lock = asyncio.Lock()  # one mutating operation at a time
        self._children: Children = set()
        self._stopped = False
        # Snapshots from a watch: started at the first snapshot, closed by `stop`.
        skip = frozenset({self._own_store.rstrip("/")}) if self._own_store else frozenset()
        self._watch = (
            LiveWatch(work_tree, watch, skip_dirs=skip, max_changed=WATCH_HOLDS)
            if watch is not None
            else None
        )
        self._verify_every = verify_every
        self._tree: str | None = None  # the last snapshot's (or restore's) tree
        self._index_holds: str | None = None  # the tree the index was last written for
        self._known = False  # both read from STATE (once per process)
        self._from_watch_ok = False  # `_tree` is the tree as of the watch's last look
        self._since_walk = 0
        self._added_since_walk = 0  # files snapshots from the watch added (`max_files`)
        # Files as `lstat` found them when a snapshot from the watch hashed them.
        self._seen: dict[str, watched.Seen] = {}
        self.walks = 0  # snapshots taken each way, for the curious (tests, the benchmark)
        self.from_watch = 0

    @property
    def max_files(self) -> int:
        return self._walker.max_files

    async def _run(
        self,
        *args: str,
        stdin: bytes | None = None,
        ok: tuple[int, ...] = (0,),
        records: RecordCap | None = None,
        writes_work_tree: bool = False,
        index: Path | None = None,
    ) -> bytes:
        if self._stopped:
            raise CheckpointError(STOPPED)
        _check_work_tree(self.work_tree)
        return await run_git(
            self._git,
            self.git_dir,
            self.work_tree,
            args,
            stdin=stdin,
            ok_codes=ok,
            children=self._children,
            records=records,
            writes_work_tree=writes_work_tree,
            index=index,
        )

    @asynccontextmanager
    async def _converse(self, *args: str) -> AsyncIterator[Conversation]:
        if self._stopped:
            raise CheckpointError(STOPPED)
        _check_work_tree(self.work_tree)
        async with converse_git(
            self._git, self.git_dir, self.work_tree, args, children=self._children
        ) as conversation:
            yield conversation

    def stop(self) -> None:
        """Kill the git processes running for this repository, close the watch, and refuse
        any new one."""
        self._stopped = True
        stop_children(self._children)
        if self._watch is not None:
            self._watch.close()

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    async def open(self, first_turn: int = 1) -> None:
        """Create the repository if need be (its checkpoints cover turns from `first_turn`
        on: a session forked elsewhere, or older than checkpoints, has turns before them);
        clean up after a process killed mid-operation."""
        async with self._lock:
            if self._stopped:
                raise CheckpointError(STOPPED)
            if not self.exists:
                self.git_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                await run_git(
                    self._git,
                    self.git_dir,
                    None,
                    ["init", "-q", "--bare", "--template=", str(self.git_dir)],
                    children=self._children,
                )
                os.chmod(self.git_dir, 0o700)
                write_atomically(self.git_dir / FIRST_TURN, str(first_turn).encode())
            elif stat.S_IMODE((self.git_dir / "config").stat().st_mode) & 0o077:
                await asyncio.to_thread(_make_private, self.git_dir)
            self._clear_stale_lock()
            journal = restoring.read_journal(self.git_dir)
            if journal is not None:
                await self._apply(journal)

    def _clear_stale_lock(self) -> None:
        # We are the only writer (the session's lease); a lock left now is a dead git's.
        for name in ("index", "info/exclude", WATCHED_INDEX, restoring.SCRATCH):
            try:
                (self.git_dir / (name + ".lock")).unlink()
            except FileNotFoundError:
                pass

    def remove(self) -> None:
        if self.git_dir.exists():
            shutil.rmtree(self.git_dir)

    def copy_to(self, destination: Path) -> None:
        """A copy for a forked session; objects are hard-linked (they never change)."""

        def link_or_copy(src: str, dst: str) -> None:
            if "/objects/" in src and not src.endswith("/info/packs"):
                try:
                    os.link(src, dst)
                    return
                except OSError:
                    pass
            shutil.copy2(src, dst)

        shutil.copytree(self.git_dir, destination, copy_function=link_or_copy)

    # ---- snapshots -----------------------------------------------------------------------

    async def snapshot(self, look_again: Iterable[str] = ()) -> Snapshot:
        """The work tree now, as a tree id (see the module's doc for the two ways).
        `look_again`: paths looked at again whatever the watch says, unless they are as
        this runtime last hashed them (what a rewind is about to write: a change no event
        reported, through a mapping or a hard link, still shows)."""
        async with self._lock:
            self._clear_stale_lock()
            self._load_state()
            changed = await self._look()
            if changed is not None:
                taken = await self._from_watch(changed | self._not_as_seen(look_again))
                if taken is not None:
                    return taken
            tree, skipped = await self._walker.snapshot(self._index_holds, self._tree)
            self._tree = self._index_holds = tree
            self._since_walk = self._added_since_walk = 0
            self._seen.clear()  # the walk hashed what changed: nothing of it is known here
            self._from_watch_ok = self._watch is not None and self._watch.watching
            self._save_state()
            self.walks += 1
            return Snapshot(tree, skipped)

    async def _look(self) -> set[str] | None:
        """What changed since the last snapshot, if the watch knows; else None, with a
        fresh watch started before the walk that follows (whose tree it then follows)."""
        if self._watch is None:
            return None
        changed = await self._watch.take()
        known = self._from_watch_ok and self._tree is not None
        self._from_watch_ok = False  # until a snapshot takes what was just taken
        if changed is None:
            await self._watch.restart()
        return changed if known else None

    async def _from_watch(self, changed: set[str]) -> Snapshot | None:
        """A snapshot from what the watch saw change; None when a walk must decide."""
        assert self._tree is not None
        ex = self._exclusions
        if self._since_walk + 1 >= self._verify_every or ex.users_changed():
            return None
        entries = self._walker.index_entries(self.git_dir) + self._added_since_walk
        limit = min(max(entries // 10, LOOK_AT[0]), LOOK_AT[1])
        skipped, stores = ex.skipped(), ex.stores()
        if self._own_store is not None:
            stores.add(self._own_store)
        plan = watched.plan(changed, ex, skipped, stores, limit)
        if plan is None:
            return None
        if self.max_files and entries + len(plan.files) > self.max_files:
            return None  # the walk counts exactly, and refuses
        git = watched.Git(
            self._run,
            self._converse,
            self.git_dir / WATCHED_INDEX,
            self.git_dir / EMPTY_INDEX,
            self.git_dir / "objects",
        )
        try:
            applied = await watched.apply(
                plan, self._tree, git, skipped, lambda now: ex.write(now, stores)
            )
        except CheckpointError:
            if self._stopped:
                raise
            applied = None  # e.g. a directory read while it was being replaced
        if applied is None:
            return None
        self._tree = applied.tree
        self._since_walk += 1
        self._added_since_walk += applied.added
        if len(self._seen) > SEEN_AT_MOST:
            self._seen.clear()
        for path in (*plan.gone, *plan.dirs, *plan.others, *plan.big):
            self._seen.pop(path, None)
        self._seen.update(plan.seen)
        self._from_watch_ok = True
        self._save_state()
        self.from_watch += 1
        found = tuple(Skipped(path, why) for path, why in sorted(applied.skipped.items()))
        return Snapshot(applied.tree, found)

    def _not_as_seen(self, paths: Iterable[str]) -> set[str]:
        found = set()
        for path in paths:
            if not path or path.startswith("/") or ".." in path.split("/"):
                continue  # not a path of the tree (a caller's argument, not yet checked)
            try:
                now: watched.Seen | None = watched.seen(
                    os.lstat(os.path.join(self.work_tree, path))
                )
            except OSError:
                now = None
            if now is None or now != self._seen.get(path):
                found.add(path)
        return found

    def _load_state(self) -> None:
        """Where the last runtime left off: its last snapshot, and what its index holds."""
        if self._known:
            return
        self._known = True
        try:
            raw = json.loads((self.git_dir / STATE).read_text())
        except (OSError, ValueError):
            return  # none (a repository from before it, or never written): as it is
        if isinstance(raw, dict):
            tree, index = raw.get("tree"), raw.get("index")
            self._tree = tree if isinstance(tree, str) else None
            self._index_holds = index if isinstance(index, str) else None

    def _save_state(self) -> None:
        body = json.dumps({"tree": self._tree, "index": self._index_holds}).encode()
        write_atomically(self.git_dir / STATE, body, durable=False)  # a hint: see walked.py

    def first_turn(self) -> int:
        """The first turn these checkpoints cover (1 when not recorded)."""
        try:
            text = (self.git_dir / FIRST_TURN).read_text().strip()
        except FileNotFoundError:
            return 1
        except OSError as exc:
            raise CheckpointError(f"cannot read {self.git_dir / FIRST_TURN}: {exc}") from None
        return int(text) if text.isdigit() else 1

    def skipped(self) -> dict[str, str]:
        return self._exclusions.skipped()

    def stores(self) -> tuple[str, ...]:
        """The data dirs of ours in the work tree ("dir/"): never in a snapshot, a list of
        changes or a restore."""
        found = self._exclusions.stores()
        if self._own_store is not None:
            found.add(self._own_store)
        return tuple(sorted(found))

    # ---- refs ----------------------------------------------------------------------------

    async def read_ref(self, name: str) -> str | None:
        out = await self._run("rev-parse", "-q", "--verify", name + "^{tree}", ok=(0, 1))
        return out.decode().strip() or None

    async def write_ref(self, name: str, tree: str) -> None:
        await self._run("update-ref", name, tree)

    async def refs(self, *prefixes: str) -> dict[str, str]:
        out = await self._run("for-each-ref", "--format=%(refname) %(objectname)", *prefixes)
        found: dict[str, str] = {}
        for line in out.decode().splitlines():
            name, _, oid = line.partition(" ")
            found[name] = oid
        return found

    async def delete_refs(self, names: Iterable[str]) -> None:
        script = "".join(f"delete {name}\n" for name in names)
        if script:
            await self._run("update-ref", "--stdin", stdin=script.encode())

    # ---- comparing -----------------------------------------------------------------------

    async def changed_paths(self, old: str, new: str) -> list[str]:
        out = await self._run("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new)
        return [p for p in out.decode(errors="surrogateescape").split("\0") if p]

    async def changes(self, old: str, new: str) -> list[FileChange]:
        out = await self._run(
            "diff-tree", "-r", "-z", "--raw", "--numstat", "--no-renames", old, new
        )
        tokens = out.decode(errors="surrogateescape").split("\0")
        statuses: dict[str, FileStatus] = {}
        counts: dict[str, tuple[int, int]] = {}
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.startswith(":"):
                letter = token.split()[-1][:1]
                statuses[tokens[i + 1]] = {"A": FileStatus.ADDED, "D": FileStatus.DELETED}.get(
                    letter, FileStatus.MODIFIED
                )
                i += 2
                continue
            if token.count("\t") >= 2:
                added, deleted, path = token.split("\t", 2)
                counts[path] = (
                    int(added) if added.isdigit() else 0,
                    int(deleted) if deleted.isdigit() else 0,
                )
            i += 1
        return [
            FileChange(path, status, *counts.get(path, (0, 0)))
            for path, status in sorted(statuses.items())
        ]

    async def diff(
        self, old: str, new: str, limit: int = MAX_DIFF_BYTES, paths: Sequence[str] = ()
    ) -> tuple[str, bool]:
        """The unified diff between two snapshots, at most `limit` bytes (and whether cut);
        `paths`: of those files only (the same hunks as in the whole diff)."""
        out = await self._run(
            "diff-tree",
            "-p",
            "-r",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            old,
            new,
            *(("--", *paths) if paths else ()),
        )
        if len(out) <= limit:
            return out.decode(errors="replace"), False
        cut = out[:limit]
        cut = cut[: cut.rfind(b"\n") + 1] or cut
        return cut.decode(errors="replace"), True

    async def entries(self, tree: str, paths: Sequence[str]) -> dict[str, str]:
        """path -> "mode oid" in `tree`, for the paths it has (absent: not in the tree)."""
        found: dict[str, str] = {}
        for chunk in chunks(paths):
            out = await self._run("ls-tree", "-r", "-z", "--full-tree", tree, "--", *chunk)
            for record in out.decode(errors="surrogateescape").split("\0"):
                if not record:
                    continue
                meta, _, path = record.partition("\t")
                mode, _kind, oid = meta.split(" ")
                found[path] = f"{mode} {oid}"
        return found

    async def patched_tree(
        self, tree: str, patch: bytes, *, reverse: bool, entry: tuple[str, str] | None = None
    ) -> str | None:
        """`tree` with `patch` applied (`reverse`: taken back), optionally after setting one
        path to an entry ("mode oid") first; None when the patch does not apply (its lines
        are not there). Done on a scratch index: the work tree and the snapshots' index
        are not touched, so what comes out is a tree a journaled `restore` writes."""
        scratch = self.git_dir / "index.patch"
        applied = ["apply", "--cached", "--whitespace=nowarn", *(["-R"] if reverse else [])]
        async with self._lock:
            try:
                await self._run("read-tree", tree, index=scratch)
                if entry is not None:
                    path, mode_oid = entry
                    mode, oid = mode_oid.split(" ")
                    cacheinfo = f"{mode},{oid},{path}"
                    await self._run(
                        "update-index", "--add", "--cacheinfo", cacheinfo, index=scratch
                    )
                try:
                    await self._run(*applied, stdin=patch, index=scratch)
                except CheckpointError as exc:
                    if str(exc).startswith("git apply failed"):
                        return None  # the lines are not there: the caller says so
                    raise
                return (await self._run("write-tree", index=scratch)).decode().strip()
            finally:
                remove_quietly(scratch)

    # ---- restoring -----------------------------------------------------------------------

    @property
    def restore_pending(self) -> bool:
        return (self.git_dir / restoring.JOURNAL).exists()

    async def restore(self, plan: RestorePlan) -> Snapshot:
        """Write the plan into the work tree; journaled first, so a restore cut short is
        finished by the next `open` (or a retry) rather than left half done."""
        async with self._lock:
            self._clear_stale_lock()
            restoring.write_journal(self.git_dir, plan)
            return await self._apply(plan)

    async def _apply(self, plan: RestorePlan) -> Snapshot:
        """Idempotent: running it twice (after a crash) gives the same tree."""
        self._load_state()
        tree = await restoring.apply(plan, self._run, self._converse, self.work_tree, self.git_dir)
        # What the restore wrote, the watch saw: the next snapshot looks at it again.
        self._tree = tree
        self._save_state()
        return Snapshot(tree)


def _check_work_tree(work_tree: str) -> None:
    if not os.path.isdir(work_tree):
        raise CheckpointError(f"the session directory {work_tree} no longer exists")
    if not os.access(work_tree, os.R_OK | os.X_OK):
        raise CheckpointError(f"the session directory {work_tree} is not readable")
