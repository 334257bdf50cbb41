"""Checkpoints, what a turn changed, and rewind, end to end: the real sidecar, real files,
a real `git` (both the shadow repository's and, in the cwd, a user's own repository),
the offline provider's file commands and `$ CMD`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar, eventually, pid_alive

from desktop.client import RpcError
from protocol.errors import ErrorCode


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "u",
        "GIT_AUTHOR_EMAIL": "u@x",
        "GIT_COMMITTER_NAME": "u",
        "GIT_COMMITTER_EMAIL": "u@x",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root (symlinks as their target), with its content hash and mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = "-> " + os.readlink(path)
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = f"{path.stat().st_mode:o} {digest}"
    return found


async def auto_session(sidecar: Sidecar, cwd: Path, **meta: Any) -> str:
    summary = await sidecar.new_session(cwd, approval="auto", **meta)
    assert summary["checkpointProblem"] is None
    return str(summary["sessionId"])


async def changes(sidecar: Sidecar, sid: str, turn: int | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid}
    if turn is not None:
        params["turn"] = turn
    result: dict[str, Any] = await sidecar.call("_session/changes", params)
    return result


async def rewind(sidecar: Sidecar, sid: str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = await sidecar.call("_session/rewind", {"sessionId": sid, **params})
    return result


def files_of(result: dict[str, Any]) -> dict[str, tuple[str, int, int]]:
    return {f["path"]: (f["status"], f["additions"], f["deletions"]) for f in result["files"]}


# ---- what a turn changed -----------------------------------------------------------------


async def test_each_turn_knows_what_it_changed_by_file_tools_or_commands(
    sidecar: Sidecar, workspace: Path
):
    (workspace / "keep.txt").write_text("one\ntwo\nthree\n")
    (workspace / "doomed.txt").write_text("bye\n")
    sid = await auto_session(sidecar, workspace)
    first = await sidecar.prompt(sid, "/edit keep.txt two TWO")
    assert first["_meta"]["turn"] == 1
    await sidecar.prompt(sid, "$ rm doomed.txt && printf 'a\\nb\\n' > made.txt")
    await sidecar.prompt(sid, "just talking")  # changes nothing

    one = await changes(sidecar, sid, 1)
    assert files_of(one) == {"keep.txt": ("modified", 1, 1)}
    assert "-two\n+TWO\n" in one["diff"] and one["diffTruncated"] is False
    two = await changes(sidecar, sid, 2)
    assert files_of(two) == {"doomed.txt": ("deleted", 0, 1), "made.txt": ("added", 2, 0)}
    assert (await changes(sidecar, sid))["turn"] == 3  # the default: the last turn
    assert (await changes(sidecar, sid, 3))["files"] == []

    # Clients that asked are told when a turn that changed files ends; the quiet turn is not.
    told = [p for m, p in sidecar.seen if m == "_session/turn_changes"]
    assert [(p["sessionId"], p["turn"]) for p in told] == [(sid, 1), (sid, 2)]
    # The same files; the diff, and each file's hunks parsed from it, only in the answer.
    plain = [{k: v for k, v in f.items() if k != "hunks"} for f in two["files"]]
    assert told[1]["files"] == plain and "diff" not in told[1]
    assert all(f["hunks"] for f in two["files"])
    # The turn number is on the user messages too.
    page = await sidecar.messages(sid)
    assert [m["turn"] for m in page["messages"] if m["type"] == "user"] == [1, 2, 3]


async def test_bad_turns_are_refused_clearly(sidecar: Sidecar, workspace: Path):
    sid = await auto_session(sidecar, workspace)
    with pytest.raises(RpcError) as none_yet:
        await changes(sidecar, sid)
    assert none_yet.value.code == ErrorCode.INVALID_PARAMS and "no turns yet" in str(none_yet.value)
    await sidecar.prompt(sid, "/write a.txt x")
    for bad in (0, 2, -1, "1", 1.5):
        with pytest.raises(RpcError) as refused:
            await changes(sidecar, sid, bad)  # type: ignore[arg-type]
        assert refused.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(RpcError) as unknown:
        await rewind(sidecar, sid, turn=7, scope="code")
    assert unknown.value.code == ErrorCode.INVALID_PARAMS and "no turn 7" in str(unknown.value)
    for params in ({"scope": "code"}, {"turn": 1, "undo": True}, {"turn": 1, "scope": "all"}):
        with pytest.raises(RpcError) as malformed:
            await rewind(sidecar, sid, **params)
        assert malformed.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(RpcError) as nothing_to_undo:
        await rewind(sidecar, sid, undo=True, scope="code")
    assert "no code rewind to undo" in str(nothing_to_undo.value)
    assert (workspace / "a.txt").read_text() == "x"  # none of it changed anything


async def test_ignored_nested_and_oversized_files_stay_out(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir, "--checkpoint-max-file-bytes", "1000")
    try:
        (workspace / ".gitignore").write_text("*.cache\n")
        (workspace / "nested").mkdir()
        git(workspace / "nested", "init", "-q")
        (workspace / "nested" / "inner.txt").write_text("inner")
        sid = await auto_session(sidecar, workspace)
        await sidecar.prompt(
            sid, "$ echo x > a.cache && head -c 5000 /dev/zero > big.bin && echo y > small.txt"
        )
        result = await changes(sidecar, sid, 1)
        assert files_of(result) == {"small.txt": ("added", 1, 0)}
        assert {s["path"]: s["reason"] for s in result["skipped"]} == {
            "big.bin": "larger than 1000 bytes",
            "nested/": "a nested git repository",
        }
        # A rewind never touches what was left out.
        await rewind(sidecar, sid, turn=1, scope="code")
        assert not (workspace / "small.txt").exists()
        assert (workspace / "big.bin").stat().st_size == 5000
        assert (workspace / "a.cache").exists() and (workspace / "nested" / "inner.txt").exists()
    finally:
        await sidecar.close()


# ---- the user's own repository ----------------------------------------------------------


async def test_the_users_repository_is_never_touched(sidecar: Sidecar, workspace: Path):
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "tracked.txt").write_text("v1\n")
    git(workspace, "add", "tracked.txt")
    git(workspace, "commit", "-q", "-m", "first")
    git(workspace, "branch", "feature")
    (workspace / "tracked.txt").write_text("stashed change\n")
    git(workspace, "stash", "-q")
    (workspace / "staged.txt").write_text("staged\n")
    git(workspace, "add", "staged.txt")
    before = tree_digest(workspace / ".git")
    log_before = git(workspace, "log", "--all", "--format=%H %s")
    status_before = git(workspace, "status", "--porcelain")

    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "/edit tracked.txt v1 v2")
    await sidecar.prompt(sid, "$ echo new > untracked.txt")
    await changes(sidecar, sid, 2)
    await rewind(sidecar, sid, turn=1, scope="code")
    await rewind(sidecar, sid, undo=True, scope="code")
    await rewind(sidecar, sid, turn=1, scope="both")

    assert (
        tree_digest(workspace / ".git") == before
    )  # index, refs, stash, objects: all as they were
    assert git(workspace, "log", "--all", "--format=%H %s") == log_before
    assert git(workspace, "status", "--porcelain") == status_before
    assert git(workspace, "stash", "list") != ""


# ---- rewinding code ---------------------------------------------------------------------


async def test_a_code_rewind_restores_changed_files_removes_created_ones_and_can_be_undone(
    sidecar: Sidecar, workspace: Path
):
    (workspace / "a.txt").write_text("original a\n")
    (workspace / "gone.txt").write_text("will be deleted\n")
    (workspace / "run.sh").write_text("#!/bin/sh\n")
    (workspace / "run.sh").chmod(0o755)
    start = tree_digest(workspace)
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, '/edit a.txt "original a" "changed a"')
    await sidecar.prompt(sid, "$ rm gone.txt && mkdir -p deep/er && echo n > deep/er/new.txt")
    await sidecar.prompt(sid, "$ chmod -x run.sh && echo more >> a.txt")
    after = tree_digest(workspace)

    plan = await rewind(sidecar, sid, turn=1, scope="code", dryRun=True)
    assert plan["dryRun"] is True and plan["code"]["rewind"] is None
    assert sorted(plan["code"]["restored"]) == ["a.txt", "gone.txt", "run.sh"]
    assert plan["code"]["removed"] == ["deep/er/new.txt"]
    assert tree_digest(workspace) == after  # a dry run changes nothing

    done = await rewind(sidecar, sid, turn=1, scope="code")
    assert done["code"]["conflicts"] == [] and done["code"]["rewind"] == 1
    assert tree_digest(workspace) == start
    assert not (workspace / "deep").exists()  # emptied directories go too

    undone = await rewind(sidecar, sid, undo=True, scope="code")
    assert undone["code"]["rewind"] == 2
    assert tree_digest(workspace) == after
    # The conversation was not part of it: nothing in the transcript says so.
    page = await sidecar.messages(sid)
    assert not [m for m in page["messages"] if m["type"] == "marker"]


async def test_a_users_later_edit_is_a_conflict_not_overwritten_unless_forced(
    sidecar: Sidecar, workspace: Path
):
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "/write mine.txt from the agent")
    await sidecar.prompt(sid, "/write other.txt also the agent")
    (workspace / "mine.txt").write_text("the user edited this after\n")

    result = await rewind(sidecar, sid, turn=1, scope="code")
    assert result["code"]["conflicts"] == [
        {
            "path": "mine.txt",
            "reason": "changed outside the session since the session last changed it",
        }
    ]
    assert result["code"]["removed"] == ["other.txt"]
    assert (workspace / "mine.txt").read_text() == "the user edited this after\n"
    assert not (workspace / "other.txt").exists()

    forced = await rewind(sidecar, sid, turn=1, scope="code", force=True)
    assert forced["code"]["removed"] == ["mine.txt"]
    assert not (workspace / "mine.txt").exists()


async def test_a_rewind_while_a_turn_runs_is_busy(sidecar: Sidecar, workspace: Path):
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "/write a.txt x")
    running = sidecar.prompt_task(sid, "/sleep 30")
    await sidecar.wait_state(sid, "running")
    with pytest.raises(RpcError) as busy:
        await rewind(sidecar, sid, turn=1, scope="both")
    assert busy.value.code == ErrorCode.SESSION_BUSY
    await sidecar.call("session/cancel", {"sessionId": sid})
    await asyncio.wait_for(running, 20)
    assert (workspace / "a.txt").read_text() == "x"


async def test_checkpoints_survive_a_restart_and_are_copied_by_fork_and_removed_by_delete(
    data_dir: Path, workspace: Path, tmp_path: Path
):
    sidecar = await Sidecar.start(data_dir)
    try:
        sid = await auto_session(sidecar, workspace)
        await sidecar.prompt(sid, "/write a.txt first")
        await sidecar.prompt(sid, "/write b.txt second")
    finally:
        await sidecar.close()

    sidecar = await Sidecar.start(data_dir)
    try:
        # A closed session's changes are still there; a resumed one can rewind.
        assert files_of(await changes(sidecar, sid, 1)) == {"a.txt": ("added", 1, 0)}
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        fork = await sidecar.call(
            "session/fork",
            {"sessionId": sid, "cwd": str(workspace), "mcpServers": [], "_meta": {"turn": 2}},
        )
        fork_id = fork["sessionId"]
        assert fork["_meta"]["turns"] == 1
        assert files_of(await changes(sidecar, fork_id, 1)) == {"a.txt": ("added", 1, 0)}
        with pytest.raises(RpcError):
            await changes(sidecar, fork_id, 2)  # the fork has no turn 2
        page = await sidecar.messages(fork_id)
        assert [m["text"] for m in page["messages"] if m["type"] == "user"] == [
            "/write a.txt first"
        ]

        await rewind(sidecar, sid, turn=2, scope="code")
        assert not (workspace / "b.txt").exists() and (workspace / "a.txt").exists()

        # Elsewhere, a fork gets no checkpoints: they describe another directory.
        other = tmp_path / "other"
        other.mkdir()
        moved = await sidecar.call(
            "session/fork", {"sessionId": sid, "cwd": str(other), "mcpServers": []}
        )
        with pytest.raises(RpcError) as none:
            await changes(sidecar, moved["sessionId"], 1)
        assert none.value.code == ErrorCode.CHECKPOINT_ERROR

        shadow = data_dir / "checkpoints" / fork_id
        assert shadow.is_dir()
        await sidecar.call("session/close", {"sessionId": fork_id})
        await sidecar.call("session/delete", {"sessionId": fork_id})
        assert not shadow.exists()
        assert (data_dir / "checkpoints" / sid).is_dir()  # the source keeps its own
    finally:
        await sidecar.close()


async def test_a_deleted_cwd_is_a_clear_error(sidecar: Sidecar, tmp_path: Path):
    cwd = tmp_path / "doomed"
    cwd.mkdir()
    sid = await auto_session(sidecar, cwd)
    await sidecar.prompt(sid, "/write a.txt x")
    for path in cwd.iterdir():
        path.unlink()
    cwd.rmdir()
    with pytest.raises(RpcError) as gone:
        await rewind(sidecar, sid, turn=1, scope="code")
    assert gone.value.code == ErrorCode.CHECKPOINT_ERROR and "no longer exists" in str(gone.value)
    assert (await sidecar.status(sid))["status"] == "idle"  # refused, nothing broken


# ---- rewinding the conversation ---------------------------------------------------------


@pytest.fixture
async def fake(tmp_path: Path):
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


def sent_user_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]


async def test_a_conversation_rewind_restarts_the_context_and_survives_resume_and_fork(
    data_dir: Path, workspace: Path, fake: FakeServerProcess
):
    args = ("--provider", "openai", "--model", "m", "--base-url", fake.base_url)
    env = {"OPENAI_API_KEY": "test"}
    sidecar = await Sidecar.start(data_dir, *args, env=env)
    try:
        sid = await auto_session(sidecar, workspace)
        for text in ("first", "second", "third"):
            await sidecar.prompt(sid, text)
        result = await rewind(sidecar, sid, turn=2, scope="conversation")
        assert "code" not in result
        marker = result["conversation"]["markerIndex"]
        await sidecar.prompt(sid, "fourth")
        requests = await fake.requests()
        assert sent_user_messages(requests[-1]) == ["first", "fourth"]
        # Nothing was deleted: the transcript still holds every turn, and the marker.
        page = await sidecar.messages(sid)
        users = [m["text"] for m in page["messages"] if m["type"] == "user"]
        assert users == ["first", "second", "third", "fourth"]
        assert page["messages"][marker]["kind"] == "rewind"
        assert [m["turn"] for m in page["messages"] if m["type"] == "user"] == [1, 2, 3, 4]
    finally:
        await sidecar.close()

    sidecar = await Sidecar.start(data_dir, *args, env=env)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(sid, "fifth")
        assert sent_user_messages((await fake.requests())[-1]) == ["first", "fourth", "fifth"]
        # Rewinding to a turn that was itself rewound brings back the context it had.
        await rewind(sidecar, sid, turn=3, scope="conversation")
        await sidecar.prompt(sid, "sixth")
        assert sent_user_messages((await fake.requests())[-1]) == ["first", "second", "sixth"]
        fork = await sidecar.call(
            "session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(fork["sessionId"], "in the fork")
        assert sent_user_messages((await fake.requests())[-1]) == [
            "first",
            "second",
            "sixth",
            "in the fork",
        ]
        before_five = await sidecar.call(
            "session/fork",
            {"sessionId": sid, "cwd": str(workspace), "mcpServers": [], "_meta": {"turn": 5}},
        )
        await sidecar.prompt(before_five["sessionId"], "from before five")
        assert sent_user_messages((await fake.requests())[-1]) == [
            "first",
            "fourth",
            "from before five",
        ]
    finally:
        await sidecar.close()


async def test_a_conversation_rewind_after_compaction_keeps_the_summary_it_had(
    data_dir: Path, workspace: Path, fake: FakeServerProcess
):
    sidecar = await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        "m",
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        sid = await auto_session(sidecar, workspace)
        for text in ("alpha", "beta", "gamma"):
            await sidecar.prompt(sid, text)
        compacted = await sidecar.call("_session/compact", {"sessionId": sid, "keepTurns": 1})
        assert compacted["compacted"]
        await sidecar.prompt(sid, "delta")
        await rewind(sidecar, sid, turn=4, scope="conversation")
        await sidecar.prompt(sid, "epsilon")
        sent = (await fake.requests())[-1]["body"]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == ["gamma", "epsilon"]
        summaries = [
            m for m in sent if m["role"] == "system" and "Summary of the earlier" in m["content"]
        ]
        assert len(summaries) == 1 and "alpha" in summaries[0]["content"]
        # Back to before gamma: before the compaction, so the context it had then.
        await rewind(sidecar, sid, turn=3, scope="conversation")
        await sidecar.prompt(sid, "zeta")
        sent = (await fake.requests())[-1]["body"]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == ["alpha", "beta", "zeta"]
        assert not [m for m in sent if "Summary of the earlier" in str(m["content"])]
    finally:
        await sidecar.close()


# ---- crashes ----------------------------------------------------------------------------


def blocking_git(tmp_path: Path, subcommand: str, make_lock: bool) -> tuple[Path, Path]:
    """A `git` first on PATH that, for one subcommand, announces itself and hangs (as a git
    process would when the machine dies under it); everything else is the real git."""
    real = subprocess.run(
        ["which", "git"], capture_output=True, text=True, check=True
    ).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    flag = tmp_path / "git-is-stuck"
    lock = 'touch "$GIT_DIR/index.lock"\n' if make_lock else ""
    script = f"""#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = "{subcommand}" ]; then
    {lock}echo $$ > "{flag}"
    exec sleep 600
  fi
