"""Snapshots from a watch of the tree (`checkpoints/watched.py`, `fs/tree_watch.py`) are
the snapshots a walk of the whole tree takes, with real files, real git and real inotify.

A property test runs random steps in a work tree -- files written, changed, deleted,
made executable, turned into symlinks or directories and back, directories made,
removed and renamed, `.gitignore` and `.gitattributes` written, files grown past the
size bound, a nested repository, a FIFO, bursts of many files -- and after each step
compares the snapshot of a repository that follows the watch with the snapshot of one
that walks (the code path every snapshot took before the watch): the same tree, the
same skipped files. Then the ways the watch can fail, each forced for real: the
kernel's queue overflowing, more changes than a snapshot looks at one by one, a
directory moved out, a change no event reports (a write through a shared mapping), no
room left in the process's budget of watches -- each still gives the walk's tree. And
the parts: a tree the repository has already is not written again, and the file system
under a directory is read right (only local ones are watched).
"""

from __future__ import annotations

import asyncio
import mmap
import os
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.checkpoints.git import git_binary
from sidecar.checkpoints.shadow import ShadowRepo, Snapshot
from sidecar.checkpoints.tree_edit import TreeDirs
from sidecar.fs import mounts
from sidecar.fs.tree_watch import WatchBudget

pytestmark = pytest.mark.timeout(600)

MAX_BYTES = 3000
FILES = ["a.txt", "b.py", "d1/c.txt", "d1/d2/e.txt", "d3/f.log", "d3/g.txt", "x", "d1/x"]
DIRS = ["d1", "d1/d2", "d3", "x", "n1", "n1/n2"]
CONTENT = [b"one\n", b"two\nlines\n", b"crlf\r\nline\r\n", b"", b"\x00binary\x01"]
IGNORES = ["*.log\n", "d3/\n", "*.log\n!d3/f.log\n", "x\n", ""]
GIT = git_binary() or "git"  # a missing git fails the tests: checkpoints need it


def _remove(full: Path) -> None:
    if full.is_symlink() or full.is_file() or full.is_fifo():
        full.unlink()
    elif full.is_dir():
        shutil.rmtree(full)


def _place(root: Path, path: str) -> Path:
    """`path` made free (whatever was there removed), its parents directories."""
    full = root / path
    for parent in reversed(full.relative_to(root).parents[:-1]):
        where = root / parent
        if where.is_symlink() or not where.is_dir():
            _remove(where)
            where.mkdir()
    _remove(full)
    return full


def _write(root: Path, path: str, data: bytes) -> None:
    _place(root, path).write_bytes(data)


