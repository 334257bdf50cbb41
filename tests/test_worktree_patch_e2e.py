"""`_session/worktree/patch` end to end: the real sidecar over its pipes, real git. The
branch comes back as one mbox text or as files written into a directory, and either
series, applied with `git am` onto the base in a fresh clone, gives exactly the branch's
tree; a directory that cannot be written is a clear -32602 naming `directory`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import Sidecar
from test_worktree_sessions_e2e import GIT_ENV, git, new_in_worktree, repo

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

__all__ = ["repo"]  # the fixture, used here by name


def clone_at_base(repo: Path, where: Path) -> Path:
    git(repo.parent, "clone", "-q", "--branch", "main", str(repo), str(where))
    return where


def git_am(clone: Path, *args: str, stdin: str | None = None) -> None:
    subprocess.run(
        ["git", "am", "-q", *args],
        cwd=clone,
        env=GIT_ENV,
        input=stdin,
        text=True,
        check=True,
        capture_output=True,
    )


async def test_the_patch_series_applies_onto_the_base_and_gives_the_branchs_tree(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, tree = opened["sessionId"], opened["_meta"]["worktree"]
        path = Path(tree["path"])
        empty = await sidecar.call("_session/worktree/patch", {"sessionId": sid})
        assert empty == {"patch": ""}  # nothing on the branch yet
        await sidecar.prompt(sid, "/write notes/one.md first line\nsecond line")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "first change")
        await sidecar.prompt(sid, "/edit README.md hello 'hello again'")
        await sidecar.prompt(sid, "/write ünïcode.txt odd name")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "second change")
        (path / "loose.txt").write_text("not committed: not in the series\n")
        branch_tree = git(repo, "rev-parse", f"refs/heads/{tree['branch']}^{{tree}}")

        # As text: one mbox, every commit in order.
        text = (await sidecar.call("_session/worktree/patch", {"sessionId": sid}))["patch"]
        assert "Subject: [PATCH 1/2] first change" in text
        assert "Subject: [PATCH 2/2] second change" in text
        assert "loose.txt" not in text
        from_text = clone_at_base(repo, tmp_path / "from-text")
        git_am(from_text, stdin=text)
        assert git(from_text, "rev-parse", "HEAD^{tree}") == branch_tree
        assert git(from_text, "log", "--format=%s", "-2").splitlines() == [
            "second change",
            "first change",
        ]

        # As files in a directory (made for it), in order.
        series = tmp_path / "out" / "series"
        written = await sidecar.call(
            "_session/worktree/patch", {"sessionId": sid, "directory": str(series)}
        )
        files = [Path(f) for f in written["files"]]
        assert [f.name for f in files] == ["0001-first-change.patch", "0002-second-change.patch"]
        assert all(f.parent == series and f.is_file() for f in files)
        from_files = clone_at_base(repo, tmp_path / "from-files")
        git_am(from_files, *map(str, files))
        assert git(from_files, "rev-parse", "HEAD^{tree}") == branch_tree
        assert (from_files / "ünïcode.txt").read_text() == "odd name"
    finally:
        await sidecar.close()


async def test_a_directory_that_cannot_be_written_is_refused_naming_it(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, path = opened["sessionId"], Path(opened["_meta"]["worktree"]["path"])
        await sidecar.prompt(sid, "/write a.md a")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "a")
        a_file = tmp_path / "a-file"
        a_file.write_text("in the way\n")
        for directory, said in [
            (str(a_file), "cannot write patches into"),
            (str(a_file / "below"), "cannot write patches into"),
            ("relative/dir", "must be an absolute path"),
        ]:
            with pytest.raises(RpcError) as caught:
                await sidecar.call(
                    "_session/worktree/patch", {"sessionId": sid, "directory": directory}
                )
            assert caught.value.code == -32602, directory
            message = str(caught.value)
            assert "directory" in message and said in message, message
        assert a_file.read_text() == "in the way\n"
        # The same session's series is still written where it can be.
        good = await sidecar.call(
            "_session/worktree/patch", {"sessionId": sid, "directory": str(tmp_path / "ok")}
        )
        assert len(good["files"]) == 1
    finally:
        await sidecar.close()
