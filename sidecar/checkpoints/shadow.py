"""A session's shadow repository: snapshots of its working tree, as git trees under refs.

The repository lives in the sidecar's data dir (one per session), is bare, and is used
with the session cwd as work tree; its index is its own, so git's stat cache makes a
snapshot of an unchanged tree cost a walk of the directory, not a read of every file.
Snapshots are trees (no commits), kept alive by refs; the refs are the checkpoints.

Left out of every snapshot: what the work tree's `.gitignore` files (and the user's own
`.git/info/exclude`) ignore, `.git` itself, nested repositories, and files larger than
`max_file_bytes` — the last two listed as skipped and never touched by a restore.

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

from sidecar.checkpoints.git import run_git
from sidecar.domain.errors import CheckpointError
from sidecar.domain.files import FileChange, FileStatus, Skipped

EMPTY_TREE: Final = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
JOURNAL: Final = "restore-journal.json"
FIRST_TURN: Final = "first-turn"
SKIPPED: Final = "skipped.json"
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


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class ShadowRepo:
    def __init__(self, git_dir: Path, work_tree: str, max_file_bytes: int, git: str) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.max_file_bytes = max_file_bytes
        self._git = git
        self._lock = asyncio.Lock()  # one mutating operation at a time
        self._since_full_pass = _FULL_PASS_EVERY  # the first snapshot stages everything

    async def _run(
        self, *args: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)
    ) -> bytes:
        _check_work_tree(self.work_tree)
        return await run_git(
            self._git, self.git_dir, self.work_tree, args, stdin=stdin, ok_codes=ok
        )

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    async def open(self, first_turn: int = 1) -> None:
        """Create the repository if need be (its checkpoints cover turns from `first_turn`
        on: a session forked elsewhere, or older than checkpoints, has turns before them);
        clean up after a process killed mid-operation."""
        async with self._lock:
            if not self.exists:
                self.git_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                await run_git(
                    self._git,
                    self.git_dir,
                    None,
                    ["init", "-q", "--bare", "--template=", str(self.git_dir)],
                )
                os.chmod(self.git_dir, 0o700)
                _write_atomically(self.git_dir / FIRST_TURN, str(first_turn).encode())
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
        # One pass: new files ("? path") and changed tracked ones ("C path"), from git's
        # caches (the untracked cache, the index's stat data).
        listed = await self._run(
            "ls-files", "-z", "-t", "--others", "--modified", "--exclude-standard"
        )
        candidates: set[str] = set()
        tracked_changed: set[str] = set()
        for record in listed.decode(errors="surrogateescape").split("\0"):
            tag, _, path = record.partition(" ")
            if not path:
                continue
            (candidates if tag == "?" else tracked_changed).add(path)
        now: dict[str, str] = {}
        for path in candidates | tracked_changed | set(before):
            reason = self._reason(path)
            if reason is not None:
                now[path] = reason
        changed: list[str] | None = sorted((candidates | tracked_changed) - set(now))
        if now != before or not (self.git_dir / "info" / "exclude").exists():
            self._write_excludes(now)
            changed = None
        newly_out = sorted(p for p in now if p in tracked_changed)
        for chunk in _chunks(newly_out):
            await self._run("rm", "-q", "--cached", "--ignore-unmatch", "--", *chunk)
        return tuple(Skipped(path, reason) for path, reason in sorted(now.items())), changed

    def _write_excludes(self, skipped: dict[str, str]) -> None:
        lines = ["# written by acp-session-host: what checkpoints leave out"]
        try:
            own = Path(self.work_tree, ".git", "info", "exclude").read_text(errors="replace")
            lines += ["# the work tree's own .git/info/exclude:", own]
        except OSError:
            pass  # no repository there, or none of its own excludes: nothing to add
        lines += [_exclude_line(path) for path in sorted(skipped)]
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        _write_atomically(info / "exclude", ("\n".join(lines) + "\n").encode())
        _write_atomically(self.git_dir / SKIPPED, json.dumps(skipped).encode())

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

    async def diff(self, old: str, new: str, limit: int = MAX_DIFF_BYTES) -> tuple[str, bool]:
        """The unified diff between two snapshots, at most `limit` bytes (and whether cut)."""
        out = await self._run(
            "diff-tree", "-p", "-r", "--no-color", "--no-ext-diff", "--no-renames", old, new
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
            await self._run("checkout", plan.target, "--", *chunk)
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
