"""A session's shadow repository: snapshots of its working tree, as git trees under refs.

The repository lives in the sidecar's data dir (one per session), is bare, and is used
with the session cwd as work tree; its index is its own, so git's stat cache makes a
snapshot of an unchanged tree cost a walk of the directory, not a read of every file.
Snapshots are trees (no commits), kept alive by refs; the refs are the checkpoints.

Left out of every snapshot: what the work tree's `.gitignore` files (and the user's own
`.git/info/exclude`) ignore, `.git` itself, nested repositories, and files larger than
`max_file_bytes` — the last two listed as skipped and never touched by a restore — and
every data dir of ours inside the work tree (never listed, never diffed, never restored:
a snapshot of the store that holds the snapshots grows with every turn). Our own data dir
is excluded before the first listing; another one (a second sidecar's, an older one's) is
recognised from the paths git lists anyway, with no walk of ours: a `sessions.db` beside a
`checkpoints/` directory, or a `checkpoints/<id>/first-turn` beside that repository's
`HEAD` (a shadow repository of ours: a store other than SQLite has no `sessions.db`). From
then on git does not enter it, and whatever an older snapshot took of it leaves the index.

A tree with more than `max_files` files to snapshot (0: no bound) is refused with
`TreeRefused` before anything is hashed or staged: the count is the index's entries plus
the new files git lists, and that listing is read only up to the bound (git is stopped
there). git still walks the directories' names before it prints (300,000 files: about
0.4 s here), so the caller refuses once and does not ask again each turn.

Every git child runs with umask 077 and in its own process group (`git.py`); `stop` kills
the running ones and refuses new ones (a runtime closing never waits on a snapshot: what a
killed git leaves, a stale `index.lock`, is cleared by the next use).

Only the session's one runtime writes here (the lease); an operation cut short (a
SIGKILL mid-snapshot, mid-restore) is finished or undone by the next `open`: a stale
`index.lock` is removed, and a restore's journal is replayed to the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sidecar.checkpoints.git import Children, RecordCap, run_git, stop_children
from sidecar.domain.errors import CheckpointError
from sidecar.domain.files import FileChange, FileStatus, Skipped

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
JOURNAL: Final = "restore-journal.json"
FIRST_TURN: Final = "first-turn"
SKIPPED: Final = "skipped.json"
STORES: Final = "data-dirs.json"  # the data dirs of ours found in the work tree ("dir/")
STOPPED: Final = "checkpoints stopped: the session is closing"
MAX_DIFF_BYTES: Final = 512 * 1024
_PATH_CHUNK: Final = 500  # paths per git argv (well inside ARG_MAX)
# Snapshots staging only the paths git listed, between two that stage with a whole
# `add -A` pass (which also refreshes git's stat and untracked caches: a file touched but
# not changed is otherwise compared by content by every listing until then).
_FULL_PASS_EVERY: Final = 32


@dataclass(frozen=True, slots=True)
class Snapshot:
    tree: str
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a restore writes: `restore` paths from `target`, `delete` paths removed."""

    target: str
    restore: tuple[str, ...]
    delete: tuple[str, ...]
    ref: str  # the checkpoint ref the result is recorded under (`<ref>/after`)


def _exclude_line(path: str) -> str:
    """A gitignore line matching exactly this one path, from the work tree's root."""
    escaped = "".join("\\" + c if c in "*?[]\\!# " else c for c in path.rstrip("/"))
    return "/" + escaped + ("/" if path.endswith("/") else "")


class TreeRefused(CheckpointError):
    """The work tree is not one to snapshot (too many files); the session goes on without
    checkpoints."""


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def store_inside(data_dir: Path | None, work_tree: str) -> str | None:
    """`data_dir` as a path of the work tree ("dir/"), if it is inside it."""
    if data_dir is None:
        return None
    relative = os.path.relpath(os.path.realpath(data_dir), os.path.realpath(work_tree))
    if relative == "." or relative == ".." or relative.startswith("../"):
        return None
    return relative + "/"


def _store_of(work_tree: str, path: str) -> str | None:
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


