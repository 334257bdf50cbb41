"""Session worktrees (`sidecar/worktrees`) on real repositories with a real `git`:
creation and its refusals, status, the paged diff and its hunk ids, every merge strategy
(clean, conflicting, refused), concurrency, discard, patches, orphans, recreation, and
repositories with submodules, LFS pointers and 10,000 files."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.domain.errors import InvalidInput
from sidecar.worktrees import git as wgit
from sidecar.worktrees import manager, merging
from sidecar.worktrees.hunks import FileDiff, hunk_id, parse_diff
from sidecar.worktrees.manager import (
    InvalidWorktree,
    MergeConflict,
    MergeRefused,
    NotARepository,
    Worktree,
)

IDENTITY = {
    "GIT_AUTHOR_NAME": "Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.com",
    "GIT_COMMITTER_NAME": "Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.com",
}


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody's global or system git config; an identity from the environment; no
    repository above tmp_path is ever found."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


def sh(cwd: Path | str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    sh(path, "init", "-q", "-b", "main")
    if files is None:
        files = {"a.txt": "one\ntwo\nthree\n", "b.txt": "bee\n"}
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    sh(path, "add", "-A")
    sh(path, "commit", "-q", "-m", "initial")
    return path


def commit_file(cwd: Path | str, name: str, text: str, message: str = "change") -> None:
    Path(cwd, name).parent.mkdir(parents=True, exist_ok=True)
    Path(cwd, name).write_text(text)
    sh(cwd, "add", "-A")
    sh(cwd, "commit", "-q", "-m", message)


def head(cwd: Path | str, ref: str = "HEAD") -> str:
    return sh(cwd, "rev-parse", ref).strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def wts(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"


async def new(repo: Path, wts: Path, short: str, **kw: str) -> Worktree:
    return await manager.create(str(repo), path=str(wts / short), session_short_id=short, **kw)


# -- create ---------------------------------------------------------------------------


async def test_create_defaults_to_a_session_branch_off_the_current_branch(
    repo: Path, wts: Path
) -> None:
    wt = await new(repo, wts, "s1")
    assert wt == Worktree(str(repo), str(wts / "s1"), "acp/s1", "main")
    assert sh(wt.path, "branch", "--show-current").strip() == "acp/s1"
    assert (Path(wt.path) / "a.txt").read_text() == "one\ntwo\nthree\n"
    # From inside the worktree (or a subdirectory of the repository), the main tree.
    assert await manager.repo_root(wt.path) == str(repo)
    (repo / "sub").mkdir()
    assert await manager.repo_root(str(repo / "sub")) == str(repo)


async def test_create_named_branch_from_a_commit_and_a_detached_head(repo: Path, wts: Path) -> None:
    first = head(repo)
    commit_file(repo, "c.txt", "sea\n")
    wt = await new(repo, wts, "s2", branch="feature/named", base=first)
    assert (wt.branch, wt.base) == ("feature/named", first)
    assert head(wt.path) == first and not (Path(wt.path) / "c.txt").exists()
    sh(repo, "checkout", "-q", "--detach", "HEAD")
    detached = await new(repo, wts, "s3")
    assert detached.base == head(repo)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"branch": "taken"}, "branch"),
        ({"branch": "bad..name"}, "branch"),
        ({"branch": "-x"}, "branch"),
        ({"branch": "@{-1}"}, "branch"),
        ({"base": "no-such-ref"}, "base"),
        ({"base": "0123456789abcdef0123456789abcdef01234567"}, "base"),
    ],
)
async def test_create_refuses_bad_arguments(
    repo: Path, wts: Path, kwargs: dict[str, str], field: str
) -> None:
    sh(repo, "branch", "taken")
    with pytest.raises(InvalidWorktree) as refused:
        await new(repo, wts, "bad", **kwargs)
    assert refused.value.field == field
    assert isinstance(refused.value, ValueError)
    assert not (wts / "bad").exists()
    assert "acp/bad" not in sh(repo, "branch", "--list")


async def test_create_refuses_an_existing_path_and_a_non_repository(
    repo: Path, wts: Path, tmp_path: Path
) -> None:
    (wts / "there").mkdir(parents=True)
    with pytest.raises(InvalidWorktree) as refused:
        await new(repo, wts, "there")
    assert refused.value.field == "path"
    assert "acp/there" not in sh(repo, "branch", "--list")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotARepository, match="not inside a git repository"):
        await manager.create(str(plain), path=str(wts / "x"), session_short_id="x")
    with pytest.raises(NotARepository):
        await manager.repo_root(str(tmp_path / "missing"))


async def test_git_missing_and_git_errors_say_what_failed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(wgit.GitError) as failed:
        await wgit.run(str(repo), "rev-parse", "--verify", "no-such-ref")
    assert failed.value.code == 128
    assert failed.value.command == "rev-parse --verify no-such-ref"
    assert "no-such-ref" in str(failed.value) or failed.value.stderr
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(wgit.GitNotInstalled, match="git is not installed"):
        await manager.repo_root(str(repo))


# -- status, commit_pending, diff ----------------------------------------------------


async def test_status_counts_ahead_behind_and_sees_uncommitted_work(repo: Path, wts: Path) -> None:
    wt = await new(repo, wts, "st")
    assert await manager.status(wt) == manager.WorktreeStatus(0, 0, False)
    commit_file(wt.path, "w1.txt", "1\n")
    commit_file(wt.path, "w2.txt", "2\n")
    commit_file(repo, "m1.txt", "m\n")
    assert await manager.status(wt) == manager.WorktreeStatus(ahead=2, behind=1, dirty=False)
    (Path(wt.path) / "untracked.txt").write_text("new\n")
    assert (await manager.status(wt)).dirty
    # A tag named like the base branch does not stand in for it.
    sh(repo, "tag", "main", head(repo, "main~1"))
    assert (await manager.status(wt)).behind == 1
    files, _ = await manager.diff(wt)
    assert sorted(f.path for f in files) == ["untracked.txt", "w1.txt", "w2.txt"]


async def test_commit_pending_commits_everything_or_nothing(
    repo: Path, wts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = await new(repo, wts, "cp")
    assert await manager.commit_pending(wt, "nothing") is False
    (Path(wt.path) / "a.txt").write_text("changed\n")
    (Path(wt.path) / "fresh.txt").write_text("fresh\n")
    for key in IDENTITY:  # nobody configured: our fallback identity commits
        monkeypatch.delenv(key)
    assert await manager.commit_pending(wt, "session work") is True
    assert sh(wt.path, "status", "--porcelain") == ""
    assert sh(wt.path, "log", "-1", "--format=%s|%ae").strip() == "session work|sessions@localhost"
    assert sh(wt.path, "show", "--name-only", "--format=").split() == ["a.txt", "fresh.txt"]
    assert head(repo, "main") != head(wt.path)


async def test_diff_pages_committed_uncommitted_and_untracked_work(repo: Path, wts: Path) -> None:
    wt = await new(repo, wts, "df")
    commit_file(wt.path, "c1.txt", "committed\n")
    commit_file(wt.path, "c2.txt", "committed too\n")
    commit_file(repo, "on-main.txt", "base moved on\n")  # not in the diff: after the fork
    (Path(wt.path) / "a.txt").write_text("one\nTWO\nthree\n")
    (Path(wt.path) / "b.txt").unlink()
    (Path(wt.path) / "new dir").mkdir()
    (Path(wt.path) / "new dir" / "ünïcode file.txt").write_text("untracked\n")

    first, cursor = await manager.diff(wt, limit=3)
    assert cursor == 3
    rest, end = await manager.diff(wt, cursor=cursor, limit=3)
    assert end is None
    by_path = {f.path: f for f in first + rest}
    assert sorted(by_path) == ["a.txt", "b.txt", "c1.txt", "c2.txt", "new dir/ünïcode file.txt"]
    assert by_path["b.txt"].status == "deleted"
    assert by_path["new dir/ünïcode file.txt"].status == "added"
    assert (by_path["a.txt"].additions, by_path["a.txt"].deletions) == (1, 1)
    # The worktree's own index is untouched: the untracked file is still untracked.
    assert "?? " in sh(wt.path, "status", "--porcelain")

    again = {f.path: f for f in (await manager.diff(wt, limit=100))[0]}
    assert again == by_path  # ids (and everything else) stable across calls

    # The same change made in the main tree, shown by a plain `git diff`: the same id.
    (repo / "a.txt").write_text("one\nTWO\nthree\n")
    elsewhere = {f.path: f for f in parse_diff(sh(repo, "diff"))}
    assert elsewhere["a.txt"].hunks[0].id == by_path["a.txt"].hunks[0].id


async def test_diff_of_a_branch_whose_base_is_gone_fails_with_gits_error(
    repo: Path, wts: Path
) -> None:
    """The merge-base runs beside the staging: its failure still surfaces as git's, after
    the staging it ran beside has ended."""
    wt = await new(repo, wts, "gone")
    commit_file(wt.path, "c1.txt", "committed\n")
    gone = Worktree(wt.repo, wt.path, wt.branch, "no-such-branch")
    with pytest.raises(wgit.GitError) as failed:
        await manager.diff(gone)
    assert "merge-base" in failed.value.command
    assert (await manager.diff(wt))[0][0].path == "c1.txt"


async def test_the_admin_dir_is_read_from_the_worktree_pointer_or_asked_of_git(
    repo: Path, wts: Path
) -> None:
    wt = await new(repo, wts, "adm")
    asked = sh(wt.path, "rev-parse", "--absolute-git-dir").strip()
    assert await manager._admin_dir(wt.path) == asked
    assert await manager._admin_dir(str(repo)) == str(repo / ".git")  # a directory: git says


async def test_diff_rejects_bad_paging(repo: Path, wts: Path) -> None:
    wt = await new(repo, wts, "pg")
    assert await manager.diff(wt) == ([], None)
    with pytest.raises(InvalidInput) as refused:
        await manager.diff(wt, limit=0)
    assert refused.value.field == "limit"


HAND_WRITTEN = (
    "diff --git a/old name.txt b/new name.txt\n"
    "similarity index 80%\n"
    "rename from old name.txt\n"
    "rename to new name.txt\n"
    "index 1111111..2222222 100644\n"
    "--- a/old name.txt\t\n"
    "+++ b/new name.txt\t\n"
    "@@ -1,3 +1,3 @@ def f():\n"
    " keep\n"
    "-gone\n"
    "+came\f with a form feed\r\n"
    " last\n"
    "diff --git a/img.png b/img.png\n"
    "new file mode 100644\n"
    "index 0000000..3333333\n"
    "Binary files /dev/null and b/img.png differ\n"
    "diff --git a/added.txt b/added.txt\n"
    "new file mode 100755\n"
    "index 0000000..4444444\n"
    "--- /dev/null\n"
    "+++ b/added.txt\n"
    "@@ -0,0 +1,2 @@\n"
    "+hello\n"
    "+no newline\n"
    "\\ No newline at end of file\n"
    "diff --git a/removed.txt b/removed.txt\n"
    "deleted file mode 100644\n"
    "index 5555555..0000000\n"
    "--- a/removed.txt\n"
    "+++ /dev/null\n"
    "@@ -1 +0,0 @@\n"
    "-bye\n"
    "diff --git a/dir with space/f.txt b/dir with space/f.txt\n"
    "index 6666666..7777777 100644\n"
    "--- a/dir with space/f.txt\t\n"
    "+++ b/dir with space/f.txt\t\n"
    "@@ -1,2 +1,2 @@\n"
    " same\n"
    "-old end\n"
    "\\ No newline at end of file\n"
    "+new end\n"
    "@@ -10 +10,2 @@ second hunk\n"
    " ten\n"
    "+eleven\n"
    "diff --git a/script.sh b/script.sh\n"
    "old mode 100644\n"
    "new mode 100755\n"
    'diff --git "a/tab\\there\\303\\251.txt" "b/tab\\there\\303\\251.txt"\n'
    "index 8888888..9999999 100644\n"
    '--- "a/tab\\there\\303\\251.txt"\n'
    '+++ "b/tab\\there\\303\\251.txt"\n'
    "@@ -1 +1 @@\n"
    "-x\n"
    "+y\n"
)


def test_parse_diff_of_a_hand_written_diff() -> None:
    files = parse_diff(HAND_WRITTEN)
    summary = [(f.path, f.old_path, f.status, f.binary, f.additions, f.deletions) for f in files]
    assert summary == [
        ("new name.txt", "old name.txt", "renamed", False, 1, 1),
        ("img.png", None, "added", True, 0, 0),
        ("added.txt", None, "added", False, 2, 0),
        ("removed.txt", None, "deleted", False, 0, 1),
        ("dir with space/f.txt", None, "modified", False, 2, 1),
        ("script.sh", None, "modified", False, 0, 0),
        ("tab\there\u00e9.txt", None, "modified", False, 1, 1),
    ]
    renamed, _, added, _, spaced, mode, _ = files
    assert renamed.hunks[0].header == "@@ -1,3 +1,3 @@ def f():"
    assert renamed.hunks[0].lines == (" keep", "-gone", "+came\f with a form feed\r", " last")
    assert added.new_mode == "100755" and not added.hunks[0].lines[-1].startswith("+")
    assert added.hunks[0].lines[-1] == "\\ No newline at end of file"
    assert [h.header for h in spaced.hunks] == ["@@ -1,2 +1,2 @@", "@@ -10 +10,2 @@ second hunk"]
    assert spaced.hunks[0].lines == (
        " same",
        "-old end",
        "\\ No newline at end of file",
        "+new end",
    )
    assert (mode.old_mode, mode.new_mode, mode.hunks) == ("100644", "100755", ())
    for f in files:
        for h in f.hunks:
            assert h.id == hunk_id(f.path, h.header, h.lines) and len(h.id) == 16
    assert len({h.id for f in files for h in f.hunks}) == sum(len(f.hunks) for f in files)


async def test_parse_diff_of_real_git_output(repo: Path) -> None:
    """Renames, binaries, modes and odd names as this git writes them."""
    commit_file(repo, "long.txt", "".join(f"line {i}\n" for i in range(20)))
    sh(repo, "mv", "long.txt", "renamed file.txt")
    (repo / "renamed file.txt").write_text("".join(f"line {i}\n" for i in range(19)) + "end")
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (repo / 'quote"d.txt').write_text("q\n")
    os.chmod(repo / "b.txt", 0o755)
    sh(repo, "add", "-A")
    out = await wgit.run(str(repo), "diff", "--cached", "-M", "--no-color", "--no-ext-diff")
    files = {f.path: f for f in parse_diff(out.text)}
    assert files["renamed file.txt"].status == "renamed"
    assert files["renamed file.txt"].old_path == "long.txt"
    assert files["renamed file.txt"].hunks[0].lines[-1] == "\\ No newline at end of file"
    assert files["blob.bin"].binary and files["blob.bin"].status == "added"
    assert files['quote"d.txt'].status == "added"
    assert (files["b.txt"].old_mode, files["b.txt"].new_mode) == ("100644", "100755")


# -- merge ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
async def test_merge_each_strategy(repo: Path, wts: Path, strategy: manager.Strategy) -> None:
    wt = await new(repo, wts, strategy)
    commit_file(wt.path, "feature.txt", "feature\n")
    (Path(wt.path) / "pending.txt").write_text("not yet committed\n")
    commit_file(repo, "main-only.txt", "main moved\n")
    before = head(repo)

    result = await manager.merge(wt, strategy, "Land the session")

    assert (result.before, result.after) == (before, head(repo))
    assert result.after != before
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert (repo / "pending.txt").read_text() == "not yet committed\n"
    assert (repo / "main-only.txt").exists()
    assert sh(repo, "status", "--porcelain") == ""
    parents = sh(repo, "log", "-1", "--format=%P").split()
    if strategy == "merge":
        assert parents == [before, head(wt.path)]
        assert sh(repo, "log", "-1", "--format=%s").strip() == "Land the session"
    elif strategy == "squash":
        assert parents == [before]
        assert sh(repo, "log", "-1", "--format=%s").strip() == "Land the session"
    else:
        assert head(repo) == head(wt.path, f"refs/heads/{wt.branch}")
        assert sh(repo, "rev-list", "--count", f"{before}..HEAD").strip() == "2"
        assert all(
            len(sh(repo, "log", "-1", "--format=%P", c).split()) == 1 for c in ("HEAD", "HEAD~1")
        )


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
async def test_merge_conflict_changes_nothing(
    repo: Path, wts: Path, strategy: manager.Strategy
) -> None:
    wt = await new(repo, wts, f"c-{strategy}")
    commit_file(wt.path, "a.txt", "one\nsession\nthree\n")
    commit_file(wt.path, "extra.txt", "extra\n")
    commit_file(repo, "a.txt", "one\nuser\nthree\n")
    (repo / "user-untracked.txt").write_text("mine\n")
    before, before_status = head(repo), sh(repo, "status", "--porcelain")
    branch_tip = head(wt.path)

    with pytest.raises(MergeConflict) as conflict:
        await manager.merge(wt, strategy, None)

    assert conflict.value.files == ("a.txt",)
    assert "a.txt" in str(conflict.value)
    assert head(repo) == before and head(repo, "main") == before
    assert sh(repo, "status", "--porcelain") == before_status
    assert (repo / "a.txt").read_text() == "one\nuser\nthree\n"
    assert not (repo / "extra.txt").exists()
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert head(wt.path) == branch_tip
    assert sh(wt.path, "status", "--porcelain") == ""


async def test_merge_refused_when_the_main_tree_is_dirty_or_elsewhere(
    repo: Path, wts: Path
) -> None:
    wt = await new(repo, wts, "rf")
    commit_file(wt.path, "w.txt", "w\n")
    (repo / "b.txt").write_text("user edit\n")
    before = head(repo)
    with pytest.raises(MergeRefused) as refused:
        await manager.merge(wt, "merge", None)
    assert refused.value.files == ("b.txt",) and "b.txt" in str(refused.value)
    assert head(repo) == before and (repo / "b.txt").read_text() == "user edit\n"
    sh(repo, "checkout", "-q", "--", "b.txt")
    sh(repo, "checkout", "-q", "-b", "other")
    with pytest.raises(MergeRefused, match="is on other, not on main"):
        await manager.merge(wt, "squash", None)
    assert head(repo, "main") == before


async def test_merge_refused_by_git_leaves_everything(repo: Path, wts: Path) -> None:
    """An untracked file in the main tree that the merge would overwrite."""
    wt = await new(repo, wts, "ut")
    commit_file(wt.path, "clash.txt", "session\n")
    (repo / "clash.txt").write_text("user's untracked\n")
    before = head(repo)
    with pytest.raises(MergeRefused, match="untracked"):
        await manager.merge(wt, "merge", None)
    assert head(repo) == before and (repo / "clash.txt").read_text() == "user's untracked\n"


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
async def test_merge_whose_commit_fails_changes_nothing(
    repo: Path, wts: Path, strategy: manager.Strategy
) -> None:
    """The user signs commits and signing fails: not half-merged, nothing staged."""
    wt = await new(repo, wts, f"sign-{strategy}")
    commit_file(wt.path, "signed.txt", "s\n")
    commit_file(repo, "main-only.txt", "m\n")  # so a rebase has a commit to rewrite
    sh(repo, "config", "commit.gpgSign", "true")
    sh(repo, "config", "gpg.program", "false")
    before, branch_tip = head(repo), head(wt.path)
    with pytest.raises(MergeRefused):
        await manager.merge(wt, strategy, None)
    assert head(repo) == before and sh(repo, "status", "--porcelain") == ""
    assert not (repo / "signed.txt").exists()
    assert head(wt.path) == branch_tip and sh(wt.path, "status", "--porcelain") == ""


def user_acts_before_landing(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """The user's own git runs in the main tree after the merge made its commit and
    before it lands (the one step that touches the main tree): deterministic."""
    land = merging._land

    async def late(wt: Worktree, old: str, new: str, strategy: manager.Strategy) -> None:
        act()
        await land(wt, old, new, strategy)

    monkeypatch.setattr(merging, "_land", late)


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
async def test_a_user_commit_during_a_merge_is_kept_and_the_merge_refused(
    repo: Path, wts: Path, monkeypatch: pytest.MonkeyPatch, strategy: manager.Strategy
) -> None:
    wt = await new(repo, wts, f"race-{strategy}")
    commit_file(wt.path, "session.txt", "session\n")
    commit_file(repo, "main-only.txt", "m\n")  # so a rebase rewrites the branch
    branch_tip = head(wt.path)

    def user() -> None:
        commit_file(repo, "user.txt", "user work\n", "user commit")
        (repo / "a.txt").write_text("user's uncommitted edit\n")

    user_acts_before_landing(monkeypatch, user)
    with pytest.raises(MergeRefused, match="main moved while merging"):
        await manager.merge(wt, strategy, None)
    assert sh(repo, "log", "-1", "--format=%s").strip() == "user commit"
    assert (repo / "user.txt").read_text() == "user work\n"
    assert (repo / "a.txt").read_text() == "user's uncommitted edit\n"
    assert not (repo / "session.txt").exists()
    assert sh(repo, "status", "--porcelain") == " M a.txt\n"  # only the user's edit
    assert head(wt.path) == branch_tip  # a rebased branch is put back as it was
    # Merged again once the main tree is clean: it lands on top of the user's commit.
    monkeypatch.undo()
    sh(repo, "checkout", "-q", "--", "a.txt")
    user_commit = head(repo)
    done = await manager.merge(wt, strategy, None)
    assert done.before == user_commit and done.after == head(repo)
    assert (repo / "session.txt").exists() and (repo / "user.txt").exists()


@pytest.mark.parametrize("strategy", ["merge", "squash", "rebase"])
async def test_a_user_edit_in_the_way_refuses_the_merge_and_is_kept(
    repo: Path, wts: Path, monkeypatch: pytest.MonkeyPatch, strategy: manager.Strategy
) -> None:
    wt = await new(repo, wts, f"edit-{strategy}")
    commit_file(wt.path, "a.txt", "one\nsession\nthree\n")
    commit_file(repo, "main-only.txt", "m\n")
    before, branch_tip = head(repo), head(wt.path)
    user_acts_before_landing(monkeypatch, lambda: (repo / "a.txt").write_text("user's\n"))
    with pytest.raises(MergeRefused, match="is in the way") as refused:
        await manager.merge(wt, strategy, None)
    assert "a.txt" in str(refused.value)
    assert head(repo, "main") == before and head(repo) == before
    assert (repo / "a.txt").read_text() == "user's\n"
    assert sh(repo, "status", "--porcelain") == " M a.txt\n"
    assert head(wt.path) == branch_tip


async def test_a_user_edit_out_of_the_merges_way_is_kept_and_the_merge_lands(
    repo: Path, wts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = await new(repo, wts, "aside")
    commit_file(wt.path, "session.txt", "session\n")
    staged = repo / "staged.txt"

    def user() -> None:
        (repo / "b.txt").write_text("user's edit\n")
        staged.write_text("staged\n")
        sh(repo, "add", "staged.txt")

    user_acts_before_landing(monkeypatch, user)
    done = await manager.merge(wt, "merge", None)
    assert head(repo) == done.after != done.before
    assert (repo / "session.txt").read_text() == "session\n"
    assert (repo / "b.txt").read_text() == "user's edit\n"
    assert sorted(sh(repo, "status", "--porcelain").splitlines()) == [
        " M b.txt",
        "A  staged.txt",
    ]
    assert head(repo, "ORIG_HEAD") == done.before  # `git reset --keep ORIG_HEAD` undoes it


async def test_a_user_switching_branch_during_a_merge_refuses_it(
    repo: Path, wts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = await new(repo, wts, "switch")
    commit_file(wt.path, "session.txt", "session\n")
    before = head(repo)
    user_acts_before_landing(monkeypatch, lambda: sh(repo, "checkout", "-q", "-b", "elsewhere"))
    with pytest.raises(MergeRefused, match="moved to elsewhere while merging"):
        await manager.merge(wt, "squash", None)
    assert head(repo, "main") == before and head(repo, "elsewhere") == before
    assert not (repo / "session.txt").exists()


async def test_unmerged_work_is_judged_from_the_repository(repo: Path, wts: Path) -> None:
    """A worktree directory removed by hand still has its branch and its commits."""
    wt = await new(repo, wts, "judge")
    assert await manager.unmerged(wt) == manager.Unmerged(0, False)
    (Path(wt.path) / "loose.txt").write_text("not committed\n")
    assert await manager.unmerged(wt) == manager.Unmerged(0, True)
    commit_file(wt.path, "kept.txt", "committed\n")
    assert await manager.unmerged(wt) == manager.Unmerged(1, False)
    shutil.rmtree(wt.path)
    assert await manager.unmerged(wt) == manager.Unmerged(1, False)
    sh(repo, "merge", "-q", "--no-edit", wt.branch)
    assert await manager.unmerged(wt) == manager.Unmerged(0, False)
    sh(repo, "worktree", "prune")
    sh(repo, "branch", "-D", "-q", wt.branch)
    assert await manager.unmerged(wt) == manager.Unmerged(0, False)
    gone_base = Worktree(wt.repo, wt.path, "main", "no-such-base")
    with pytest.raises(wgit.GitError):
        await manager.unmerged(gone_base)


async def test_five_sessions_at_once(repo: Path, wts: Path) -> None:
    names = [f"p{i}" for i in range(5)]
    made = await asyncio.gather(*(new(repo, wts, n) for n in names))
    for wt in made:
        (Path(wt.path) / f"{wt.branch.split('/')[1]}.txt").write_text(wt.branch + "\n")
    assert await asyncio.gather(*(manager.commit_pending(wt, "work") for wt in made)) == [True] * 5
    results = await asyncio.gather(*(manager.merge(wt, "merge", None) for wt in made))
    assert sorted({r.after for r in results}) == sorted(r.after for r in results)
    for n in names:
        assert (repo / f"{n}.txt").read_text() == f"acp/{n}\n"
    assert sh(repo, "status", "--porcelain") == ""
    await asyncio.gather(*(manager.discard(wt) for wt in made))
    assert sh(repo, "branch", "--list", "acp/*") == ""


# -- discard, patch, orphans, recreate ------------------------------------------------


async def test_discard_removes_directory_and_branch(repo: Path, wts: Path) -> None:
    wt = await new(repo, wts, "gone")
    (Path(wt.path) / "junk.txt").write_text("uncommitted\n")
    await manager.discard(wt)
    assert not Path(wt.path).exists()
    assert sh(repo, "branch", "--list", wt.branch) == ""
    assert wt.path not in sh(repo, "worktree", "list", "--porcelain")


async def test_patch_series_applies_to_base(repo: Path, wts: Path, tmp_path: Path) -> None:
    wt = await new(repo, wts, "pt")
    assert await manager.patch(wt) == ""
    commit_file(wt.path, "one.txt", "1\n", "first change")
    commit_file(wt.path, "a.txt", "one\nchanged\nthree\n", "second change")
    names = await manager.patch(wt, str(tmp_path / "series"))
    assert isinstance(names, list) and len(names) == 2
    assert [Path(n).name for n in names] == ["0001-first-change.patch", "0002-second-change.patch"]
    text = await manager.patch(wt)
    assert isinstance(text, str) and "Subject: [PATCH 1/2] first change" in text
    sh(repo, "am", "-q", *names)
    assert sh(repo, "diff", "HEAD", f"refs/heads/{wt.branch}") == ""


async def test_orphans_listed_and_pruned(repo: Path, wts: Path, tmp_path: Path) -> None:
    kept, lost, deleted = [await new(repo, wts, n) for n in ("kept", "lost", "deleted")]
    outside = await manager.create(
        str(repo), path=str(tmp_path / "elsewhere"), session_short_id="out"
    )
    shutil.rmtree(deleted.path)
    found = await manager.orphans(str(repo), {kept.path}, under=str(wts))
    assert sorted(found, key=lambda w: w.path) == [deleted, lost]
    assert outside not in found

    pruned = await manager.orphans([str(repo)], {kept.path}, under=str(wts), prune=True)
    assert sorted(pruned, key=lambda w: w.path) == [deleted, lost]
    assert not Path(lost.path).exists()
    assert await manager.orphans(str(repo), {kept.path}, under=str(wts)) == []
    assert sh(repo, "branch", "--list", lost.branch).strip() != ""  # the work is kept
    assert Path(kept.path).exists() and Path(outside.path).exists()


async def test_recreate_after_the_directory_was_deleted(repo: Path, wts: Path) -> None:
    wt = await new(repo, wts, "back")
    commit_file(wt.path, "kept.txt", "committed\n")
    shutil.rmtree(wt.path)
    await manager.recreate(wt)
    assert (Path(wt.path) / "kept.txt").read_text() == "committed\n"
    assert sh(wt.path, "branch", "--show-current").strip() == wt.branch
    assert await manager.status(wt) == manager.WorktreeStatus(ahead=1, behind=0, dirty=False)
    assert await manager.orphans(str(repo), set(), under=str(wts)) == [wt]  # base kept
    with pytest.raises(InvalidWorktree):
        await manager.recreate(wt)


# -- repositories of other shapes -----------------------------------------------------


async def test_repository_with_a_submodule(repo: Path, wts: Path, tmp_path: Path) -> None:
    library = make_repo(tmp_path / "library", {"lib.txt": "library\n"})
    sh(repo, "submodule", "add", "-q", str(library), "vendor/library")
    sh(repo, "commit", "-q", "-m", "add submodule")
    wt = await new(repo, wts, "sm")
    submodule = Path(wt.path) / "vendor" / "library"
    assert submodule.is_dir() and list(submodule.iterdir()) == []  # not initialized
    assert await manager.status(wt) == manager.WorktreeStatus(0, 0, False)
    commit_file(wt.path, "top.txt", "top\n")
    files, _ = await manager.diff(wt)
    assert [f.path for f in files] == ["top.txt"]
    await manager.merge(wt, "squash", None)
    assert (repo / "top.txt").exists()
    await manager.discard(wt)
    assert not Path(wt.path).exists()


async def test_lfs_pointers_stay_pointers(tmp_path: Path, wts: Path) -> None:
    pointer = (
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
        "size 12345\n"
    )
    lfs = make_repo(
        tmp_path / "lfs",
        {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n", "model.bin": pointer},
    )
    wt = await new(lfs, wts, "lfs")
    assert (Path(wt.path) / "model.bin").read_text() == pointer
    assert not (await manager.status(wt)).dirty


async def test_ten_thousand_files(tmp_path: Path, wts: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(100):
        folder = big / f"d{i:02}"
        folder.mkdir()
        for j in range(100):
            (folder / f"f{j:02}.txt").write_text(f"{i} {j}\n")
    big = make_repo(big, {})
    started = time.monotonic()
    wt = await new(big, wts, "big")
    took = time.monotonic() - started
    print(f"\ncreated a worktree of 10,000 files in {took:.2f} s")
    assert sum(len(files) for _, _, files in os.walk(wt.path)) == 10_001  # and its .git
    assert not (await manager.status(wt)).dirty
    (Path(wt.path) / "d00" / "f00.txt").write_text("changed\n")
    files, cursor = await manager.diff(wt, limit=1)
    assert [f.path for f in files] == ["d00/f00.txt"] and cursor is None
    await manager.discard(wt)
    assert not Path(wt.path).exists()


def test_file_diff_is_a_value() -> None:
    """Values compare by content, so a caller can keep and compare pages."""
    one = parse_diff(HAND_WRITTEN)
    assert one == parse_diff(HAND_WRITTEN) and isinstance(one[0], FileDiff)
