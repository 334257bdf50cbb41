"""Writing a checkpoint's files back into the work tree, journaled so a restore cut short
is finished by the next `open` (or a retry) rather than left half done.

A restore is a plan: paths written back from the `target` tree, paths removed, the tree
before it, and the refs the step is recorded under (both written once it is done). Its files are written by `git checkout` on a scratch
index (so git's own rules apply: the work tree's attributes and line endings, the
executable bit, symlinks, a directory in the way), and the tree it leaves is the tree
before it (`<ref>/before`) with those paths changed (`tree_edit.py`). Neither reads the
snapshots' index, so a restore costs what it writes, not the size of the tree.
Replaying the plan gives the same files and the same tree: it is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sidecar.checkpoints.atomic import remove_quietly, write_atomically
from sidecar.checkpoints.tree_edit import Converse, Entry, TreeDirs
from sidecar.domain.errors import CheckpointError

JOURNAL: Final = "restore-journal.json"
SCRATCH: Final = "index.restore"  # the scratch index a restore checks out through
PATH_CHUNK: Final = 500  # paths per git argv (well inside ARG_MAX)
Run = Callable[..., Awaitable[bytes]]  # ShadowRepo._run


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a restore writes: `restore` paths from `target`, `delete` paths removed."""

    target: str
    restore: tuple[str, ...]
    delete: tuple[str, ...]
    ref: str  # the step's refs: `<ref>/before` (the tree before it) and `<ref>/after`
    before: str | None = None  # the tree before it (None, in an older journal: the ref)
    # What `restore` paths are in `target` ("mode oid"), when known: not read again.
    entries: dict[str, str] | None = None


def read_journal(git_dir: Path) -> RestorePlan | None:
    try:
        raw = json.loads((git_dir / JOURNAL).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read the restore journal: {exc}") from None
    before, entries = raw.get("before"), raw.get("entries")
    return RestorePlan(
        raw["target"],
        tuple(raw["restore"]),
        tuple(raw["delete"]),
        raw["ref"],
        before if isinstance(before, str) else None,
        {str(k): str(v) for k, v in entries.items()} if isinstance(entries, dict) else None,
    )


def write_journal(git_dir: Path, plan: RestorePlan) -> None:
    body = {
        "target": plan.target,
        "restore": list(plan.restore),
        "delete": list(plan.delete),
        "ref": plan.ref,
        "before": plan.before,
        "entries": plan.entries,
    }
    write_atomically(git_dir / JOURNAL, json.dumps(body).encode())


async def apply(
    plan: RestorePlan, run: Run, converse: Converse, work_tree: str, git_dir: Path
) -> str:
    """Write the plan into the work tree; the tree it leaves (recorded as `<ref>/after`).
    The journal, written before, is removed once the result is recorded."""
    before = plan.before
    if before is None:  # a journal of an older version, which wrote `<ref>/before` first
        out = await run("rev-parse", "-q", "--verify", plan.ref + "/before^{tree}", ok=(0, 1))
        before = out.decode().strip()
        if not before:
            raise CheckpointError(f"the restore journal names {plan.ref}, which has no tree before")
    _delete(work_tree, plan.delete)
    # The directories above the paths are read while git writes the files.
    paths = (*plan.delete, *plan.restore)
    reading = asyncio.ensure_future(TreeDirs.read(run, before, paths))
    try:
        written = await _written(plan, run, git_dir / SCRATCH)
        dirs = await reading
    finally:
        if not reading.done():
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
    missing = [path for path in plan.restore if path not in written]
    if missing:
        raise CheckpointError(f"the restore did not write {missing[0]}")
    edits: dict[str, Entry | None] = {path: None for path in plan.delete}
    edits.update({path: written[path] for path in plan.restore})
    tree = await dirs.write(converse, edits, git_dir / "objects")
    # Both ends of the step at once: until then the step is not in the history.
    ends = "" if plan.before is None else f"update {plan.ref}/before {before}\n"
    await run("update-ref", "--stdin", stdin=(ends + f"update {plan.ref}/after {tree}\n").encode())
    (git_dir / JOURNAL).unlink()
    return tree


async def _written(plan: RestorePlan, run: Run, scratch: Path) -> dict[str, Entry]:
    """`git checkout` of the restored paths through a scratch index; what it wrote."""
    written: dict[str, Entry] = {}
    if plan.entries is not None:
        restoring = set(plan.restore)
        written = {p: _entry(e) for p, e in plan.entries.items() if p in restoring}
    remove_quietly(scratch)
    try:
        for chunk in chunks(plan.restore):
            await run("checkout", plan.target, "--", *chunk, writes_work_tree=True, index=scratch)
        if plan.restore and plan.entries is None:
            written = _entries(await run("ls-files", "-s", "-z", index=scratch))
    finally:
        remove_quietly(scratch)
    return written


def _entry(mode_oid: str) -> Entry:
    mode, _, oid = mode_oid.partition(" ")
    return (mode, oid)


def _entries(out: bytes) -> dict[str, Entry]:
    found: dict[str, Entry] = {}
    for record in out.decode(errors="surrogateescape").split("\0"):
        if record:
            meta, _, path = record.partition("\t")
            mode, oid, _stage = meta.split(" ")
            found[path] = (mode, oid)
    return found


def chunks(items: Sequence[str] | Iterable[str]) -> Iterable[list[str]]:
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) >= PATH_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


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


def _prune_empty_parents(root: str, directory: str) -> None:
    while directory.startswith(root + "/"):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty (or gone): stop
        directory = os.path.dirname(directory)
