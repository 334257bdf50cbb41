"""Sessions in their own git worktrees, end to end: the real sidecar over its pipes, real
git repositories. A session made with `_meta.worktree` works on its own branch in its
own directory (every engine: the builtin loop and an external agent), its summary says
where and how it stands, its branch's diff comes hunk by hunk, and it is merged back
all or nothing, or discarded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from harness import Sidecar, eventually

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


async def new_in_worktree(sidecar: Sidecar, cwd: Path, worktree: Any, **meta: Any) -> Any:
    return await sidecar.call(
        "session/new",
        {"cwd": str(cwd), "mcpServers": [], "_meta": {"worktree": worktree, **meta}},
    )


async def closed_on_host(data: Path, repo: Path, host: str, prompt: str | None = None) -> Any:
    """A worktree session made (and `prompt`ed) by a sidecar of `host` on `data`, then
    closed: the `session/new` answer."""
    sidecar = await Sidecar.start(data, "--host-id", host, env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        if prompt is not None:
            await sidecar.prompt(opened["sessionId"], prompt)
        await sidecar.call("session/close", {"sessionId": opened["sessionId"]})
        return opened
    finally:
        await sidecar.close()


async def test_a_session_works_on_its_own_branch_then_merges_back(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        summary = opened["_meta"]
        sid = opened["sessionId"]
        tree = summary["worktree"]
        assert tree["repo"] == str(repo) and tree["base"] == "main"
        assert tree["branch"].startswith("acp/") and summary["cwd"] == tree["path"]
        assert Path(tree["path"]).parent == Path(f"{repo}.worktrees")
        assert (tree["ahead"], tree["behind"], tree["dirty"]) == (0, 0, False)
        # A turn that writes lands in the worktree, not in the main tree.
        await sidecar.prompt(sid, "/write notes.md from the session")
        assert (Path(tree["path"]) / "notes.md").read_text() == "from the session"
        assert not (repo / "notes.md").exists()
        status = await sidecar.status(sid)
        assert status["worktree"]["dirty"] is True  # kept current after the turn
        # The branch's diff, hunk by hunk, with ids stable across calls.
        diff = await sidecar.call("_session/worktree/diff", {"sessionId": sid})
        files = {f["path"]: f for f in diff["files"]}
        assert files["notes.md"]["status"] == "added" and files["notes.md"]["additions"] == 1
        # The turn's changes show the same hunks with the same ids.
        turn = await sidecar.call("_session/changes", {"sessionId": sid, "turn": 1})
        turn_ids = [h["id"] for f in turn["files"] for h in f["hunks"]]
        assert turn_ids == [h["id"] for h in files["notes.md"]["hunks"]]
        again = await sidecar.call("_session/worktree/diff", {"sessionId": sid})
        assert [h["id"] for f in again["files"] for h in f["hunks"]] == [
            h["id"] for f in diff["files"] for h in f["hunks"]
        ]
        # Merge back: what was left uncommitted is committed on the branch first.
        merged = await sidecar.call(
            "_session/worktree/merge", {"sessionId": sid, "strategy": "squash"}
        )
        assert merged["before"] != merged["after"]
        assert (repo / "notes.md").read_text() == "from the session"
        assert git(repo, "status", "--porcelain") == ""
        # The summary says so at once: the work was committed, main moved on (a squash
        # is a commit of its own, so the branch's commit stays ahead of it).
        after = (await sidecar.status(sid))["worktree"]
        assert (after["dirty"], after["ahead"], after["behind"]) == (False, 1, 1)
        # Discard: only once closed; the branch and the directory go.
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/worktree/discard", {"sessionId": sid})
        assert "close it" in str(caught.value)
        await sidecar.call("session/close", {"sessionId": sid})
        discarded = await sidecar.call("_session/worktree/discard", {"sessionId": sid})
        assert discarded["worktree"] is None
        assert not Path(tree["path"]).exists()
        assert tree["branch"] not in git(repo, "branch", "--list")
    finally:
        await sidecar.close()


async def test_bad_worktree_requests_name_the_field_and_create_nothing(
    tmp_path: Path, repo: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        cases = [
            (plain, True, "_meta.worktree"),
            (repo, {"branch": "bad..name"}, "_meta.worktree.branch"),
            (repo, {"base": "no-such-branch"}, "_meta.worktree.base"),
        ]
        git(repo, "branch", "taken")
        cases.append((repo, {"branch": "taken"}, "_meta.worktree.branch"))
        for cwd, worktree, field in cases:
            with pytest.raises(RpcError) as caught:
                await new_in_worktree(sidecar, cwd, worktree)
            assert caught.value.code == -32602, (worktree, caught.value)
            assert field in str(caught.value), (worktree, caught.value)
        assert (await sidecar.call("session/list", {}))["sessions"] == []
        assert not Path(f"{repo}.worktrees").exists() or not any(
            Path(f"{repo}.worktrees").iterdir()
        )
    finally:
        await sidecar.close()


async def test_a_conflicting_merge_leaves_the_base_as_it_was(tmp_path: Path, repo: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, {"branch": "feature"}, approval="auto")
        sid = opened["sessionId"]
        await sidecar.prompt(sid, "/write README.md from the session")
        (repo / "README.md").write_text("from main\n")
        git(repo, "commit", "-q", "-am", "main moved")
        head = git(repo, "rev-parse", "HEAD")
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/worktree/merge", {"sessionId": sid, "strategy": "merge"})
        assert "README.md" in str(caught.value) and "nothing was merged" in str(caught.value)
        assert git(repo, "rev-parse", "HEAD") == head
        assert git(repo, "status", "--porcelain") == ""
        assert (repo / "README.md").read_text() == "from main\n"
        # A dirty main tree is refused, naming the file.
        (repo / "README.md").write_text("local edit\n")
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/worktree/merge", {"sessionId": sid})
        assert "README.md" in str(caught.value)
    finally:
        await sidecar.close()


async def test_resume_recreates_a_removed_worktree_and_an_external_agent_works_in_one(
    tmp_path: Path, repo: Path
) -> None:
    setup = AgentSetup(tmp_path / "agents").add("scripted")
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args(), env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, agent="scripted", approval="auto")
        sid, path = opened["sessionId"], Path(opened["_meta"]["worktree"]["path"])
        await sidecar.prompt(sid, "shell-write agent.txt from the agent")
        assert (path / "agent.txt").read_text() == "from the agent"
        assert not (repo / "agent.txt").exists()
        await sidecar.call("_session/worktree/merge", {"sessionId": sid})
        assert (repo / "agent.txt").exists()
        await sidecar.call("session/close", {"sessionId": sid})
        subprocess.run(["rm", "-rf", str(path)], check=True)
        resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(path)})
        assert resumed["_meta"]["worktree"]["path"] == str(path)
        assert (path / "agent.txt").exists()  # from its branch
    finally:
        await sidecar.close()


HELD_SIGNER = """#!/bin/sh
# A signing program that holds every commit until the test lets it go: a merge that is
# under way for as long as the test needs. Its signature is not checked by git.
touch "{gate}/started"
while [ ! -e "{gate}/release" ]; do sleep 0.05; done
cat >/dev/null
echo "[GNUPG:] SIG_CREATED D 1 8 00 0 X" >&2
printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nheld\\n-----END PGP SIGNATURE-----\\n'
"""


def hold_commits(repo: Path, gate: Path) -> None:
    """Every commit in `repo` (its worktrees share its config) waits for `gate/release`."""
    gate.mkdir()
    signer = gate / "signer.sh"
    signer.write_text(HELD_SIGNER.format(gate=gate))
    signer.chmod(0o755)
    git(repo, "config", "commit.gpgSign", "true")
    git(repo, "config", "gpg.program", str(signer))


async def test_a_merge_runs_under_the_turn_lock(tmp_path: Path, repo: Path) -> None:
    """A turn running: the merge is busy. A merge running: a prompt is busy, a queued one
    waits for the merge's end, so no turn edits the worktree while its work is committed
    and merged."""
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, path = opened["sessionId"], Path(opened["_meta"]["worktree"]["path"])
        sleeping = sidecar.prompt_task(sid, "/sleep 60")
        await sidecar.wait_state(sid, "running")
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/worktree/merge", {"sessionId": sid})
        assert caught.value.code == -32042  # busy
        await sidecar.call("session/cancel", {"sessionId": sid})
        assert (await sleeping)["stopReason"] == "cancelled"

        await sidecar.prompt(sid, "/write merged.md in the merge")
        gate = tmp_path / "gate"
        hold_commits(repo, gate)
        merging = asyncio.ensure_future(
            sidecar.call("_session/worktree/merge", {"sessionId": sid, "strategy": "squash"})
        )
        assert await eventually(lambda: (gate / "started").exists(), timeout=30)
        assert (await sidecar.status(sid))["status"] == "running"
        with pytest.raises(RpcError) as caught:
            await sidecar.prompt(sid, "/write late.md too late")
        assert caught.value.code == -32042
        queued = asyncio.ensure_future(
            sidecar.call(
                "session/prompt",
                {
                    "sessionId": sid,
                    "prompt": [{"type": "text", "text": "/write queued.md after the merge"}],
                    "_meta": {"queue": True},
                },
            )
        )
        await sidecar.wait_for(
            lambda method, params: (
                method == "_session/queue_update"
                and params.get("sessionId") == sid
                and len(params.get("queue", [])) == 1
            )
        )
        assert not queued.done() and not (path / "queued.md").exists()  # it waits
        (gate / "release").touch()
        merged = await merging
        assert merged["before"] != merged["after"]
        assert (await queued)["stopReason"] == "end_turn"
        assert (path / "queued.md").read_text() == "after the merge"
        assert (repo / "merged.md").exists()  # what was there when the merge began
        assert not (repo / "queued.md").exists() and not (path / "late.md").exists()
        listed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
        assert listed == ["merged.md"]
    finally:
        await sidecar.close()


async def test_a_merge_on_another_host_is_refused_naming_it(tmp_path: Path, repo: Path) -> None:
    data = tmp_path / "data"
    opened = await closed_on_host(data, repo, "alpha", "/write work.md from alpha")
    sid = opened["sessionId"]
    head = git(repo, "rev-parse", "HEAD")
    beta = await Sidecar.start(data, "--host-id", "beta", env=GIT_ENV)
    try:
        for method in ("_session/worktree/merge", "_session/worktree/discard"):
            with pytest.raises(RpcError) as caught:
                await beta.call(method, {"sessionId": sid})
            assert caught.value.code == -32045
            assert "on host alpha" in str(caught.value) and "beta" in str(caught.value)
        assert git(repo, "rev-parse", "HEAD") == head and not (repo / "work.md").exists()
        assert Path(opened["_meta"]["worktree"]["path"], "work.md").exists()
    finally:
        await beta.close()


async def test_five_sessions_in_worktrees_of_one_repository_run_at_once(
    tmp_path: Path, repo: Path
) -> None:
    """Five turns at once, each in its own worktree: each waits in a shell command until
    all five have started (so they really overlap: were they run one after another, the
    first would wait alone and say so), then writes its own file. Every turn ends well,
    no git lock error reaches anyone, and no file of one appears in another."""
    gate = tmp_path / "all-started"
    gate.mkdir()
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await asyncio.gather(
            *(  # sandbox off: the gate, under /tmp, is each command's own tmpfs otherwise
                new_in_worktree(sidecar, repo, True, approval="auto", sandbox="off")
                for _ in range(5)
            )
        )
        sids = [o["sessionId"] for o in opened]
        paths = [Path(o["_meta"]["worktree"]["path"]) for o in opened]
        assert len(set(paths)) == 5
        barrier = (
            "touch {gate}/{n}; i=0; "
            'while [ "$(ls {gate} | wc -l)" -lt 5 ] && [ $i -lt 1200 ]; '
            "do sleep 0.05; i=$((i+1)); done; "
            "echo started together: $(ls {gate} | wc -l) > own-{n}.txt"
        )
        ended = await asyncio.gather(
            *(
                sidecar.prompt(sid, "$ " + barrier.format(gate=gate, n=n))
                for n, sid in enumerate(sids)
            )
        )
        assert [e["stopReason"] for e in ended] == ["end_turn"] * 5
        for n, path in enumerate(paths):
            assert (path / f"own-{n}.txt").read_text() == "started together: 5\n"
            assert git(path, "status", "--porcelain") == f"?? own-{n}.txt"
        said = json.dumps(sidecar.seen).lower()
        assert "index.lock" not in said and not re.search(r"\block", said)
        merged = await asyncio.gather(
            *(sidecar.call("_session/worktree/merge", {"sessionId": sid}) for sid in sids)
        )
        assert len({m["after"] for m in merged}) == 5  # one after the other
        assert sorted(p.name for p in repo.glob("own-*.txt")) == [f"own-{n}.txt" for n in range(5)]
        assert git(repo, "status", "--porcelain") == ""
    finally:
        await sidecar.close()


async def test_delete_refuses_unmerged_work_unless_told_and_takes_a_clean_worktree_along(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        dirty = await new_in_worktree(sidecar, repo, True, approval="auto")
        clean = await new_in_worktree(sidecar, repo, True, approval="auto")
        await sidecar.prompt(dirty["sessionId"], "/write work.md unmerged")
        for opened in (dirty, clean):
            await sidecar.call("session/close", {"sessionId": opened["sessionId"]})
        with pytest.raises(RpcError) as caught:
            await sidecar.call("session/delete", {"sessionId": dirty["sessionId"]})
        assert "unmerged work" in str(caught.value) and "removeWorktree" in str(caught.value)
        assert Path(dirty["_meta"]["worktree"]["path"]).is_dir()  # nothing changed
        await sidecar.call(
            "session/delete", {"sessionId": dirty["sessionId"], "_meta": {"removeWorktree": True}}
        )
        assert not Path(dirty["_meta"]["worktree"]["path"]).exists()
        await sidecar.call("session/delete", {"sessionId": clean["sessionId"]})
        assert not Path(clean["_meta"]["worktree"]["path"]).exists()  # nothing to lose
        branches = git(repo, "branch", "--list")
        assert dirty["_meta"]["worktree"]["branch"] not in branches
        assert clean["_meta"]["worktree"]["branch"] not in branches
    finally:
        await sidecar.close()


async def test_delete_of_a_worktree_removed_by_hand_keeps_a_branch_with_unmerged_commits(
    tmp_path: Path, repo: Path
) -> None:
    """Unmerged work is judged from the repository (the branch against its base), not
    from the directory: a directory gone does not make its branch's commits nobody's."""
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, tree = opened["sessionId"], opened["_meta"]["worktree"]
        await sidecar.prompt(sid, "/write precious.md work worth keeping")
        git(Path(tree["path"]), "add", "-A")
        git(Path(tree["path"]), "commit", "-q", "-m", "unmerged work")
        tip = git(repo, "rev-parse", f"refs/heads/{tree['branch']}")
        await sidecar.call("session/close", {"sessionId": sid})
        subprocess.run(["rm", "-rf", tree["path"]], check=True)
        with pytest.raises(RpcError) as caught:
            await sidecar.call("session/delete", {"sessionId": sid})
        assert caught.value.code == -32045
        message = str(caught.value)
        assert tree["branch"] in message and "removeWorktree" in message
        assert "1 commit(s) not in main" in message
        assert git(repo, "rev-parse", f"refs/heads/{tree['branch']}") == tip  # kept
        listed = (await sidecar.call("session/list", {}))["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]  # the record too
        await sidecar.call("session/delete", {"sessionId": sid, "_meta": {"removeWorktree": True}})
        assert tree["branch"] not in git(repo, "branch", "--list")
    finally:
        await sidecar.close()


async def test_orphaned_worktrees_are_reported_then_pruned_only_when_asked(
    tmp_path: Path, repo: Path
) -> None:
    # Another data dir's session made a worktree, then that data dir was wiped: its
    # worktree is nobody's now. So is one a user added by hand in our directory.
    other = await Sidecar.start(tmp_path / "other-data", env=GIT_ENV)
    try:
        lost = (await new_in_worktree(other, repo, True))["_meta"]["worktree"]
    finally:
        await other.close()
    subprocess.run(["rm", "-rf", str(tmp_path / "other-data")], check=True)
    manual = Path(f"{repo}.worktrees") / "by-hand"
    git(repo, "worktree", "add", "-q", "-b", "by-hand", str(manual))
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        kept = (await new_in_worktree(sidecar, repo, True))["_meta"]["worktree"]
        found = await sidecar.call("_session/worktree/orphans", {})
        listed = {o["path"]: o for o in found["orphans"]}
        assert set(listed) == {lost["path"], str(manual)}  # ours is not an orphan
        assert listed[lost["path"]]["branch"] == lost["branch"]
        assert listed[lost["path"]]["repo"] == str(repo)
        assert Path(lost["path"]).is_dir() and manual.is_dir()  # listing removes nothing
        named = await sidecar.call("_session/worktree/orphans", {"repo": str(repo)})
        assert {o["path"] for o in named["orphans"]} == set(listed)
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/worktree/orphans", {"repo": str(tmp_path)})
        assert caught.value.code == -32602 and "repo" in str(caught.value)
        pruned = await sidecar.call("_session/worktree/orphans", {"prune": True})
        assert pruned["pruned"] is True and len(pruned["orphans"]) == 2
        assert not Path(lost["path"]).exists() and not manual.exists()
        assert Path(kept["path"]).is_dir()
        branches = git(repo, "branch", "--list")
        assert lost["branch"] in branches and "by-hand" in branches  # work is never lost
        assert (await sidecar.call("_session/worktree/orphans", {}))["orphans"] == []
    finally:
        await sidecar.close()
    # A sidecar restarted on the same data dir still knows the repository.
    again = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        git(repo, "worktree", "add", "-q", "-b", "later", f"{repo}.worktrees/later")
        found = await again.call("_session/worktree/orphans", {})
        assert [o["branch"] for o in found["orphans"]] == ["later"]
    finally:
        await again.close()


async def test_a_worktree_belongs_to_the_host_that_made_it(tmp_path: Path, repo: Path) -> None:
    data = tmp_path / "data"
    opened = await closed_on_host(data, repo, "alpha")
    sid, path = opened["sessionId"], opened["_meta"]["worktree"]["path"]
    # The same store read by another host (a shared PostgreSQL, here the same file).
    beta = await Sidecar.start(data, "--host-id", "beta", env=GIT_ENV)
    try:
        with pytest.raises(RpcError) as caught:
            await beta.call("session/resume", {"sessionId": sid, "cwd": path})
        assert "on host alpha" in str(caught.value) and "beta" in str(caught.value)
        listed = (await beta.call("session/list", {}))["sessions"]
        (row,) = [s for s in listed if s["sessionId"] == sid]
        assert row["_meta"]["status"] == "closed"  # nothing half started
        with pytest.raises(RpcError) as caught:
            await beta.call("session/delete", {"sessionId": sid})
        assert "on host alpha" in str(caught.value)
        await beta.call("session/delete", {"sessionId": sid, "_meta": {"removeWorktree": True}})
        assert Path(path).is_dir()  # on alpha's disk: left there, never touched from here
    finally:
        await beta.close()