def _under(path: str, stores: set[str]) -> bool:
    return path.startswith(tuple(stores))


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
    ) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files  # 0: no bound
        self._git = git
        self._own_store = store_inside(data_dir, work_tree)
        self._lock = asyncio.Lock()  # one mutating operation at a time
        self._since_full_pass = _FULL_PASS_EVERY  # the first snapshot stages everything
        self._children: Children = set()
        self._stopped = False

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

    def stop(self) -> None:
        """Kill the git processes running for this repository and refuse any new one."""
        self._stopped = True
        stop_children(self._children)

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
                _write_atomically(self.git_dir / FIRST_TURN, str(first_turn).encode())
            elif stat.S_IMODE((self.git_dir / "config").stat().st_mode) & 0o077:
                await asyncio.to_thread(_make_private, self.git_dir)
            self._clear_stale_lock()
            journal = self._journal()
            if journal is not None:
                await self._apply(journal)

    def _clear_stale_lock(self) -> None:
        # We are the only writer (the session's lease); a lock left now is a dead git's.
        for name in ("index.lock", "info/exclude.lock"):
            try:
                (self.git_dir / name).unlink()
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

    async def snapshot(self) -> Snapshot:
        """The work tree now, as a tree id (changed files hashed, the rest from the stat
        cache)."""
        async with self._lock:
            self._clear_stale_lock()
            skipped, changed = await self._refresh_skipped()
            await self._stage(changed)
            tree = (await self._run("write-tree")).decode().strip()
            return Snapshot(tree, skipped)

    async def _stage(self, changed: list[str] | None) -> None:
        """Bring the index to the work tree. `changed`: the paths git just listed as new,
        modified or deleted (nothing else can differ), or None when the exclusions changed
        since that listing (then only a whole pass knows what is in)."""
        self._since_full_pass += 1
        if changed is not None and self._since_full_pass < _FULL_PASS_EVERY:
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

    def _load_skipped(self) -> dict[str, str]:
        try:
            raw = json.loads((self.git_dir / SKIPPED).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read {self.git_dir / SKIPPED}: {exc}") from None
        return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}

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
        return self._load_skipped()

    def _load_stores(self) -> set[str]:
        try:
            raw = json.loads((self.git_dir / STORES).read_text())
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read {self.git_dir / STORES}: {exc}") from None
        return {str(p) for p in raw} if isinstance(raw, list) else set()

    def stores(self) -> tuple[str, ...]:
        """The data dirs of ours in the work tree ("dir/"): never in a snapshot, a list of
        changes or a restore."""
        found = self._load_stores()
        if self._own_store is not None:
            found.add(self._own_store)
        return tuple(sorted(found))

    def _index_entries(self) -> int:
        """How many paths the index holds (its header says: no read of the rest)."""
        try:
            with open(self.git_dir / "index", "rb") as handle:
                head = handle.read(12)
        except FileNotFoundError:
            return 0
        if len(head) < 12 or head[:4] != b"DIRC":
            return 0
        return int.from_bytes(head[8:12], "big")

    def _too_many(self) -> str:
        return (
            f"checkpoints are off for this session: {self.work_tree} has more than "
            f"{self.max_files} files to snapshot (those .gitignore leaves in), too many to "
            "take before every turn; open the session in the project's own directory, or "
            "raise --checkpoint-max-files (0: no bound)"
        )

    async def _leave_out(self, stores: set[str], added: Iterable[str]) -> None:
        """Record the data dirs of ours, tell git to leave them out, and take out of the
        index whatever an older snapshot took of the `added` ones."""
        self._write_excludes(self._load_skipped(), stores)
        # -f: without it git refuses an entry whose file changed since (the store always has).
        for chunk in _chunks(sorted(p.rstrip("/") for p in added)):
            await self._run("rm", "-r", "-f", "-q", "--cached", "--ignore-unmatch", "--", *chunk)

    def _reason(self, path: str) -> str | None:
        if path.endswith("/"):
            return "a nested git repository"
        try:
            info = os.lstat(os.path.join(self.work_tree, path))
        except OSError:
            return None
        if stat.S_ISREG(info.st_mode) and info.st_size > self.max_file_bytes:
            return f"larger than {self.max_file_bytes} bytes"
        return None

    async def _refresh_skipped(self) -> tuple[tuple[Skipped, ...], list[str] | None]:
        """Decide what this snapshot leaves out, and tell git (info/exclude). Looks only at
        new and modified files (git lists them from its caches) and at what was skipped
        before: an unchanged tree costs no extra stats. Also the listed paths that go in
        (None when the exclusions changed: the listing was made under the old ones)."""
        before = self._load_skipped()
        stores = self._load_stores()
        exclude = self.git_dir / "info" / "exclude"
        if self._own_store is not None and self._own_store not in stores or not exclude.exists():
            # Before the first listing: git never walks into our own store.
            added = {self._own_store} - stores if self._own_store is not None else set()
            stores |= added
            await self._leave_out(stores, added)
        # One pass: new files ("? path") and changed tracked ones ("C path"), from git's
        # caches (the untracked cache, the index's stat data); cut once the new files alone
        # pass the bound.
        found: set[str] = set()

        def counts(record: bytes) -> bool:
            tag, _, raw = record.partition(b" ")
            path = raw.decode(errors="surrogateescape")
            store = _store_of(self.work_tree, path)
            if store is not None and store not in stores:
                found.add(store)
            return tag == b"?" and not _under(path, stores | found)

        cap = RecordCap(self.max_files, counts) if self.max_files else None
        listed = await self._run(
            "ls-files", "-z", "-t", "--others", "--modified", "--exclude-standard", records=cap
        )
        if cap is not None and cap.stopped:
            raise TreeRefused(self._too_many())
        candidates: set[str] = set()
        tracked_changed: set[str] = set()
        for record in listed.decode(errors="surrogateescape").split("\0"):
            tag, _, path = record.partition(" ")
            if not path:
                continue
            if cap is None:
                store = _store_of(self.work_tree, path)
                if store is not None and store not in stores:
                    found.add(store)
            (candidates if tag == "?" else tracked_changed).add(path)
        stores_changed = bool(found)
        if found:
            stores |= found
            await self._leave_out(stores, found)
        candidates = {p for p in candidates if not _under(p, stores)}
        tracked_changed = {p for p in tracked_changed if not _under(p, stores)}
        if self.max_files and self._index_entries() + len(candidates) > self.max_files:
            raise TreeRefused(self._too_many())
        now: dict[str, str] = {}
        for path in candidates | tracked_changed | set(before):
            reason = self._reason(path)
            if reason is not None:
                now[path] = reason
        changed: list[str] | None = sorted((candidates | tracked_changed) - set(now))
        if now != before:
            self._write_excludes(now, stores)
            changed = None
        elif stores_changed:
            changed = None  # listed under the old exclusions
        newly_out = sorted(p for p in now if p in tracked_changed)
        for chunk in _chunks(newly_out):
            await self._run("rm", "-q", "--cached", "--ignore-unmatch", "--", *chunk)
        return tuple(Skipped(path, reason) for path, reason in sorted(now.items())), changed

    def _write_excludes(self, skipped: dict[str, str], stores: set[str]) -> None:
        lines = ["# written by acp-session-host: what checkpoints leave out"]
        try:
            own = Path(self.work_tree, ".git", "info", "exclude").read_text(errors="replace")
            lines += ["# the work tree's own .git/info/exclude:", own]
        except OSError:
            pass  # no repository there, or none of its own excludes: nothing to add
        lines += [_exclude_line(path) for path in sorted(skipped)]
        # Last: no negation in the user's own excludes can bring a store of ours back in.
        lines += ["# data dirs of acp-session-host:"] + [_exclude_line(p) for p in sorted(stores)]
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, exist_ok=True)
        _write_atomically(info / "exclude", ("\n".join(lines) + "\n").encode())
        _write_atomically(self.git_dir / SKIPPED, json.dumps(skipped).encode())
        _write_atomically(self.git_dir / STORES, json.dumps(sorted(stores)).encode())

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
        for chunk in _chunks(paths):
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
                await asyncio.to_thread(_remove_quietly, scratch)

    # ---- restoring -----------------------------------------------------------------------

    def _journal(self) -> RestorePlan | None:
        try:
            raw = json.loads((self.git_dir / JOURNAL).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read the restore journal: {exc}") from None
        return RestorePlan(raw["target"], tuple(raw["restore"]), tuple(raw["delete"]), raw["ref"])

    @property
    def restore_pending(self) -> bool:
        return (self.git_dir / JOURNAL).exists()

    async def restore(self, plan: RestorePlan) -> Snapshot:
        """Write the plan into the work tree; journaled first, so a restore cut short is
        finished by the next `open` (or a retry) rather than left half done."""
        async with self._lock:
            self._clear_stale_lock()
            body = {
                "target": plan.target,
                "restore": list(plan.restore),
                "delete": list(plan.delete),
                "ref": plan.ref,
            }
            _write_atomically(self.git_dir / JOURNAL, json.dumps(body).encode())
            return await self._apply(plan)

    async def _apply(self, plan: RestorePlan) -> Snapshot:
        """Idempotent: running it twice (after a crash) gives the same tree."""
        _delete(self.work_tree, plan.delete)
        for chunk in _chunks(plan.restore):
            await self._run("checkout", plan.target, "--", *chunk, writes_work_tree=True)
        # Only what the restore touched is re-read (checkout already staged the restored
        # paths; this records the deletions): anything else the next snapshot sees.
        for chunk in _chunks(plan.delete):
            await self._run("add", "-A", "--ignore-errors", "--", *chunk, ok=(0, 1))
        tree = (await self._run("write-tree")).decode().strip()
        await self._run("update-ref", plan.ref + "/after", tree)
        (self.git_dir / JOURNAL).unlink()
        return Snapshot(tree)


def _check_work_tree(work_tree: str) -> None:
    if not os.path.isdir(work_tree):
        raise CheckpointError(f"the session directory {work_tree} no longer exists")
    if not os.access(work_tree, os.R_OK | os.X_OK):
        raise CheckpointError(f"the session directory {work_tree} is not readable")


def _delete(work_tree: str, paths: Iterable[str]) -> None:
    root = os.path.realpath(work_tree)
    for path in paths:
        full = os.path.join(root, path)
        try:
            os.unlink(full)
        except FileNotFoundError:
            pass  # already gone: a journaled restore replayed after a crash
        except IsADirectoryError:
            shutil.rmtree(full)
        _prune_empty_parents(root, os.path.dirname(full))


def _remove_quietly(path: Path) -> None:
    """A scratch file gone or never made: either is fine."""
    path.unlink(missing_ok=True)


def _chunks(items: Sequence[str] | Iterable[str]) -> Iterable[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) >= _PATH_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def _prune_empty_parents(root: str, directory: str) -> None:
    while directory.startswith(root + "/"):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty (or gone): stop
        directory = os.path.dirname(directory)
