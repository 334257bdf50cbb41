"""The AGENTS.md finder (`sidecar/agent/instructions.py`) on real directories: which files,
in which order, bounded how, and read again only when they change."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.agent.instructions import (
    MAX_FILE,
    MAX_TOTAL,
    ProjectInstructions,
    directories,
    project_root,
)


def repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def test_the_root_is_the_first_directory_with_a_git_file_or_directory(tmp_path: Path):
    outer = repo(tmp_path / "outer")
    worktree = outer / "nested" / "wt"
    worktree.mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere\n")  # a linked worktree's .git file
    deep = worktree / "a" / "b"
    deep.mkdir(parents=True)
    assert project_root(str(deep)) == str(worktree)
    assert directories(str(deep), str(worktree)) == [str(worktree), str(worktree / "a"), str(deep)]
    assert project_root(str(outer / "nested")) == str(outer)
    assert directories(str(tmp_path), None) == [str(tmp_path)]


def test_the_total_is_bounded_with_the_nearest_files_given_their_share_first(tmp_path: Path):
    root = repo(tmp_path / "r")
    (root / "AGENTS.md").write_text("F" * MAX_FILE)
    (root / "a").mkdir()
    (root / "a" / "AGENTS.md").write_text("M" * MAX_FILE)
    (root / "a" / "b").mkdir()
    (root / "a" / "b" / "AGENTS.md").write_text("N" * (MAX_FILE + 10))
    found = ProjectInstructions(str(root / "a" / "b"))
    assert found.refresh() is True
    sizes = [(f.size, f.cut) for f in found.files]
    assert sizes == [(MAX_FILE, True), (MAX_FILE, False), (MAX_FILE + 10, True)]
    for letter in "NM":
        assert letter * MAX_FILE in found.section and letter * (MAX_FILE + 1) not in found.section
    assert "F" * 10 not in found.section
    assert f"[... AGENTS.md cut at 0 bytes of {MAX_FILE}]" in found.section
    assert f"[... AGENTS.md cut at {MAX_FILE} bytes of {MAX_FILE + 10}]" in found.section


def test_a_cut_in_the_middle_of_a_character_keeps_whole_characters(tmp_path: Path):
    (tmp_path / "AGENTS.md").write_text("é" * MAX_FILE)  # two bytes each
    found = ProjectInstructions(str(tmp_path))
    found.refresh()
    assert found.section.count("é") == MAX_FILE // 2
    assert found.files[0].cut


def test_not_utf8_a_fifo_and_a_dangling_symlink_are_skipped_without_hanging(tmp_path: Path):
    root = repo(tmp_path / "r")
    (root / "AGENTS.md").write_bytes("café".encode("latin-1"))
    (root / "a").mkdir()
    os.mkfifo(root / "a" / "AGENTS.md")
    (root / "a" / "b").mkdir()
    (root / "a" / "b" / "CLAUDE.md").symlink_to(root / "gone.md")
    found = ProjectInstructions(str(root / "a" / "b"))
    found.refresh()
    assert [f.skipped for f in found.files] == [
        "not UTF-8 text",
        "not a regular file",
        "cannot be read: No such file or directory",
    ]
    assert found.section == ""


def test_a_symlink_into_a_hidden_directory_inside_the_repository_is_skipped(tmp_path: Path):
    root = repo(tmp_path / "r")
    data = root / "data"  # the sidecar's data dir, inside the repository here
    data.mkdir()
    (data / "secret.md").write_text("SECRET")
    (root / "AGENTS.md").symlink_to(data / "secret.md")
    found = ProjectInstructions(str(root), hidden=(str(data),))
    found.refresh()
    assert [f.skipped for f in found.files] == ["a symlink into a directory the sandbox hides"]
    assert "SECRET" not in found.section


def test_unchanged_files_are_not_read_again_and_a_change_is(tmp_path: Path):
    agents = tmp_path / "AGENTS.md"
    agents.write_text("first version\n")
    found = ProjectInstructions(str(tmp_path))
    assert found.refresh() is True
    stamp = agents.stat()
    # Same size, same mtime, same inode: the cache's key is unchanged, so it is not read.
    with open(agents, "r+") as handle:
        handle.write("FIRST")
    os.utime(agents, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert found.unchanged(found.scan())  # what the turn checks on the loop: no read
    assert found.refresh() is False and "first version" in found.section
    agents.write_text("second version, longer\n")
    scan = found.scan()
    assert not found.unchanged(scan)  # read (in a worker thread) from this scan
    assert found.refresh(scan) is True and "second version" in found.section
    assert found.unchanged(found.scan())
    agents.unlink()
    assert found.refresh() is True and found.files == () and found.section == ""


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.tuples(st.sampled_from(["AGENTS.md", "CLAUDE.md"]), st.integers(0, 20_000)),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_any_tree_gives_each_directory_one_file_farthest_first_within_the_bounds(
    layout: list[tuple[str, int] | None],
):
    with tempfile.TemporaryDirectory() as temp:
        directory = repo(Path(temp) / "root")
        expected: list[tuple[str, str, int]] = []  # path, its letter, its size in bytes
        for depth, spec in enumerate(layout):
            if depth:
                directory = directory / f"d{depth}"
                directory.mkdir()
            if spec is not None:
                name, count = spec
                letter = chr(0x3B1 + depth)  # a Greek letter (two bytes) no heading holds
                (directory / name).write_text(letter * count)
                expected.append((str(directory / name), letter, 2 * count))
        found = ProjectInstructions(str(directory))
        found.refresh()
        assert [(f.path, f.size, f.skipped) for f in found.files] == [
            (path, size, None) for path, _, size in expected
        ]
        headings = [line[3:] for line in found.section.splitlines() if line.startswith("## ")]
        assert headings == [path for path, _, _ in expected]  # farthest first
        kept = [2 * found.section.count(letter) for _, letter, _ in expected]
        assert sum(kept) <= MAX_TOTAL and all(size <= MAX_FILE for size in kept)
        assert [f.cut for f in found.files] == [
            k < f.size for k, f in zip(kept, found.files, strict=True)
        ]
        if expected:  # the nearest file is given its whole share first
            assert kept[-1] == min(expected[-1][2], MAX_FILE)
