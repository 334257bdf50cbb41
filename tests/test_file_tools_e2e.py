"""The file tools end to end: the real sidecar, the offline provider's file commands
(`/read`, `/ls`, `/write`, `/edit`, `/tool`), real files.

What the model is told comes back as the tool result (the offline provider quotes it in
its answer, `_meta.response`); what clients see is the ACP `tool_call` / update and the
permission request, with kinds, locations and diffs.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar

from sidecar.agent.tools.files import MAX_LIST


async def new_session(sidecar: Sidecar, cwd: Path, **meta: Any) -> str:
    summary = await sidecar.new_session(cwd, **meta)
    return str(summary["sessionId"])


async def answer(sidecar: Sidecar, session_id: str, text: str) -> str:
    result = await sidecar.prompt(session_id, text)
    return str(result["_meta"]["response"])


def tool_calls(sidecar: Sidecar, session_id: str) -> list[dict[str, Any]]:
    return sidecar.updates(session_id, "tool_call")


def result_text(sidecar: Sidecar, session_id: str) -> str:
    """The whole tool result the model was told (the provider's answer quotes only a part)."""
    content = finished(sidecar, session_id)[-1]["content"]
    return str(next(c["content"]["text"] for c in content if c["type"] == "content"))


def finished(sidecar: Sidecar, session_id: str) -> list[dict[str, Any]]:
    return [
        u
        for u in sidecar.updates(session_id, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    ]


# ---- read_file and list_files -------------------------------------------------------------


async def test_read_file_is_line_numbered_bounded_and_says_what_it_left(
    sidecar: Sidecar, workspace: Path
):
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, "/read notes.txt 3 2")
    assert "     3\tline 3" in text and "     4\tline 4" in text
    assert "line 5" not in text
    assert "[lines 3-4 of 10: more with offset=5]" in text
    call = tool_calls(sidecar, sid)[-1]
    assert call["kind"] == "read"
    assert call["locations"] == [{"path": str(workspace / "notes.txt"), "line": 1}]
    assert finished(sidecar, sid)[-1]["status"] == "completed"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("blob.bin", b"\x00\x01\x02binary", "is a binary file"),
        ("latin.txt", "café".encode("latin-1"), "is not UTF-8 text"),
    ],
)
async def test_read_file_refuses_binary_and_non_utf8_files(
    sidecar: Sidecar, workspace: Path, name: str, content: bytes, expected: str
):
    (workspace / name).write_bytes(content)
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, f"/read {name}")
    assert expected in text
    assert finished(sidecar, sid)[-1]["status"] == "failed"


async def test_read_file_of_a_directory_a_missing_file_and_a_huge_file(
    sidecar: Sidecar, workspace: Path
):
    (workspace / "sub").mkdir()
    with open(workspace / "huge.log", "wb") as handle:
        handle.truncate(11 * 1024 * 1024)  # sparse: large without writing it
    sid = await new_session(sidecar, workspace)
    assert "is a directory" in await answer(sidecar, sid, "/read sub")
    assert "does not exist" in await answer(sidecar, sid, "/read nowhere.txt")
    assert "too large" in await answer(sidecar, sid, "/read huge.log")
    assert "'path' must be a string" in await answer(sidecar, sid, '/tool read_file {"path": 3}')
    assert "arguments are not JSON" in await answer(sidecar, sid, "/tool read_file {nope")


async def test_list_files_respects_gitignore_at_every_level_and_filters(
    sidecar: Sidecar, workspace: Path
):
    (workspace / ".gitignore").write_text("*.log\nbuild/\n")
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / ".gitignore").write_text("secret.py\n")
    for name in ("a.py", "a.log", "src/b.py", "src/secret.py", "src/deep/c.py", "src/d.txt"):
        (workspace / name).write_text("x")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.py").write_text("x")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("x")
    sid = await new_session(sidecar, workspace)
    await answer(sidecar, sid, "/ls")
    listed = result_text(sidecar, sid).splitlines()
    assert {"a.py", "src/b.py", "src/deep/c.py", "src/d.txt", ".gitignore"} <= set(listed)
    for hidden in ("a.log", "src/secret.py", "build/out.py", ".git/config"):
        assert hidden not in listed
    await answer(sidecar, sid, "/ls src *.py")
    python = result_text(sidecar, sid).splitlines()
    assert "src/b.py" in python and "src/deep/c.py" in python and "src/d.txt" not in python
    assert tool_calls(sidecar, sid)[-1]["kind"] == "search"


