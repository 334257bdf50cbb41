"""The terminal client's `/worktree` and `/review`, driven as a real process over pipes
against a real sidecar (offline provider) on real files and real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_tui import Tui

WHO = ["-c", "user.name=t", "-c", "user.email=t@example.com"]


def git_repo(root: Path) -> Path:
    root.mkdir()
    (root / "README.md").write_text("tui\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*WHO, "commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


def poem(path: Path) -> list[str]:
    """Twenty lines, `alpha` on the 2nd and the 18th: one edit of both is two hunks."""
    lines = [f"line {n}" for n in range(1, 21)]
    lines[1] = lines[17] = "alpha"
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_worktree_shows_the_branch_and_its_diff(data_dir: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    tui = Tui(data_dir, repo)
    try:
        tui.new_session("--title", "Plain")
        tui.run("/worktree", rf"session sess_\w+ has no worktree: it works in {repo}")
        tui.run("/new --branch tui-review --title Tree", r"created sess_\w+")
        tui.run(
            "/worktree",
            r"worktree of sess_\w+:\n  repo    \S+/repo\n  path    \S+/repo\.worktrees/\w+\n"
            r"  branch  tui-review \(base main\)\n  0 commit\(s\) ahead of main, 0 behind\n"
            r"  dirty   no\n",
        )
        tui.run("/worktree diff", r"tui-review has no changes against main")
        tui.run("//write made.txt in the tree", r"y once · a always")
        tui.turn("y", r"Created made\.txt")
        tui.run("/worktree", r"  dirty   yes\n")
        tui.run(
            "/worktree diff",
            r"tui-review against main, files 1-1:\n  A made\.txt \+1 -0\n"
            r"  \[1\] @@ -0,0 \+1 @@\n      \+in the tree\n",
        )
        tui.run("/worktree diff 2", r"no page 2: the diff of tui-review has fewer files")
        tui.run("/worktree sideways", r"error: usage: /worktree \[diff \[PAGE\]\]")
        tui.run("/help", r"/worktree \[diff \[PAGE\]\]")
    finally:
        tui.kill()


def test_review_lists_hunks_and_rejects_one(data_dir: Path, workspace: Path) -> None:
    target = workspace / "poem.txt"
    lines = poem(target)
    tui = Tui(data_dir, workspace)
    try:
        tui.new_session()
        tui.run("/review reject 1", r"error: no review listed for this session: /review")
        tui.run("//edit poem.txt alpha ALPHA all", r"y once · a always")
        tui.turn("y", r"\[turn 1 changed 1 file")
        tui.run(
            "/review",
            r"turn 1 changed 1 file\(s\), 2 hunk\(s\):\n  M poem\.txt \+2 -2\n"
            r"  \[1\] @@ -1,5 \+1,5 @@\n       line 1\n      -alpha\n      \+ALPHA\n(.*\n)*?"
            r"  \[2\] @@ -15,6 \+15,6 @@.*\n(.*\n)*?      -alpha\n      \+ALPHA\n",
        )
        # A bad number (or file) is a clear message, and nothing changes on disk.
        tui.run("/review reject 9", r"error: no hunk 9 in turn 1's review \(hunks: 1-2\)")
        tui.run("/review reject nosuch.txt", r"error: turn 1 did not change nosuch\.txt")
        tui.run("/review sideways", r"error: usage: /review \[TURN\]")
        assert target.read_text().count("ALPHA") == 2
        # Rejecting hunk 1 puts that part back and leaves the other.
        tui.run("/review reject 1", r"reverted hunk\(s\) 1 of poem\.txt ✗")
        now = target.read_text().splitlines()
        assert now[1] == "alpha" and now[17] == "ALPHA"
        assert now[:17] == lines[:17] and now[18:] == lines[18:]
        tui.run("/review accept 2", r"kept hunk\(s\) 2 ✓")
        tui.run("/review", r"  \[1\] ✗ @@ -1,5 \+1,5 @@\n(.*\n)*?  \[2\] ✓ @@ -15,6 \+15,6 @@")
        tui.run("/help", r"/review \[TURN\] +a turn's changes")
    finally:
        tui.kill()


def test_review_reject_refuses_lines_changed_since_and_a_whole_file(
    data_dir: Path, workspace: Path
) -> None:
    target = workspace / "poem.txt"
    poem(target)
    tui = Tui(data_dir, workspace)
    try:
        tui.new_session()
        tui.run("//edit poem.txt alpha ALPHA all", r"y once · a always")
        tui.turn("y", r"\[turn 1 changed 1 file")
        tui.run("/review", r"2 hunk\(s\)")
        # The user changes hunk 2's line after the turn: the revert is refused until forced.
        target.write_text(target.read_text().replace("ALPHA\nline 19", "mine\nline 19"))
        tui.run(
            "/review reject 2",
            r"error: poem\.txt changed since turn 1: the lines of hunk\(s\) 2 \(@@ -15,6 .*"
            r"nothing was reverted \(/review reject 2 --force takes them back",
        )
        assert target.read_text().splitlines()[17] == "mine"
        tui.run("/review reject 2 --force", r"reverted hunk\(s\) 2 of poem\.txt ✗")
        assert target.read_text().splitlines()[17] == "alpha"
        # A second turn makes a new file; rejecting the whole file removes it.
        tui.run("//write notes.txt made in turn 2", r"y once · a always")
        tui.turn("y", r"\[turn 2 changed 1 file")
        tui.run("/review 2", r"turn 2 changed 1 file\(s\), 1 hunk\(s\):\n  A notes\.txt \+1 -0")
        tui.run("/review reject notes.txt", r"reverted notes\.txt to before turn 2")
        assert not (workspace / "notes.txt").exists()
        tui.run("/review 2", r"  \[1\] ✗ @@ -0,0 \+1 @@")
        tui.run("/rewind undo --yes", r"rewound:\n  restore notes\.txt")
        assert (workspace / "notes.txt").read_text() == "made in turn 2"
        # The undo took back that revert only: its hunk is unmarked, turn 1's stays ✗.
        tui.run("/review 2", r"  \[1\] @@ -0,0 \+1 @@")
        tui.run("/review 1", r"  \[2\] ✗ @@ -15,6")
    finally:
        tui.kill()
