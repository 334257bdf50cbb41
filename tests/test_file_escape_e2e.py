"""File writes never leave the cwd, and every file-tool failure is a tool result.

The real sidecar, real bubblewrap (the agent's own `$ CMD` plants what an attacker would),
real files outside the workspace. A write follows only the path that was approved: no
symlink it did not ask for (a planted temp-file name, a parent directory swapped while the
user was asked), and a failure of any kind (a name too long, a symlink loop,
`/proc/self/mem`, a directory) is a result the model reads, the session back to idle and
its transcript well formed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar

PLANTED = 11_000


async def new_session(sidecar: Sidecar, cwd: Path, **meta: Any) -> str:
    summary = await sidecar.new_session(cwd, **meta)
    return str(summary["sessionId"])


async def answer(sidecar: Sidecar, session_id: str, text: str) -> str:
    result = await sidecar.prompt(session_id, text)
    return str(result["_meta"]["response"])


def last_finished(sidecar: Sidecar, session_id: str) -> dict[str, Any]:
    return [
        u
        for u in sidecar.updates(session_id, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    ][-1]


async def assert_well_formed(sidecar: Sidecar, session_id: str) -> list[dict[str, Any]]:
    """Idle, never in error, and every tool call of the transcript has its result."""
    assert (await sidecar.status(session_id))["status"] == "idle"
    assert "error" not in sidecar.states(session_id)
    messages = (await sidecar.messages(session_id, limit=1000))["messages"]
    called = [c["toolCallId"] for m in messages if m["type"] == "assistant" for c in m["toolCalls"]]
    answered = [m["toolCallId"] for m in messages if m["type"] == "tool_result"]
    assert called and called == answered
    return [m for m in messages if m["type"] == "tool_result"]


def private_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("the user's private file\n")
    secret.chmod(0o600)
    return secret


def unchanged(secret: Path) -> bool:
    mode = stat.S_IMODE(secret.lstat().st_mode)
    return secret.read_text() == "the user's private file\n" and mode == 0o600


# ---- no symlink a write did not ask for ---------------------------------------------------


async def test_planted_temp_file_symlinks_do_not_redirect_an_approved_write(
    sidecar: Sidecar, tmp_path: Path, workspace: Path
):
    """The old temporary name was `.<name>.tmp-<pid>`: the agent's own command plants it
    (for every pid around the sidecar's) as a symlink to a private file outside the cwd."""
    secret = private_file(tmp_path)
    sid = await new_session(sidecar, workspace)
    first = sidecar.pid - PLANTED // 2
    plant = (
        f"python3 -c \"import os; [os.symlink('{secret}', '.todo.md.tmp-%d' % n) "
        f'for n in range({first}, {first + PLANTED})]"; ls -a | grep -c tmp-'
    )
    assert str(PLANTED) in await answer(sidecar, sid, f"$ {plant}")
    assert (workspace / f".todo.md.tmp-{sidecar.pid}").is_symlink()

    text = await answer(sidecar, sid, "/write todo.md the plan")
    assert "Created todo.md (1 lines)" in text
    assert unchanged(secret)
    todo = workspace / "todo.md"
    assert not todo.is_symlink() and todo.read_text() == "the plan"
    assert stat.S_IMODE(todo.stat().st_mode) == 0o644  # the documented mode of a new file
    # The planted links are left as they were; no temporary file of ours is left behind.
    names = {p.name for p in workspace.iterdir()}
    assert len(names) == PLANTED + 1 and all(
        (workspace / n).is_symlink() for n in names - {"todo.md"}
    )
    await assert_well_formed(sidecar, sid)


async def test_an_edit_keeps_the_files_mode_and_leaves_no_temporary_file(
    sidecar: Sidecar, workspace: Path
):
    target = workspace / "private.cfg"
    target.write_text("token = old\n")
    target.chmod(0o640)
    owner = (4321, 4321) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    os.chown(target, *owner)  # as root: a user's file stays the user's
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, "/edit private.cfg old new")
    assert "Wrote private.cfg" in text
    assert target.read_text() == "token = new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert (target.stat().st_uid, target.stat().st_gid) == owner
    assert [p.name for p in workspace.iterdir()] == ["private.cfg"]


async def test_a_parent_swapped_for_a_symlink_while_asked_is_refused(
    sidecar: Sidecar, tmp_path: Path, workspace: Path
):
    """Approved was `<cwd>/sub/a.txt`; while the user was asked, `sub` became a symlink to a
    directory outside the cwd. The write must not follow it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "sub").mkdir()
    sid = await new_session(sidecar, workspace)

    def swap_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        (workspace / "sub").rename(workspace / "sub.before")
        (workspace / "sub").symlink_to(outside)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    sidecar.answer_permission = swap_then_allow
    text = await answer(sidecar, sid, "/write sub/a.txt planted")
    assert "changed since the write was approved" in text
    assert f"{workspace / 'sub'} is now a symbolic link" in text
    assert list(outside.iterdir()) == []
    assert list((workspace / "sub.before").iterdir()) == []
    assert last_finished(sidecar, sid)["status"] == "failed"
    await assert_well_formed(sidecar, sid)


async def test_a_missing_parent_created_as_a_symlink_while_asked_is_refused(
    sidecar: Sidecar, tmp_path: Path, workspace: Path
):
    """Approved was a new directory `<cwd>/new/`; meanwhile it appeared, as a symlink out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    sid = await new_session(sidecar, workspace)

    def plant_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        (workspace / "new").symlink_to(outside)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    sidecar.answer_permission = plant_then_allow
    text = await answer(sidecar, sid, "/write new/deeper/a.txt planted")
    assert "changed since the write was approved" in text
    assert list(outside.iterdir()) == []
    await assert_well_formed(sidecar, sid)