async def test_list_files_is_bounded(sidecar: Sidecar, workspace: Path):
    many = workspace / "many"
    many.mkdir()
    for n in range(MAX_LIST + 5):
        (many / f"f{n:05}.txt").write_text("")
    sid = await new_session(sidecar, workspace)
    await answer(sidecar, sid, "/ls many")
    text = result_text(sidecar, sid)
    assert f"[more than {MAX_LIST} files: narrow it with path or pattern]" in text
    assert len([line for line in text.splitlines() if line.startswith("many/")]) == MAX_LIST


# ---- write_file and edit_file -------------------------------------------------------------


async def test_a_write_is_shown_and_approved_as_its_exact_diff(sidecar: Sidecar, workspace: Path):
    target = workspace / "pkg" / "new.py"
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, "/write pkg/new.py print('hi')\nprint('bye')")
    assert "Created pkg/new.py (2 lines)" in text
    assert target.read_text() == "print('hi')\nprint('bye')"
    new_text = "print('hi')\nprint('bye')"
    diff = {"type": "diff", "path": str(target), "oldText": None, "newText": new_text}
    asked = sidecar.asked[-1]["toolCall"]
    assert asked["kind"] == "edit"
    assert asked["content"] == [diff]
    assert asked["locations"] == [{"path": str(target), "line": 1}]
    # session/update leaves out null fields: a new file's diff has no oldText there.
    shown = {k: v for k, v in diff.items() if v is not None}
    started = tool_calls(sidecar, sid)[-1]
    assert started["kind"] == "edit" and started["content"] == [shown]
    done = finished(sidecar, sid)[-1]
    assert done["status"] == "completed" and done["content"][0] == shown


async def test_edit_file_replaces_exactly_once_or_says_why_not(sidecar: Sidecar, workspace: Path):
    target = workspace / "a.txt"
    target.write_text("alpha beta\nbeta gamma\n")
    sid = await new_session(sidecar, workspace)
    assert "was not found" in await answer(sidecar, sid, "/edit a.txt delta x")
    assert "found 2 times" in await answer(sidecar, sid, "/edit a.txt beta x")
    assert target.read_text() == "alpha beta\nbeta gamma\n"
    assert len(sidecar.asked) == 0  # nothing to approve: nothing would be written
    await answer(sidecar, sid, '/edit a.txt "beta gamma" "beta GAMMA"')
    assert target.read_text() == "alpha beta\nbeta GAMMA\n"
    asked = sidecar.asked[-1]["toolCall"]
    assert asked["content"][0]["oldText"] == "alpha beta\nbeta gamma\n"
    assert asked["content"][0]["newText"] == "alpha beta\nbeta GAMMA\n"
    assert asked["locations"] == [{"path": str(target), "line": 2}]
    await answer(sidecar, sid, "/edit a.txt beta B all")
    assert target.read_text() == "alpha B\nB GAMMA\n"
    missing = await answer(sidecar, sid, "/edit nowhere.txt a b")
    assert "does not exist (write_file creates files)" in missing


async def test_a_refused_write_writes_nothing(sidecar: Sidecar, workspace: Path):
    sid = await new_session(sidecar, workspace)
    sidecar.answer_permission = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "reject_once"}
    }
    text = await answer(sidecar, sid, "/write a.txt hello")
    assert "Not run" in text
    assert not (workspace / "a.txt").exists()


