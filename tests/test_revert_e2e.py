"""`_session/revert` end to end: the real sidecar over its pipes, the offline provider's
`/write` turns (and an external ACP agent's), real files. Exactly the chosen hunks of one
turn are taken back, in a plain directory and in a worktree; a hunk whose lines changed
since is refused unless forced; each revert is a step `_session/rewind {undo}` takes
back; bad input names its field and changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from harness import Sidecar
from test_worktree_sessions_e2e import GIT_ENV, new_in_worktree, repo  # noqa: F401

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

LINES = [f"line {n}" for n in range(1, 31)]


def text(lines: list[str]) -> str:
    return "\n".join(lines)  # no final newline: a prompt loses it


def edited(changes: dict[int, str]) -> list[str]:
    return [changes.get(n, line) for n, line in enumerate(LINES, start=1)]


async def two_hunk_turn(sidecar: Sidecar, sid: str, cwd: Path) -> list[dict[str, Any]]:
    """Turn 1 writes a 30-line file; turn 2 changes lines 2 and 28 (two hunks)."""
    await sidecar.prompt(sid, f"/write code.txt {text(LINES)}")
    await sidecar.prompt(sid, f"/write code.txt {text(edited({2: 'two', 28: 'twenty-eight'}))}")
    assert (cwd / "code.txt").read_text() == text(edited({2: "two", 28: "twenty-eight"}))
    changes = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 2})
    (entry,) = changes["files"]
    assert entry["path"] == "code.txt" and len(entry["hunks"]) == 2
    return list(entry["hunks"])


async def revert(sidecar: Sidecar, sid: str, **params: Any) -> Any:
    return await sidecar.call("_session/revert", {"sessionId": sid, **params})


async def test_one_hunk_reverted_then_undone_by_rewind(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(cwd, approval="auto"))["sessionId"]
        first, second = await two_hunk_turn(sidecar, sid, cwd)
        assert "-line 2" in first["lines"] and "+two" in first["lines"]
        done = await revert(sidecar, sid, turn=2, path="code.txt", hunks=[first["id"]])
        assert done["hunks"] == [first["id"]] and done["forced"] is False
        assert (cwd / "code.txt").read_text() == text(edited({28: "twenty-eight"}))
        state = await sidecar.status(sid)
        assert state["status"] == "idle"
        # The revert is a checkpointed step: undo takes it back.
        undone = await sidecar.call(
            "_session/rewind", {"sessionId": sid, "undo": True, "scope": "code"}
        )
        assert undone["code"]["restored"] == ["code.txt"]
        assert (cwd / "code.txt").read_text() == text(edited({2: "two", 28: "twenty-eight"}))
        # The other hunk alone, by its id: the first stays.
        await revert(sidecar, sid, turn=2, path="code.txt", hunks=[second["id"]])
        assert (cwd / "code.txt").read_text() == text(edited({2: "two"}))
    finally:
        await sidecar.close()


async def test_lines_changed_since_are_refused_unless_forced(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(cwd, approval="auto"))["sessionId"]
        first, second = await two_hunk_turn(sidecar, sid, cwd)
        # The user edits line 2 and adds a line at the top after the turn.
        mine = ["added by me", *edited({2: "mine", 28: "twenty-eight"})]
        (cwd / "code.txt").write_text(text(mine))
        with pytest.raises(RpcError) as caught:
            await revert(sidecar, sid, turn=2, path="code.txt", hunks=[first["id"]])
        message = str(caught.value)
        assert caught.value.code == -32045
        assert "changed since turn 2" in message and first["id"] in message
        assert (cwd / "code.txt").read_text() == text(mine)  # nothing written
        # A hunk whose lines are still there (one line lower) is found and taken back;
        # the user's edits elsewhere in the file stay.
        await revert(sidecar, sid, turn=2, path="code.txt", hunks=[second["id"]])
        assert (cwd / "code.txt").read_text() == text(["added by me", *edited({2: "mine"})])
        # Forced: taken back from the file as the turn left it.
        done = await revert(sidecar, sid, turn=2, path="code.txt", hunks=[first["id"]], force=True)
        assert done["forced"] is True
        assert (cwd / "code.txt").read_text() == text(edited({28: "twenty-eight"}))
        # And that, too, is undone.
        await sidecar.call("_session/rewind", {"sessionId": sid, "undo": True, "scope": "code"})
        assert (cwd / "code.txt").read_text() == text(["added by me", *edited({2: "mine"})])
    finally:
        await sidecar.close()


async def test_whole_files_added_deleted_and_modified(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "old.txt").write_text("old")
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(cwd, approval="auto"))["sessionId"]
        await two_hunk_turn(sidecar, sid, cwd)
        await sidecar.prompt(sid, "$ rm old.txt && printf new > new.txt")
        changes = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 3})
        assert {f["path"]: f["status"] for f in changes["files"]} == {
            "new.txt": "added",
            "old.txt": "deleted",
        }
        await revert(sidecar, sid, turn=3, path="new.txt")
        assert not (cwd / "new.txt").exists()
        await revert(sidecar, sid, turn=3, path="old.txt")
        assert (cwd / "old.txt").read_text() == "old"
        # A whole modified file (no hunks named): as it was before the turn.
        done = await revert(sidecar, sid, turn=2, path="code.txt")
        assert len(done["hunks"]) == 2
        assert (cwd / "code.txt").read_text() == text(LINES)
    finally:
        await sidecar.close()


async def test_bad_reverts_name_the_field_and_change_nothing(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(cwd, approval="auto"))["sessionId"]
        await two_hunk_turn(sidecar, sid, cwd)
        before = (cwd / "code.txt").read_text()
        cases: list[tuple[dict[str, Any], str]] = [
            ({"turn": 2, "path": "code.txt", "hunks": ["0123456789abcdef"]}, "hunks"),
            ({"turn": 2, "path": "code.txt", "hunks": ["not-an-id"]}, "hunks"),
            ({"turn": 2, "path": "other.txt"}, "path"),
            ({"turn": 2, "path": "/etc/passwd"}, "path"),
            ({"turn": 2, "path": "../code.txt"}, "path"),
            ({"turn": 9, "path": "code.txt"}, "turn"),
            ({"turn": 0, "path": "code.txt"}, "turn"),
        ]
        for params, field in cases:
            with pytest.raises(RpcError) as caught:
                await revert(sidecar, sid, **params)
            assert caught.value.code == -32602, params
            assert field in str(caught.value), (params, str(caught.value))
        assert (cwd / "code.txt").read_text() == before
        # Nothing to undo: none of them was a step.
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/rewind", {"sessionId": sid, "undo": True, "scope": "code"})
        assert "no code rewind to undo" in str(caught.value)
    finally:
        await sidecar.close()


async def test_in_a_worktree_with_an_external_agent(tmp_path: Path, repo: Path) -> None:  # noqa: F811
    setup = AgentSetup(tmp_path / "agents").add("scripted")
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args(), env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, agent="scripted", approval="auto")
        sid, path = opened["sessionId"], Path(opened["_meta"]["worktree"]["path"])
        (path / "code.txt").write_text(text(LINES))
        await sidecar.prompt(sid, "run sed -i 's/^line 3$/three/; s/^line 27$/x/' code.txt")
        assert (path / "code.txt").read_text() == text(edited({3: "three", 27: "x"}))
        changes = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 1})
        (entry,) = [f for f in changes["files"] if f["path"] == "code.txt"]
        first = entry["hunks"][0]
        await revert(sidecar, sid, turn=1, path="code.txt", hunks=[first["id"]])
        assert (path / "code.txt").read_text() == text(edited({27: "x"}))
        # The worktree's diff shows what is left, with the same id for the hunk left.
        diff = await sidecar.call("_session/worktree/diff", {"sessionId": sid})
        (left,) = [f for f in diff["files"] if f["path"] == "code.txt"]
        assert [h["id"] for h in left["hunks"]] != [first["id"]]
        assert any("+x" in h["lines"] for h in left["hunks"])
    finally:
        await sidecar.close()