def apply_step(root: Path, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "write":
        _write(root, step[1], CONTENT[step[2]])
    elif kind == "append":
        full = root / step[1]
        if full.is_file() and not full.is_symlink():
            with open(full, "ab") as handle:
                handle.write(b"more\n")
    elif kind == "delete":
        _remove(root / step[1])
    elif kind == "chmod":
        full = root / step[1]
        if full.is_file() and not full.is_symlink():
            full.chmod(full.stat().st_mode ^ 0o111)
    elif kind == "touch":
        full = root / step[1]
        if full.exists() and not full.is_symlink():
            os.utime(full)
    elif kind == "symlink":
        _place(root, step[1]).symlink_to(step[2])
    elif kind == "mkdir":
        full = root / step[1]
        if full.is_symlink() or not full.is_dir():
            _place(root, step[1]).mkdir()
        (full / "inner.txt").write_bytes(CONTENT[step[2]])
    elif kind == "rmdir":
        _remove(root / step[1])
    elif kind == "rename":
        source, target = root / step[1], root / step[2]
        if source.is_dir() and not source.is_symlink() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            if not str(target).startswith(str(source) + "/"):
                source.rename(target)
    elif kind == "ignore":
        _write(root, step[1], IGNORES[step[2]].encode())
    elif kind == "attributes":
        _write(root, ".gitattributes", b"*.txt text=auto\n" if step[1] else b"")
    elif kind == "big":
        _write(root, step[1], b"big\n" * (MAX_BYTES // 4 + step[2]))
    elif kind == "nested":
        where = _place(root, step[1])
        where.mkdir()
        subprocess.run([GIT, "init", "-q", str(where)], check=True)
        (where / "inside.txt").write_text("inside\n")
    elif kind == "fifo":
        os.mkfifo(_place(root, step[1]))
    elif kind == "burst":
        for n in range(step[1]):
            _write(root, f"burst/{n % 7}/f{n}.txt", f"{n}\n".encode())


files = st.sampled_from(FILES)
steps = st.one_of(
    st.tuples(st.just("write"), files, st.integers(0, len(CONTENT) - 1)),
    st.tuples(st.just("append"), files),
    st.tuples(st.just("delete"), st.sampled_from(FILES + DIRS)),
    st.tuples(st.just("chmod"), files),
    st.tuples(st.just("touch"), st.sampled_from(FILES + DIRS)),
    st.tuples(st.just("symlink"), files, st.sampled_from(["a.txt", "d1", "nowhere", "../out"])),
    st.tuples(st.just("mkdir"), st.sampled_from(DIRS), st.integers(0, len(CONTENT) - 1)),
    st.tuples(st.just("rmdir"), st.sampled_from(DIRS)),
    st.tuples(st.just("rename"), st.sampled_from(DIRS), st.sampled_from(DIRS + ["moved"])),
    st.tuples(
        st.just("ignore"),
        st.sampled_from([".gitignore", "d1/.gitignore"]),
        st.integers(0, len(IGNORES) - 1),
    ),  # fmt: skip
    st.tuples(st.just("attributes"), st.booleans()),
    st.tuples(st.just("big"), files, st.integers(1, 50)),
    st.tuples(st.just("nested"), st.sampled_from(["n1", "d1/d2"])),
    st.tuples(st.just("fifo"), files),
    st.tuples(st.just("burst"), st.sampled_from([3, 150])),
)


class Pair:
    """One work tree, two shadow repositories: one follows a watch, one walks."""

    def __init__(self, base: Path, *, verify_every: int = 10_000) -> None:
        self.root = base / "tree"
        self.root.mkdir()
        self.watched = ShadowRepo(
            base / "watched.git", str(self.root), MAX_BYTES, GIT,
            watch=WatchBudget(), verify_every=verify_every,
        )  # fmt: skip
        self.walked = ShadowRepo(base / "walked.git", str(self.root), MAX_BYTES, GIT)

    async def open(self) -> None:
        await self.watched.open()
        await self.walked.open()

    async def both(self, what: str) -> Snapshot:
        fast = await self.watched.snapshot()
        slow = await self.walked.snapshot()
        assert (fast.tree, fast.skipped) == (slow.tree, slow.skipped), what
        return fast

    def close(self) -> None:
        self.watched.stop()
        self.walked.stop()


def run_pair(test: Callable[[Pair], Awaitable[None]], **options: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="ckpt-watch-") as base:
        pair = Pair(Path(base), **options)

        async def go() -> None:
            try:
                await pair.open()
                await test(pair)
            finally:
                pair.close()

        asyncio.run(go())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=25))
def test_a_snapshot_from_the_watch_is_the_walks_snapshot(sequence: list[tuple[Any, ...]]) -> None:
    async def test(pair: Pair) -> None:
        for path in ("a.txt", "d1/c.txt", "d1/d2/e.txt", "d3/g.txt", "n1/n2/h.txt"):
            _write(pair.root, path, f"{path}\n".encode())
        await pair.both("the first (a walk for both)")
        for index, step in enumerate(sequence):
            apply_step(pair.root, step)
            await pair.both(f"after step {index}: {step}")
        # The watch is followed again after whatever the steps did to it.
        apply_step(pair.root, ("append", "a.txt"))
        await pair.both("a file changed")
        apply_step(pair.root, ("write", "d1/c.txt", 1))
        before = pair.watched.from_watch
        await pair.both("another")
        assert pair.watched.from_watch == before + 1

    run_pair(test)


def test_the_kernels_queue_overflowing_falls_back_to_a_walk() -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())

    async def test(pair: Pair) -> None:
        (pair.root / "keep.txt").write_text("keep\n")
        await pair.both("the first")
        (pair.root / "keep.txt").write_text("changed\n")
        await pair.both("from the watch")
        assert pair.watched.from_watch == 1
        # Each new file is a create, a modify and a close: more events than the queue holds,
        # fewer paths than the watch would hold.
        many = pair.root / "many"
        many.mkdir()
        for n in range(limit // 3 + 100):
            (many / f"f{n}").write_text("x")
        (pair.root / "keep.txt").unlink()
        walks = pair.watched.walks
        await pair.both("after the overflow")
        assert pair.watched.walks == walks + 1
        (pair.root / "many" / "f1").write_text("again")
        await pair.both("the watch again")
        assert pair.watched.from_watch == 2

    run_pair(test)


def test_more_changes_than_a_snapshot_looks_at_one_by_one_are_walked() -> None:
    async def test(pair: Pair) -> None:
        await pair.both("the first")
        for n in range(101):  # a tenth of the tree, at least 100
            (pair.root / f"f{n}.txt").write_text(f"{n}\n")
        walks = pair.watched.walks
        await pair.both("many new files")
        assert pair.watched.walks == walks + 1
        (pair.root / "f1.txt").write_text("one\n")
        await pair.both("one changed")
        assert pair.watched.from_watch == 1

    run_pair(test)


def test_a_directory_moved_out_or_renamed_is_walked(tmp_path: Path) -> None:
    async def test(pair: Pair) -> None:
        (pair.root / "go" / "deep").mkdir(parents=True)
        (pair.root / "go" / "deep" / "a.txt").write_text("a\n")
        (pair.root / "stay").mkdir()
        (pair.root / "stay" / "b.txt").write_text("b\n")
        await pair.both("the first")
        shutil.move(pair.root / "go", tmp_path / "gone")
        await pair.both("moved out")
        (pair.root / "stay").rename(pair.root / "renamed")
        await pair.both("renamed")
        (pair.root / "renamed" / "b.txt").write_text("changed\n")
        await pair.both("changed in the renamed directory")
        assert pair.watched.walks == 3 and pair.watched.from_watch == 1

    run_pair(test)


def test_a_change_no_event_reports_is_found_by_the_walk_every_so_often() -> None:
    async def test(pair: Pair) -> None:
        target = pair.root / "mapped.bin"
        target.write_bytes(b"a" * 1024)
        await pair.both("the first")
        with open(target, "r+b") as handle:
            mapping = mmap.mmap(handle.fileno(), 1024)
        try:
            # The file is still mapped: the kernel reports nothing of this write.
            mapping[:5] = b"hello"
            mapping.flush()
            found = []
            for n in range(3):
                (pair.root / "other.txt").write_text(f"{n}\n")
                fast = await pair.watched.snapshot()
                listed = await pair.watched.entries(fast.tree, ["mapped.bin"])
                found.append(listed["mapped.bin"])
            slow = await pair.walked.snapshot()
            right = (await pair.walked.entries(slow.tree, ["mapped.bin"]))["mapped.bin"]
            # Missed while the watch was followed, found by the walk every 3rd snapshot.
            assert found[0] != right and found[-1] == right
            assert pair.watched.walks == 2
        finally:
            mapping.close()

    run_pair(test, verify_every=3)


def test_a_watch_beyond_the_budget_is_not_started_and_snapshots_still_walk(
    tmp_path: Path,
) -> None:
    budget = WatchBudget(watches=1)
    roots = [tmp_path / "one", tmp_path / "two"]
    repos = []
    for n, root in enumerate(roots):
        root.mkdir()
        (root / "a.txt").write_text("a\n")
        repos.append(ShadowRepo(tmp_path / f"shadow{n}", str(root), MAX_BYTES, GIT, watch=budget))

    async def go() -> None:
        try:
            for repo in repos:
                await repo.open()
                await repo.snapshot()
            for root in roots:
                (root / "a.txt").write_text("b\n")
            for repo in repos:
                await repo.snapshot()
            assert [(r.walks, r.from_watch) for r in repos] == [(1, 1), (2, 0)]
            repos[0].stop()  # its share is free again: the other one's next try starts one
            for _ in range(3):
                (roots[1] / "a.txt").write_text("c\n")
                await repos[1].snapshot()
            assert repos[1].from_watch >= 1
        finally:
            for repo in repos:
                repo.stop()

    asyncio.run(go())


def test_a_tree_the_repository_has_already_is_not_written_again(tmp_path: Path) -> None:
    started: list[tuple[str, ...]] = []
    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("one\n")
    (root / "g.txt").write_text("g\n")
    repo = ShadowRepo(tmp_path / "shadow", str(root), MAX_BYTES, GIT)

    def counting(*args: str) -> Any:
        started.append(args)
        return repo._converse(*args)

    async def go() -> None:
        await repo.open()
        base = (await repo.snapshot()).tree
        entry = (await repo.entries(base, ["a/b/f.txt"]))["a/b/f.txt"].split(" ")
        (root / "a" / "b" / "f.txt").write_text("two\n")
        changed = (await repo.snapshot()).tree
        dirs = await TreeDirs.read(repo._run, changed, ["a/b/f.txt"])
        objects = repo.git_dir / "objects"
        back = await dirs.write(counting, {"a/b/f.txt": (entry[0], entry[1])}, objects)
        assert back == base and started == []  # every tree on the way is stored already
        other = await dirs.write(counting, {"a/b/f.txt": None}, objects)
        assert other != base and len(started) == 1  # a new tree: git writes it
        listed = await repo._run("ls-tree", "-r", "--name-only", other)
        assert listed.decode().split() == ["g.txt"]  # a and a/b emptied: gone

    asyncio.run(go())


@pytest.mark.parametrize("where", ["/", "/proc", "tmp"])
def test_the_file_system_of_a_directory_is_the_one_findmnt_names(
    tmp_path: Path, where: str
) -> None:
    path = str(tmp_path) if where == "tmp" else where
    named = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", path],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert mounts.file_system(path) == named
    # Watched only where every change is seen: a local file system with nothing else
    # mounted below it (/ has /proc, whose changes come from no write).
    expected = where == "tmp" and named in mounts.LOCAL
    assert mounts.changes_all_seen(path) == expected


def test_a_cwd_reached_through_a_symlink_is_watched(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("a\n")
    (tmp_path / "link").symlink_to(real)
    repo = ShadowRepo(
        tmp_path / "shadow", str(tmp_path / "link"), MAX_BYTES, GIT, watch=WatchBudget()
    )

    async def go() -> None:
        try:
            await repo.open()
            await repo.snapshot()
            (real / "a.txt").write_text("b\n")
            tree = (await repo.snapshot()).tree
            assert repo.from_watch == 1
            assert (await repo.entries(tree, ["a.txt"]))["a.txt"].endswith(
                subprocess.run(
                    [GIT, "hash-object", str(real / "a.txt")],
                    capture_output=True, text=True, check=True,
                ).stdout.strip()
            )  # fmt: skip
        finally:
            repo.stop()

    asyncio.run(go())


def test_a_cwd_removed_and_made_again_is_walked() -> None:
    async def test(pair: Pair) -> None:
        (pair.root / "old.txt").write_text("old\n")
        await pair.both("the first")
        shutil.rmtree(pair.root)
        pair.root.mkdir()
        (pair.root / "new.txt").write_text("new\n")
        walks = pair.watched.walks
        await pair.both("a new directory in its place")
        assert pair.watched.walks == walks + 1
        (pair.root / "new.txt").write_text("newer\n")
        await pair.both("followed again")

    run_pair(test)
