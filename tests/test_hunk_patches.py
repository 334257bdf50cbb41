"""A patch made of some hunks of a file (`sidecar.core.hunk_revert.patch_of`) is one real
`git apply` takes, whatever the file is called (quoted names, spaces, tabs, non-ASCII)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sidecar.core.hunk_revert import patch_of
from sidecar.worktrees.hunks import parse_diff

NAMES = ["plain.txt", "with space.txt", 'quote"d.txt', "tab\tin.txt", "ünïcode.txt", "back\\slash"]


def run(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-c", "core.quotePath=false", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("name", NAMES)
def test_one_hunk_of_two_applies_in_reverse(tmp_path: Path, name: str) -> None:
    run(tmp_path, "init", "-q")
    lines = [f"line {n}" for n in range(1, 31)]
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    run(tmp_path, "add", "-A")
    changed = list(lines)
    changed[1], changed[27] = "two", "twenty-eight"
    (tmp_path / name).write_text("\n".join(changed) + "\n")
    (found,) = parse_diff(run(tmp_path, "diff", "--no-color").decode())
    assert found.path == name and len(found.hunks) == 2
    run(tmp_path, "apply", "-R", stdin=patch_of(name, found.hunks[1:]))
    kept = list(lines)
    kept[1] = "two"
    assert (tmp_path / name).read_text() == "\n".join(kept) + "\n"
