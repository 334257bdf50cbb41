"""Forks of a worktree session, end to end: the real sidecar over its pipes, real git.
Forked in place (`session/fork` with the source's own cwd, what the window's Fork sends),
the fork gets a worktree and branch of its own, from the source branch's tip and holding
the source's uncommitted work; from then on each one's edits, merge, discard and delete
are its own. Forked into another directory, the fork works there, with no worktree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Sidecar
from test_worktree_sessions_e2e import GIT_ENV, closed_on_host, git, new_in_worktree, repo

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

__all__ = ["repo"]  # the fixture, used here by name


def short(session_id: str) -> str:
    return session_id.removeprefix("sess_")[:8]


async def test_a_fork_in_place_gets_its_own_worktree_with_the_sources_work(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        sid, source = opened["sessionId"], opened["_meta"]["worktree"]
        src = Path(source["path"])
        await sidecar.prompt(sid, "/write committed.md on the branch")
        git(src, "add", "-A")
        git(src, "commit", "-q", "-m", "source's commit")
        await sidecar.prompt(sid, "/write untracked.md not committed")
        await sidecar.prompt(sid, "/edit README.md hello 'hello from the source'")
        (src / "binary.bin").write_bytes(b"\x00\x01\x02\xff")
        status_before = git(src, "status", "--porcelain")
        tip = git(repo, "rev-parse", f"refs/heads/{source['branch']}")

        forked = await sidecar.call(
            "session/fork", {"sessionId": sid, "cwd": str(src), "mcpServers": []}
        )
        fid, own = forked["sessionId"], forked["_meta"]["worktree"]
        dst = Path(own["path"])
        assert own["branch"] == f"acp/{short(fid)}" and own["base"] == "main"
        assert own["repo"] == str(repo) and dst.parent == Path(f"{repo}.worktrees")
        assert forked["_meta"]["cwd"] == str(dst) != str(src)
        assert forked["_meta"]["forkedFrom"] == sid
        assert git(repo, "rev-parse", f"refs/heads/{own['branch']}") == tip
        # The source's work, committed and not, untracked and binary files included.
        assert (dst / "committed.md").read_text() == "on the branch"
        assert (dst / "untracked.md").read_text() == "not committed"
        assert (dst / "README.md").read_text() == "hello from the source\n"
        assert (dst / "binary.bin").read_bytes() == b"\x00\x01\x02\xff"
        assert git(dst, "status", "--porcelain") == status_before
        assert (own["ahead"], own["dirty"]) == (1, True)
        # The source is as it was.
        assert git(src, "status", "--porcelain") == status_before
        assert git(repo, "rev-parse", f"refs/heads/{source['branch']}") == tip

        # Each one's edits stay its own.
        await sidecar.prompt(fid, "/write fork-only.md the fork's")
        await sidecar.prompt(sid, "/write source-only.md the source's")
        assert not (src / "fork-only.md").exists() and not (dst / "source-only.md").exists()

        # The fork's merge takes its work (and what it carried), not the source's since.
        await sidecar.call("_session/worktree/merge", {"sessionId": fid})
        assert (repo / "fork-only.md").exists() and (repo / "untracked.md").exists()
        assert not (repo / "source-only.md").exists()
        assert (src / "source-only.md").exists()  # nothing of the source was committed
        assert git(repo, "rev-parse", f"refs/heads/{source['branch']}") == tip

        # Discarding the source leaves the fork's directory; the fork is deleted alone.
        for one in (sid, fid):
            await sidecar.call("session/close", {"sessionId": one})
        await sidecar.call("_session/worktree/discard", {"sessionId": sid})
        assert not src.exists() and dst.is_dir()
        await sidecar.call("session/delete", {"sessionId": fid})  # merged: nothing to lose
        assert not dst.exists()
        assert own["branch"] not in git(repo, "branch", "--list")
    finally:
        await sidecar.close()


async def test_a_fork_into_another_directory_has_no_worktree_of_its_own(
    tmp_path: Path, repo: Path
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data", env=GIT_ENV)
    try:
        opened = await new_in_worktree(sidecar, repo, True, approval="auto")
        await sidecar.prompt(opened["sessionId"], "/write a.md one")
        forked = await sidecar.call(
            "session/fork", {"sessionId": opened["sessionId"], "cwd": str(repo), "mcpServers": []}
        )
        assert forked["_meta"]["worktree"] is None and forked["_meta"]["cwd"] == str(repo)
        # Deleting the fork leaves the source's worktree alone.
        await sidecar.call("session/close", {"sessionId": forked["sessionId"]})
        await sidecar.call("session/delete", {"sessionId": forked["sessionId"]})
        assert Path(opened["_meta"]["worktree"]["path"]).is_dir()
    finally:
        await sidecar.close()


async def test_a_fork_in_place_on_another_host_is_refused_naming_it(
    tmp_path: Path, repo: Path
) -> None:
    data = tmp_path / "data"
    opened = await closed_on_host(data, repo, "alpha")
    sid, path = opened["sessionId"], opened["_meta"]["worktree"]["path"]
    beta = await Sidecar.start(data, "--host-id", "beta", env=GIT_ENV)
    try:
        with pytest.raises(RpcError) as caught:
            await beta.call("session/fork", {"sessionId": sid, "cwd": path, "mcpServers": []})
        assert caught.value.code == -32045 and "on host alpha" in str(caught.value)
        listed = (await beta.call("session/list", {}))["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]  # no fork was stored
        assert sorted(p.name for p in Path(f"{repo}.worktrees").iterdir()) == [Path(path).name]
    finally:
        await beta.close()