async def test_a_file_changed_between_approval_and_write_is_not_overwritten(
    sidecar: Sidecar, workspace: Path
):
    target = workspace / "a.txt"
    target.write_text("original\n")
    sid = await new_session(sidecar, workspace)

    def change_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        target.write_text("changed by the user meanwhile\n")
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    sidecar.answer_permission = change_then_allow
    text = await answer(sidecar, sid, "/edit a.txt original replaced")
    assert "changed since the write was approved" in text
    assert target.read_text() == "changed by the user meanwhile\n"
    assert finished(sidecar, sid)[-1]["status"] == "failed"


@pytest.mark.parametrize("path", ["../outside.txt", "{outside}", "link/escape.txt"])
async def test_writes_outside_the_cwd_are_refused_unless_the_sandbox_is_off(
    sidecar: Sidecar, tmp_path: Path, workspace: Path, path: str
):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    path = path.format(outside=outside / "abs.txt")
    sid = await new_session(sidecar, workspace)
    text = await answer(sidecar, sid, f"/write {path} nope")
    assert "outside the session directory" in text
    assert not list(outside.iterdir()) and not (tmp_path / "outside.txt").exists()
    assert sidecar.asked == []

    loose = await new_session(sidecar, workspace, sandbox="off")
    text = await answer(sidecar, loose, f"/write {path} allowed")
    assert "Created" in text
    assert len(sidecar.asked) == 1  # still approved first
    written = [p for p in [*outside.iterdir(), tmp_path / "outside.txt"] if p.exists()]
    assert [p.read_text() for p in written] == ["allowed"]


async def test_plan_mode_and_a_read_only_sandbox_never_write(sidecar: Sidecar, workspace: Path):
    plan = await new_session(sidecar, workspace, mode="plan")
    assert "not available in this mode" in await answer(sidecar, plan, "/write a.txt x")
    # A model calling a tool it was not offered is told the tools it has.
    forced = await answer(sidecar, plan, '/tool write_file {"path": "a.txt", "content": "x"}')
    assert "Unknown tool 'write_file'" in forced and "read_file" in forced
    read_only = await new_session(sidecar, workspace, sandbox="read-only")
    text = await answer(sidecar, read_only, "/write a.txt x")
    assert "the session's sandbox is read-only" in text
    assert not (workspace / "a.txt").exists()


async def test_a_directory_as_the_path_of_a_write(sidecar: Sidecar, workspace: Path):
    (workspace / "sub").mkdir()
    sid = await new_session(sidecar, workspace)
    assert "is a directory" in await answer(sidecar, sid, "/write sub x")


@pytest.fixture
async def unprivileged(tmp_path: Path, data_dir: Path) -> AsyncIterator[Sidecar]:
    """A sidecar without root's power to ignore file permissions (as a user's would be)."""
    wrapper = tmp_path / "python-without-dac"
    drop = "setpriv --inh-caps=-all --bounding-set=-dac_override,-dac_read_search "
    wrapper.write_text(
        f'#!/bin/sh\nexec {drop if os.geteuid() == 0 else ""}{sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    from harness import INITIALIZE

    from desktop.client import SidecarClient

    client = await SidecarClient.spawn(
        ["--data-dir", str(data_dir), "--log-level", "DEBUG"], python=str(wrapper)
    )
    running = Sidecar(client)
    await running.call("initialize", INITIALIZE)
    try:
        yield running
    finally:
        await running.close()


async def test_permission_denied_is_a_clear_result(unprivileged: Sidecar, workspace: Path):
    locked = workspace / "locked.txt"
    locked.write_text("private")
    locked.chmod(0)
    frozen = workspace / "frozen"
    frozen.mkdir()
    sid = await new_session(unprivileged, workspace)
    try:
        frozen.chmod(stat.S_IRUSR | stat.S_IXUSR)
        assert "permission denied" in await answer(unprivileged, sid, "/read locked.txt")
        text = await answer(unprivileged, sid, "/write frozen/new.txt x")
        assert "failed: Permission denied" in text
        assert not (frozen / "new.txt").exists()
    finally:
        frozen.chmod(0o755)
        locked.chmod(0o644)