async def test_a_target_swapped_for_a_symlink_while_asked_is_refused(
    sidecar: Sidecar, tmp_path: Path, workspace: Path
):
    """The file itself replaced by a symlink to a file with the same content: the content
    check alone would pass; the file is not the one that was approved."""
    secret = private_file(tmp_path)
    target = workspace / "notes.txt"
    target.write_text(secret.read_text())
    sid = await new_session(sidecar, workspace)

    def swap_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        target.unlink()
        target.symlink_to(secret)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    sidecar.answer_permission = swap_then_allow
    text = await answer(sidecar, sid, "/edit notes.txt private public")
    assert "changed since the write was approved" in text
    assert target.is_symlink() and unchanged(secret)
    await assert_well_formed(sidecar, sid)


async def test_a_target_that_is_a_symlink_out_of_the_cwd_is_refused(
    sidecar: Sidecar, tmp_path: Path, workspace: Path
):
    secret = private_file(tmp_path)
    (workspace / "todo.md").symlink_to(secret)
    (workspace / "dangling.md").symlink_to(secret.parent / "new.md")
    sid = await new_session(sidecar, workspace)
    for name, real in (("todo.md", secret), ("dangling.md", secret.parent / "new.md")):
        text = await answer(sidecar, sid, f"/write {name} overwritten")
        assert f"refused: {real} is outside the session directory" in text
    assert unchanged(secret) and sorted(p.name for p in secret.parent.iterdir()) == ["secret"]
    assert sidecar.asked == []
    await assert_well_formed(sidecar, sid)


async def test_a_symlink_inside_the_cwd_is_written_through(sidecar: Sidecar, workspace: Path):
    """Kept as it was: a link whose target is in the cwd writes that target (the link stays)."""
    (workspace / "real.txt").write_text("old\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    sid = await new_session(sidecar, workspace)
    assert "Wrote real.txt" in await answer(sidecar, sid, "/write alias.txt new")
    assert (workspace / "alias.txt").is_symlink() and (workspace / "real.txt").read_text() == "new"


# ---- every failure is a tool result -------------------------------------------------------


LONG = "n" * 300


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (f"/read {LONG}.txt", "File name too long"),
        (f"/write {LONG}.txt x", "File name too long"),
        (f"/edit {LONG}.txt a b", "File name too long"),
        (f"/ls {LONG}", "File name too long"),
        ("/read loop", "Too many levels of symbolic links"),
        ("/write loop x", "Too many levels of symbolic links"),
        ("/edit loop a b", "Too many levels of symbolic links"),
        ("/read /proc/self/mem", "is in /proc (the kernel"),  # refused, never opened
        ("/read sub", "is a directory"),
        ("/edit sub a b", "is a directory"),
        ("/write file.txt/inner.txt x", "one of its parents is not a directory"),
        ("/read fifo", "is not a regular file"),
        ("/write fifo x", "is not a regular file"),
    ],
)
async def test_a_file_tool_failure_is_a_result_and_the_session_goes_on(
    sidecar: Sidecar, workspace: Path, prompt: str, expected: str
):
    (workspace / "loop").symlink_to("loop")
    (workspace / "sub").mkdir()
    (workspace / "file.txt").write_text("a file\n")
    os.mkfifo(workspace / "fifo")
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, prompt)
    assert expected in text
    assert last_finished(sidecar, sid)["status"] == "failed"
    (result,) = await assert_well_formed(sidecar, sid)
    assert expected in result["text"] and result["ok"] is False
    # The session goes on: the next turn runs.
    assert "hello" in await answer(sidecar, sid, "$ echo hello")
    assert not (workspace / "a.txt").exists()


async def test_a_gitignore_with_an_invalid_pattern_still_lists(sidecar: Sidecar, workspace: Path):
    """A lone `!` is no pattern: git skips the line, and so does list_files (it used to
    raise out of the turn)."""
    (workspace / ".gitignore").write_text("!\n*.log\n")
    (workspace / "a.py").write_text("x")
    (workspace / "b.log").write_text("x")
    sid = await new_session(sidecar, workspace)
    await answer(sidecar, sid, "/ls")
    (result,) = await assert_well_formed(sidecar, sid)
    assert result["ok"] is True
    assert sorted(result["text"].splitlines()) == [".gitignore", "a.py"]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("read_file", '{"path": "a\\ud800.txt"}', "path is not valid Unicode"),
        ("list_files", '{"path": "\\ud800"}', "path is not valid Unicode"),
        ("write_file", '{"path": "\\ud800", "content": "x"}', "path is not valid Unicode"),
        ("write_file", '{"path": "a.txt", "content": "\\ud800"}', "new text is not valid Unicode"),
    ],
)
async def test_a_lone_surrogate_in_the_arguments_is_a_result(
    sidecar: Sidecar, workspace: Path, tool: str, arguments: str, expected: str
):
    """JSON lets a model send `\\ud800`, which no file name or file can hold: a tool
    result that says so (without echoing it), the turn going on (it used to fail the
    prompt)."""
    sid = await new_session(sidecar, workspace)
    result = await sidecar.prompt(sid, f"/tool {tool} {arguments}")
    assert result["stopReason"] == "end_turn"
    (told,) = await assert_well_formed(sidecar, sid)
    assert expected in told["text"] and told["ok"] is False
    assert "\ud800" not in told["text"]
    assert list(workspace.iterdir()) == []
