"""What checkpoints refuse to take, and what they never hold up, end to end: the real
sidecar over its pipes, a real `git`, real bubblewrap for the commands.

A data dir of ours inside the session's cwd is never snapshotted (the default layout for a
session in `$HOME`); `/`, the home directory holding the data dir, and a tree over
`--checkpoint-max-files` are refused with a reason while the turns go on; closing the
sidecar kills a snapshot's git instead of waiting for it; and every file of the shadow
repository is private.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar, eventually, pid_alive

from desktop.client import RpcError
from protocol.errors import ErrorCode


def size_of(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file())


async def changes(sidecar: Sidecar, sid: str, turn: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid}
    if turn is not None:
        params["turn"] = turn
    result: dict[str, Any] = await sidecar.call("_session/changes", params)
    return result


async def refused(sidecar: Sidecar, method: str, params: dict[str, Any]) -> str:
    """The message of the CHECKPOINT_ERROR a request is answered with."""
    with pytest.raises(RpcError) as error:
        await sidecar.call(method, params)
    assert error.value.code == ErrorCode.CHECKPOINT_ERROR
    return str(error.value)


def git_children_of(data_dir: Path) -> list[int]:
    """Live git processes working on a shadow repository under `data_dir` (found by the
    GIT_DIR our git children are given, wherever they were reparented)."""
    needle = f"GIT_DIR={data_dir}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if any(v.startswith(needle) for v in environ) and pid_alive(int(entry)):
            found.append(int(entry))
    return found


# ---- a data dir of ours in the cwd -------------------------------------------------------


async def test_a_data_dir_inside_the_cwd_stays_out_of_fifty_turns_and_a_forced_rewind(
    workspace: Path,
):
    # The default layout of a session opened in $HOME: the data dir under ~/.local/share.
    data_dir = workspace / ".local" / "share" / "acp-session-host"
    # Another sidecar's data dir (an older one's, another user's setting) in the same tree:
    # recognised by its shape, never snapshotted either.
    other = workspace / "old-store"
    (other / "checkpoints" / "s1" / "objects").mkdir(parents=True)
    (other / "checkpoints" / "s1" / "HEAD").write_text("ref: refs/heads/main\n")
    (other / "checkpoints" / "s1" / "first-turn").write_text("1")
    (other / "sessions.db").write_bytes(b"SQLite format 3\0" + b"x" * 4096)
    sidecar = await Sidecar.start(data_dir)
    try:
        summary = await sidecar.new_session(workspace, approval="auto")
        assert summary["checkpointProblem"] is None  # the project itself is checkpointed
        sid = summary["sessionId"]
        await sidecar.prompt(sid, "$ echo one > a.txt")
        # What the turn changed is the project's file, not the store it was written to.
        files = (await changes(sidecar, sid, 1))["files"]
        assert [{k: v for k, v in f.items() if k != "hunks"} for f in files] == [
            {"path": "a.txt", "status": "added", "additions": 1, "deletions": 0}
        ]
        shadow = data_dir / "checkpoints" / sid
        first = size_of(shadow)
        for _ in range(50):
            await sidecar.prompt(sid, "$ true")
        # Nothing of the store went in: fifty turns add refs and little else.
        assert size_of(shadow) - first < 1024 * 1024
        assert [f["path"] for f in (await changes(sidecar, sid, 1))["files"]] == ["a.txt"]
        for turn in (2, 26, 51):
            assert (await changes(sidecar, sid, turn))["files"] == []
        listed = subprocess.run(
            ["git", "--git-dir", str(shadow), "ls-files"], capture_output=True, text=True
        ).stdout.split()
        assert listed == ["a.txt"]

        # A forced rewind restores the project and leaves every store alone.
        other_before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
        await sidecar.prompt(sid, "$ echo two > a.txt && echo b > b.txt")
        done = await sidecar.call(
            "_session/rewind", {"sessionId": sid, "turn": 1, "scope": "code", "force": True}
        )
        assert done["code"]["restored"] == [] and done["code"]["removed"] == ["a.txt", "b.txt"]
        assert not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
        assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == other_before
        fsck = subprocess.run(
            ["git", "--git-dir", str(shadow), "fsck", "--no-dangling"], capture_output=True
        )
        assert fsck.returncode == 0, fsck.stderr
        # The store is whole: the session goes on, checkpointed as before.
        await sidecar.prompt(sid, "/write c.txt c")
        assert [f["path"] for f in (await changes(sidecar, sid))["files"]] == ["c.txt"]
        assert (await sidecar.status(sid))["status"] == "idle"
    finally:
        await sidecar.close()


async def test_a_store_an_older_snapshot_took_in_leaves_the_index_and_is_never_restored(
    workspace: Path,
):
    data_dir = workspace / "store"
    sidecar = await Sidecar.start(data_dir)
    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        await sidecar.prompt(sid, "$ echo one > a.txt")
    finally:
        await sidecar.close()
    # What an older sidecar left: its store in the index and in a turn's end checkpoint
    # (and none of the files of ours an older one did not write).
    shadow = data_dir / "checkpoints" / sid
    for name in ("data-dirs.json", "snapshot-state.json"):
        (shadow / name).unlink(missing_ok=True)
    (shadow / "info" / "exclude").write_text("")
    env = {**os.environ, "GIT_DIR": str(shadow), "GIT_WORK_TREE": str(workspace)}
    for args in (["read-tree", "refs/turns/1/after"], ["add", "-f", "store"], ["write-tree"]):
        done = subprocess.run(
            ["git", *args], cwd=workspace, env=env, capture_output=True, text=True, check=True
        )
    subprocess.run(
        ["git", "update-ref", "refs/turns/1/after", done.stdout.strip()], env=env, check=True
    )

    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(sid, "$ echo two > b.txt")
        assert [f["path"] for f in (await changes(sidecar, sid, 1))["files"]] == ["a.txt"]
        assert [f["path"] for f in (await changes(sidecar, sid, 2))["files"]] == ["b.txt"]
        listed = subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", "refs/turns/2/after"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        assert listed == ["a.txt", "b.txt"]
        indexed = subprocess.run(
            ["git", "ls-files"], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        assert indexed and not [p for p in indexed if p.startswith("store")]
        done_rewind = await sidecar.call(
            "_session/rewind", {"sessionId": sid, "turn": 1, "scope": "code", "force": True}
        )
        assert done_rewind["code"]["removed"] == ["a.txt", "b.txt"]
        assert (data_dir / "sessions.db").is_file()
        assert (await sidecar.status(sid))["status"] == "idle"
    finally:
        await sidecar.close()


# ---- directories that are not a project --------------------------------------------------


async def test_a_cwd_of_root_is_refused_before_any_walk_and_the_turn_goes_on(
    data_dir: Path, tmp_path: Path
):
    sidecar = await Sidecar.start(data_dir)
    try:
        summary = await sidecar.new_session("/", approval="auto")
        sid = summary["sessionId"]
        assert "is / (the whole file system)" in summary["checkpointProblem"]
        result = await sidecar.prompt(sid, f"/write {tmp_path}/made.txt hello")
        assert result["stopReason"] == "end_turn"
        assert (tmp_path / "made.txt").read_text() == "hello"
        told = [p for m, p in sidecar.seen if m == "_session/state" and p["sessionId"] == sid]
        assert "is / (the whole file system)" in told[-1]["checkpointProblem"]
        message = await refused(sidecar, "_session/changes", {"sessionId": sid})
        assert "checkpoints are off for this session" in message and "is /" in message
        message = await refused(
            sidecar, "_session/rewind", {"sessionId": sid, "turn": 1, "scope": "code"}
        )
        assert "is / (the whole file system)" in message
        assert not (data_dir / "checkpoints" / sid).exists()  # no git ever ran for it
    finally:
        await sidecar.close()


async def test_the_home_directory_holding_the_data_dir_is_refused(tmp_path: Path):
    home = tmp_path / "home"
    data_dir = home / ".local" / "share" / "acp-session-host"
    home.mkdir()
    sidecar = await Sidecar.start(data_dir, env={"HOME": str(home)})
    try:
        summary = await sidecar.new_session(home, approval="auto")
        assert "is the home directory" in summary["checkpointProblem"]
        sid = summary["sessionId"]
        await sidecar.prompt(sid, "/write notes.txt hello")
        assert (home / "notes.txt").read_text() == "hello"  # the turn ran
        assert "is the home directory" in await refused(
            sidecar, "_session/changes", {"sessionId": sid}
        )
        # A project below it is checkpointed as usual.
        project = home / "project"
        project.mkdir()
        below = await sidecar.new_session(project, approval="auto")
        assert below["checkpointProblem"] is None
        await sidecar.prompt(below["sessionId"], "/write a.txt x")
        assert [f["path"] for f in (await changes(sidecar, below["sessionId"]))["files"]] == [
            "a.txt"
        ]
    finally:
        await sidecar.close()


async def test_a_tree_over_the_bound_is_refused_once_and_the_turns_go_on(
    data_dir: Path, workspace: Path
):
    for i in range(60):
        (workspace / f"f{i}.txt").write_text(str(i))
    sidecar = await Sidecar.start(data_dir, "--checkpoint-max-files", "50")
    try:
        summary = await sidecar.new_session(workspace, approval="auto")
        sid = summary["sessionId"]
        first = await sidecar.prompt(sid, "$ echo x > made.txt")
        assert first["stopReason"] == "end_turn" and (workspace / "made.txt").exists()
        problem = (await sidecar.status(sid))["checkpointProblem"]
        assert "has more than 50 files" in problem and "--checkpoint-max-files" in problem
        await sidecar.prompt(sid, "$ echo y > more.txt")
        assert (workspace / "more.txt").exists()
        assert "has more than 50 files" in await refused(
            sidecar, "_session/changes", {"sessionId": sid, "turn": 1}
        )
        assert "has more than 50 files" in await refused(
            sidecar, "_session/rewind", {"sessionId": sid, "turn": 1, "scope": "code"}
        )
        said = [line for line in sidecar.client.stderr_tail if "has more than 50 files" in line]
        assert len(said) == 1  # once for the runtime, not every turn
    finally:
        await sidecar.close()


async def test_what_gitignore_leaves_out_does_not_count_toward_the_bound(
    data_dir: Path, workspace: Path
):
    (workspace / ".gitignore").write_text("node_modules/\n")
    (workspace / "node_modules").mkdir()
    for i in range(200):
        (workspace / "node_modules" / f"m{i}.js").write_text(str(i))
    for i in range(10):
        (workspace / f"src{i}.py").write_text(str(i))
    sidecar = await Sidecar.start(data_dir, "--checkpoint-max-files", "50")
    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        await sidecar.prompt(sid, "$ echo x > made.txt")
        assert (await sidecar.status(sid))["checkpointProblem"] is None
        assert [f["path"] for f in (await changes(sidecar, sid))["files"]] == ["made.txt"]
    finally:
        await sidecar.close()


# ---- shutdown never waits on a snapshot ----------------------------------------------------


@pytest.mark.parametrize("how", ["stdin EOF", "SIGTERM"])
async def test_shutdown_during_a_slow_snapshot_exits_and_leaves_no_git(
    data_dir: Path, workspace: Path, how: str
):
    # A snapshot that takes minutes: git hashing a 64 GiB (sparse) file it is allowed to take.
    with open(workspace / "huge.bin", "wb") as handle:
        handle.truncate(64 * 1024**3)
    sidecar = await Sidecar.start(data_dir, "--checkpoint-max-file-bytes", str(128 * 1024**3))
    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        pending = sidecar.prompt_task(sid, "$ echo late > after.txt")
        assert await eventually(lambda: bool(git_children_of(data_dir)), timeout=20)
        stuck = git_children_of(data_dir)
        if how == "SIGTERM":  # stdin stays open: the signal alone
            os.kill(sidecar.pid, signal.SIGTERM)
            try:
                code: int | None = await asyncio.wait_for(sidecar.client.process.wait(), 20)
            except TimeoutError:
                code = None
        else:
            code = await sidecar.client.close(timeout=20)
        pending.cancel()
        assert code == 0  # exited by itself, not killed by the client's timeout
        assert not [pid for pid in stuck if pid_alive(pid)]
        assert git_children_of(data_dir) == []  # and none was started after
        assert not (workspace / "after.txt").exists()  # the tool never ran
    finally:
        for pid in git_children_of(data_dir):
            os.kill(pid, 9)
        await sidecar.close()

    # The next runtime clears what the killed git left and checkpoints as usual.
    (workspace / "huge.bin").unlink()
    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(sid, "/write b.txt y")
        assert [f["path"] for f in (await changes(sidecar, sid))["files"]] == ["b.txt"]
    finally:
        await sidecar.close()


# ---- private files ------------------------------------------------------------------------


def loose_modes(root: Path) -> dict[str, str]:
    """Every file and directory under root whose group or others have any permission."""
    found = {}
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode) and stat.S_IMODE(mode) & 0o077:
            found[str(path.relative_to(root))] = oct(stat.S_IMODE(mode))
    return found


async def test_every_file_of_the_shadow_repository_is_private(data_dir: Path, workspace: Path):
    (workspace / "kept.txt").write_text("kept\n")
    kept_mode = stat.S_IMODE((workspace / "kept.txt").stat().st_mode)
    sidecar = await Sidecar.start(data_dir)
    try:
        sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        await sidecar.prompt(sid, "/write a.txt one")
        await sidecar.prompt(sid, "$ echo more >> kept.txt && mkdir -p d/e && echo n > d/e/n")
        await sidecar.call("_session/rewind", {"sessionId": sid, "turn": 2, "scope": "code"})
        await sidecar.call("_session/rewind", {"sessionId": sid, "undo": True, "scope": "code"})
        await sidecar.call(
            "session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        root = data_dir / "checkpoints"
        assert len(list(root.iterdir())) == 2 and list(root.glob("*/objects/??/*"))
        assert loose_modes(root) == {}
        # A file a rewind wrote back has the user's mode: only the repository is masked.
        assert (workspace / "kept.txt").read_text() == "kept\nmore\n"
        assert stat.S_IMODE((workspace / "kept.txt").stat().st_mode) == kept_mode
    finally:
        await sidecar.close()

    # A repository made by an older sidecar (world-readable) is made private when opened.
    shadow = data_dir / "checkpoints" / sid
    for path in [shadow, *shadow.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(sid, "/write c.txt c")
        assert loose_modes(shadow) == {}
    finally:
        await sidecar.close()
