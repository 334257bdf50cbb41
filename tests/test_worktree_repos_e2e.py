"""Worktree sessions in unusual repositories, end to end: the real sidecar over its pipes,
real git. A repository with a submodule, one with LFS pointers (and no LFS installed),
one of 10,000 files, and a machine without git: each session is made (or refused with a
clear error naming `_meta.worktree`), works, diffs and merges as in a small repository.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from harness import Sidecar
from test_worktree_sessions_e2e import GIT_ENV, git, new_in_worktree

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(300)


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


async def test_a_submodule_and_lfs_pointers_stay_as_they_are(tmp_path: Path) -> None:
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    pointer = (
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
        "size 12345\n"
    )
    repo = make_repo(
        tmp_path / "repo",
        {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n", "model.bin": pointer},
    )
    git(
        repo,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(library),
        "vendor/lib",
    )
    git(repo, "commit", "-q", "-m", "submodule")
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, tree = opened["sessionId"], opened["_meta"]["worktree"]
        path = Path(tree["path"])
        assert (path / "model.bin").read_text() == pointer  # a pointer, not smudged
        assert list((path / "vendor" / "lib").iterdir()) == []  # not initialised
        assert tree["dirty"] is False
        await sidecar.prompt(sid, "/write top.txt from the session")
        diff = await sidecar.call("_session/worktree/diff", {"sessionId": sid})
        assert [f["path"] for f in diff["files"]] == ["top.txt"]
        await sidecar.call("_session/worktree/merge", {"sessionId": sid, "strategy": "squash"})
        assert (repo / "top.txt").read_text() == "from the session"
        assert (repo / "model.bin").read_text() == pointer
        assert git(repo, "status", "--porcelain") == ""
    finally:
        await sidecar.close()


async def test_ten_thousand_files(tmp_path: Path) -> None:
    repo = tmp_path / "big"
    for i in range(100):
        (repo / f"d{i:02}").mkdir(parents=True)
        for j in range(100):
            (repo / f"d{i:02}" / f"f{j:02}.txt").write_text(f"{i} {j}\n")
    make_repo(repo, {})
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, path = opened["sessionId"], Path(opened["_meta"]["worktree"]["path"])
        assert sum(len(files) for _, _, files in os.walk(path)) == 10_001  # and its .git
        await sidecar.prompt(sid, "/write d50/f50.txt changed")
        diff = await sidecar.call("_session/worktree/diff", {"sessionId": sid, "limit": 5})
        assert [f["path"] for f in diff["files"]] == ["d50/f50.txt"]
        assert diff["nextCursor"] is None
        changes = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 1})
        assert [f["path"] for f in changes["files"]] == ["d50/f50.txt"]
    finally:
        await sidecar.close()


async def test_without_git_a_worktree_is_refused_clearly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    for tool in ("bwrap",):  # the sandbox still works; git is what is missing
        found = shutil.which(tool)
        if found:
            (bare_path / tool).symlink_to(found)
    env = {**GIT_ENV, "PATH": str(bare_path)}
    sidecar = await Sidecar.start(tmp_path / "data", env=env)
    try:
        with pytest.raises(RpcError) as caught:
            await new_in_worktree(sidecar, repo, True)
        assert caught.value.code == -32602
        assert "worktree" in str(caught.value) and "git is not installed" in str(caught.value)
        assert not Path(f"{repo}.worktrees").exists()
        # A session without a worktree still works there.
        plain = await sidecar.new_session(repo)
        assert plain["worktree"] is None
    finally:
        await sidecar.close()
