"""A live worktree's diff from what the kernel saw change (`core/worktree_changes.py`,
`worktrees/known_diff.py`, `fs/tree_watch.py`) against the whole-tree diff, with real git
and real inotify: after every step of a seeded random sequence of edits, commits, resets,
renames, new and moved-in directories, mode changes, ignored files and directories moved
out, both give the same files with the same hunk ids. The watch falling back (a directory
moved out, too many directories) still gives the same answer.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from test_worktrees import isolated_git, make_repo, new, sh  # noqa: F401

from sidecar.core.worktree_changes import WorktreeChanges
from sidecar.fs.tree_watch import TreeWatch
from sidecar.worktrees import manager
from sidecar.worktrees.hunks import FileDiff

pytestmark = pytest.mark.timeout(300)


def shape(files: list[FileDiff]) -> list[tuple[str, str | None, str, bool, tuple[str, ...]]]:
    return sorted(
        (f.path, f.old_path, f.status, f.binary, tuple(h.id for h in f.hunks)) for f in files
    )


async def whole(wt: manager.Worktree) -> list[FileDiff]:
    files, _ = await manager.diff(wt, limit=1 << 20)
    return files


def step(root: Path, rng: random.Random, n: int, outside: Path) -> str:
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts and p.name != ".git"
    )
    kind = rng.choice(
        [
            "edit",
            "edit",
            "add",
            "newdir",
            "delete",
            "rename",
            "commit",
            "reset",
            "chmod",
            "ignored",
            "movein",
            "commit",
        ]
    )
    if kind == "edit" and files:
        target = rng.choice(files)
        lines = target.read_text().splitlines() or [""]
        lines[rng.randrange(len(lines))] = f"edited {n}"
        target.write_text("\n".join(lines) + "\n")
    elif kind == "add":
        (root / f"new{n}.txt").write_text(f"new {n}\n" * 3)
    elif kind == "newdir":
        (root / f"dir{n}" / "deep").mkdir(parents=True)
        (root / f"dir{n}" / "deep" / "x.txt").write_text(f"deep {n}\n")
    elif kind == "delete" and files:
        rng.choice(files).unlink()
    elif kind == "rename" and files:
        source = rng.choice(files)
        source.rename(root / f"renamed{n}.txt")
    elif kind == "commit":
        sh(root, "add", "-A")
        sh(root, "commit", "-q", "--allow-empty", "-m", f"step {n}")
    elif kind == "reset":
        if sh(root, "rev-list", "--count", "HEAD").strip() != "1":
            sh(root, "reset", "-q", "--soft", "HEAD~1")
    elif kind == "chmod" and files:
        target = rng.choice(files)
        target.chmod(target.stat().st_mode ^ 0o100)
    elif kind == "ignored":
        (root / "build").mkdir(exist_ok=True)
        (root / "build" / f"out{n}.o").write_text("object\n")
    elif kind == "movein":
        made = outside / f"made{n}"
        (made / "sub").mkdir(parents=True)
        (made / "sub" / "m.txt").write_text(f"moved in {n}\n")
        made.rename(root / f"made{n}")
    return kind


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_watched_diff_is_the_whole_diff(tmp_path: Path, seed: int) -> None:
    files = {f"src/m{i}.py": "".join(f"line {j}\n" for j in range(30)) for i in range(8)}
    repo = make_repo(tmp_path / "repo", {**files, ".gitignore": "build/\n"})
    wt = await new(repo, tmp_path / "wts", "w")
    root = Path(wt.path)
    outside = tmp_path / "outside"
    outside.mkdir()
    changes = WorktreeChanges()
    rng = random.Random(seed)
    try:
        for n in range(40):
            kind = step(root, rng, n, outside)
            watched = await changes.diff("sess", 1, wt)
            assert shape(watched) == shape(await whole(wt)), f"after step {n} ({kind})"
        assert changes._known["sess"].baseline  # the watch was used, not only the fallback
    finally:
        changes.close()


async def test_a_directory_moved_out_falls_back_and_still_agrees(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"keep/a.txt": "a\n", "go/b.txt": "b\n"})
    wt = await new(repo, tmp_path / "wts", "w")
    changes = WorktreeChanges()
    try:
        await changes.diff("sess", 1, wt)
        shutil.move(os.path.join(wt.path, "go"), tmp_path / "gone")
        assert shape(await changes.diff("sess", 1, wt)) == shape(await whole(wt))
        (Path(wt.path) / "keep" / "a.txt").write_text("changed\n")
        assert shape(await changes.diff("sess", 1, wt)) == shape(await whole(wt))
    finally:
        changes.close()


def test_the_watch_reports_changes_new_trees_and_what_it_cannot_follow(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("x")
    watch = TreeWatch(str(tmp_path))
    assert watch.start()
    assert watch.take() == set()
    (tmp_path / "a" / "f.txt").write_text("y")
    (tmp_path / "new" / "deep").mkdir(parents=True)
    (tmp_path / "new" / "deep" / "g.txt").write_text("z")
    taken = watch.take()
    assert taken is not None and "a/f.txt" in taken and "new" in taken
    (tmp_path / "new" / "deep" / "h.txt").write_text("w")  # watched now too
    assert watch.take() == {"new/deep/h.txt"}
    (tmp_path / "a").rename(tmp_path.parent / f"{tmp_path.name}-moved-out")
    assert watch.take() is None  # a directory moved out: not followed
    watch.close()
    small = TreeWatch(str(tmp_path))
    assert not small.start(max_dirs=1)  # more directories than allowed
    assert small.take() is None