done
exec {real} "$@"
"""
    (bin_dir / "git").write_text(script)
    (bin_dir / "git").chmod(0o755)
    return bin_dir, flag


async def kill_when_stuck(sidecar: Sidecar, flag: Path) -> None:
    assert await eventually(flag.exists, timeout=20)
    stuck = int(flag.read_text())
    sidecar.sigkill()
    await sidecar.wait_exit()
    os.kill(stuck, signal.SIGKILL)
    assert await eventually(lambda: not pid_alive(stuck))


async def test_a_crash_mid_rewind_is_finished_on_resume_and_the_rewind_can_be_retried(
    data_dir: Path, workspace: Path, tmp_path: Path
):
    bin_dir, flag = blocking_git(tmp_path, "checkout", make_lock=False)
    (workspace / "a.txt").write_text("before\n")
    start = tree_digest(workspace)
    path = f"{bin_dir}:{os.environ['PATH']}"
    sidecar = await Sidecar.start(data_dir, env={"PATH": path})
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "$ echo after > a.txt && echo new > b.txt")
    pending = asyncio.ensure_future(rewind(sidecar, sid, turn=1, scope="code"))
    await kill_when_stuck(sidecar, flag)
    (lost,) = await asyncio.gather(pending, return_exceptions=True)
    assert isinstance(lost, Exception)  # the sidecar died before answering
    # Half done: b.txt removed already, a.txt not yet restored.
    assert not (workspace / "b.txt").exists() and (workspace / "a.txt").read_text() == "after\n"

    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        retried = await rewind(sidecar, sid, turn=1, scope="code")
        assert retried["code"]["conflicts"] == []
        assert tree_digest(workspace) == start
        # The shadow repository is whole: the next turn is checkpointed and diffed as usual.
        await sidecar.prompt(sid, "/write c.txt c")
        assert files_of(await changes(sidecar, sid, 2)) == {"c.txt": ("added", 1, 0)}
    finally:
        await sidecar.close()


async def test_a_crash_mid_checkpoint_leaves_nothing_stuck(
    data_dir: Path, workspace: Path, tmp_path: Path
):
    bin_dir, flag = blocking_git(tmp_path, "add", make_lock=True)
    sidecar = await Sidecar.start(data_dir, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    sid = await auto_session(sidecar, workspace)
    pending = sidecar.prompt_task(sid, "/write a.txt x")
    await kill_when_stuck(sidecar, flag)
    pending.cancel()
    shadow = data_dir / "checkpoints" / sid
    assert (shadow / "index.lock").exists()  # what a git killed mid-add leaves

    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        await sidecar.prompt(sid, "/write b.txt y")
        assert not (shadow / "index.lock").exists()
        assert files_of(await changes(sidecar, sid, 2)) == {"b.txt": ("added", 1, 0)}
        assert (workspace / "b.txt").read_text() == "y"
    finally:
        await sidecar.close()
