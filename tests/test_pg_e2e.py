"""Sidecars on many hosts, one PostgreSQL database: real processes, a real server.

What is checked: each host sees the others' sessions (with `heldBy`) and hears of their
changes without polling; a row lock held on one session delays no other request and
ends in a clear store error; a database that goes away and comes back, or kills our
connections, is reconnected without a restart; unusable URLs give clear errors and the
sidecar stays up; the password is never said; a session's worktree is used only on the
host that made it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pg_sidecars
import psycopg
import pytest
from harness import Sidecar
from pg_server import PgServer
from pg_sidecars import log_of, state_of
from test_worktree_sessions_e2e import GIT_ENV, git

from desktop.client import RpcError
from protocol.errors import ErrorCode
from sidecar.store.postgres_schema import MIGRATIONS


async def test_two_hosts_see_each_others_sessions_and_stay_in_step(
    tmp_path: Path, workspace: Path, pg_url: str
):
    alpha = await pg_sidecars.start(tmp_path, pg_url, "alpha")
    beta = await pg_sidecars.start(tmp_path, pg_url, "beta")
    try:
        sid = (await alpha.new_session(workspace, title="on alpha"))["sessionId"]
        held = f"pid {alpha.pid} on alpha"
        # beta's client hears of the new session and of its turn without asking.
        await beta.wait_for(state_of(sid, status="idle", heldBy=held, live=False))
        await alpha.prompt(sid, "hello from alpha")
        await beta.wait_for(state_of(sid, messageCount=2, status="idle"))
        listed = (await beta.call("session/list", {}))["sessions"]
        assert [e["_meta"]["heldBy"] for e in listed if e["sessionId"] == sid] == [held]
        seen = await beta.status(sid)
        assert (seen["live"], seen["heldBy"], seen["title"]) == (False, held, "on alpha")
        for method, params in [
            ("session/resume", {"sessionId": sid, "cwd": str(workspace)}),
            ("session/load", {"sessionId": sid, "cwd": str(workspace)}),
            ("session/close", {"sessionId": sid}),
            ("session/delete", {"sessionId": sid}),
        ]:
            with pytest.raises(RpcError) as refused:
                await beta.call(method, params)
            assert refused.value.code == ErrorCode.RUNTIME_LIVE, method
            assert held in refused.value.message, method
        # A rename on beta reaches alpha's client, where the session is live.
        await beta.call("_session/rename", {"sessionId": sid, "title": "renamed on beta"})
        await alpha.wait_for(state_of(sid, title="renamed on beta", live=True))
        assert (await alpha.status(sid))["generation"] == 1
        # Closed on alpha: beta hears it and takes the session over at once.
        await alpha.call("session/close", {"sessionId": sid})
        await beta.wait_for(state_of(sid, status="closed", heldBy=None))
        resumed = await beta.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        assert resumed["_meta"]["generation"] == 2 and resumed["_meta"]["live"] is True
        await alpha.wait_for(state_of(sid, generation=2, heldBy=f"pid {beta.pid} on beta"))
        assert (await beta.prompt(sid, "now on beta"))["stopReason"] == "end_turn"
        texts = [m["text"] for m in (await alpha.messages(sid))["messages"]]
        assert texts == [
            "hello from alpha",
            "Echo: hello from alpha",
            "now on beta",
            "Echo: now on beta",
        ]
    finally:
        await alpha.close()
        await beta.close()


async def test_a_locked_session_delays_no_other_request_and_times_out_clearly(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_database: str, pg_url: str
):
    sidecar = await pg_sidecars.start(tmp_path, pg_url, "alpha", "--db-timeout", "4")
    try:
        locked = (await sidecar.new_session(workspace, title="locked"))["sessionId"]
        free = (await sidecar.new_session(workspace, title="free"))["sessionId"]
        url, token = await sidecar.endpoint(free)
        async with (
            await psycopg.AsyncConnection.connect(pg_url) as holder,
            holder.transaction(),
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        ):
            await holder.execute(
                "SELECT 1 FROM sidecar.sessions WHERE id = %s FOR UPDATE", (locked,)
            )
            rename = asyncio.ensure_future(
                sidecar.call("_session/rename", {"sessionId": locked, "title": "waits"})
            )
            blocked_turn = sidecar.prompt_task(locked, "waits too")
            # While both wait for the row lock, everything else is served.
            assert (await sidecar.prompt(free, "not delayed"))["stopReason"] == "end_turn"
            assert (await sidecar.status(free))["messageCount"] == 2
            assert (await sidecar.status(locked))["title"] == "locked"  # reads never wait
            listed = {e["sessionId"] for e in (await sidecar.call("session/list", {}))["sessions"]}
            assert listed == {locked, free}
            async with http.get(f"{url}/agent/status") as resp:
                assert resp.status == 200 and (await resp.json())["sessionId"] == free
            assert not rename.done() and not blocked_turn.done()
            for waiting in (rename, blocked_turn):
                with pytest.raises(RpcError) as timed_out:
                    await waiting
                error = timed_out.value
                assert error.code == ErrorCode.STORE_ERROR
                assert f"127.0.0.1:{pg_server.port}/{pg_database}" in error.message
                # Usually the row lock's own timeout; but the second of the two waiters on
                # this row waits twice (for the first waiter's tuple lock, then for the
                # holder), each wait with its own lock timeout, and then the statement's
                # (2x) may come first. Either way the cause is named. (The lease renewal
                # skips a locked row: SKIP LOCKED, the row still counted as held.)
                assert (
                    "locked by another connection" in error.message
                    or "took longer than 8 s (statement_timeout)" in error.message
                ), error.message
                assert pg_server.password not in error.message
        # The lock is gone: the same requests now succeed, nothing half-written.
        assert (await sidecar.status(locked))["messageCount"] == 0
        renamed = await sidecar.call("_session/rename", {"sessionId": locked, "title": "done"})
        assert renamed["title"] == "done"
        assert (await sidecar.prompt(locked, "now"))["stopReason"] == "end_turn"
        assert sidecar.client.process.returncode is None
    finally:
        await sidecar.close()


async def test_a_database_that_goes_away_and_comes_back_needs_no_restart(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_database: str, pg_url: str
):
    alpha = await pg_sidecars.start(tmp_path, pg_url, "alpha", "--db-timeout", "2")
    beta = await pg_sidecars.start(tmp_path, pg_url, "beta", "--db-timeout", "2")
    try:
        sid = (await alpha.new_session(workspace))["sessionId"]
        await alpha.prompt(sid, "before")
        await asyncio.to_thread(pg_server.pause)
        try:
            for request in (
                alpha.status(sid),
                alpha.prompt(sid, "while it is gone"),
                alpha.call("session/list", {}),
            ):
                with pytest.raises(RpcError) as failed:
                    await request
                assert failed.value.code == ErrorCode.STORE_ERROR
                assert f"127.0.0.1:{pg_server.port}/{pg_database}" in failed.value.message
                assert "connection failed" in failed.value.message
                assert pg_server.password not in failed.value.message
            assert alpha.client.process.returncode is None
        finally:
            await asyncio.to_thread(pg_server.restart)
        # Back, without restarting anything: what was acknowledged is there.
        assert (await alpha.status(sid))["messageCount"] == 2
        assert (await alpha.prompt(sid, "after"))["stopReason"] == "end_turn"
        texts = [m["text"] for m in (await alpha.messages(sid))["messages"]]
        assert texts == ["before", "Echo: before", "after", "Echo: after"]
        # The change feeds reconnected too: each host hears of the other's work again.
        theirs = (await beta.new_session(workspace, title="after the restart"))["sessionId"]
        await alpha.wait_for(state_of(theirs, title="after the restart"))
        await alpha.prompt(sid, "heard?")
        await beta.wait_for(state_of(sid, messageCount=6))
        assert pg_server.password not in log_of(alpha) + log_of(beta)
    finally:
        await alpha.close()
        await beta.close()


async def test_connections_killed_by_the_server_are_replaced_unnoticed(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_database: str, pg_url: str
):
    alpha = await pg_sidecars.start(tmp_path, pg_url, "alpha")
    beta = await pg_sidecars.start(tmp_path, pg_url, "beta")
    try:
        sid = (await alpha.new_session(workspace))["sessionId"]
        await alpha.prompt(sid, "before")
        killed = await asyncio.to_thread(pg_server.terminate_backends, pg_database)
        assert killed >= 4  # each sidecar's pool and change feed
        # The pool checks a connection before lending it: nobody sees the kill.
        assert (await alpha.prompt(sid, "after"))["stopReason"] == "end_turn"
        assert (await beta.status(sid))["messageCount"] == 4
        other = (await beta.new_session(workspace, title="after the kill"))["sessionId"]
        await alpha.wait_for(state_of(other, title="after the kill"))
        await alpha.call("_session/rename", {"sessionId": sid, "title": "heard on beta"})
        await beta.wait_for(state_of(sid, title="heard on beta"))
    finally:
        await alpha.close()
        await beta.close()


async def assert_store_errors_but_stays_up(sidecar: Sidecar, workspace: Path, needles: list[str]):
    init = await sidecar.call("initialize", {"protocolVersion": 1})
    problem = init["_meta"]["storeError"]
    for needle in needles:
        assert needle in problem, (needle, problem)
    for method, params in [
        ("session/list", {}),
        ("session/new", {"cwd": str(workspace), "mcpServers": []}),
        ("_session/status", {"sessionId": "sess_x"}),
    ]:
        with pytest.raises(RpcError) as failed:
            await sidecar.call(method, params)
        assert failed.value.code == ErrorCode.STORE_ERROR, method
        assert needles[0] in failed.value.message, method
    assert sidecar.client.process.returncode is None  # still up
    return problem


@pytest.mark.parametrize(
    "fault", ["wrong password", "unreachable", "no such database", "malformed"]
)
async def test_an_unusable_database_url_is_reported_and_the_sidecar_stays_up(
    tmp_path: Path, workspace: Path, pg_server: PgServer, fault: str
):
    secret = "not-the-real-password-4711"
    port = pg_server.port
    url, needles = {
        "wrong password": (
            f"postgresql://sidecar:{secret}@127.0.0.1:{port}/sidecar",
            [f"127.0.0.1:{port}/sidecar", "password authentication failed"],
        ),
        "unreachable": (
            f"postgresql://sidecar:{secret}@127.0.0.1:1/sidecar",
            ["127.0.0.1:1/sidecar", "Connection refused"],
        ),
        "no such database": (
            f"postgresql://sidecar:{pg_server.password}@127.0.0.1:{port}/nowhere",
            [f"127.0.0.1:{port}/nowhere", 'database "nowhere" does not exist'],
        ),
        "malformed": (
            f"postgresql://sidecar:{secret}@127.0.0.1:notaport/sidecar",
            ["127.0.0.1:notaport/sidecar", 'invalid integer value "notaport"'],
        ),
        "not a PostgreSQL URL": (
            f"mysql://sidecar:{secret}@127.0.0.1:{port}/sidecar",
            ["invalid database URL", "mysql://sidecar:***@"],
        ),
    }[fault]
    sidecar = await pg_sidecars.start(tmp_path, url, "alpha", "--db-timeout", "2")
    try:
        problem = await assert_store_errors_but_stays_up(sidecar, workspace, needles)
        for password in (secret, pg_server.password):
            assert password not in problem
            assert password not in log_of(sidecar)
    finally:
        assert await sidecar.close() == 0


@pytest.mark.parametrize("source", ["PGPASSWORD", "pgpass file"])
async def test_the_password_may_come_from_the_environment_and_is_never_logged(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_database: str, source: str
):
    url = f"postgresql://sidecar@127.0.0.1:{pg_server.port}/{pg_database}"
    if source == "PGPASSWORD":
        env = {"PGPASSWORD": pg_server.password}
    else:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"127.0.0.1:{pg_server.port}:*:sidecar:{pg_server.password}\n")
        passfile.chmod(0o600)
        env = {"PGPASSFILE": str(passfile)}
    sidecar = await pg_sidecars.start(tmp_path, url, "alpha", env=env)
    try:
        init = await sidecar.call("initialize", {"protocolVersion": 1})
        assert "storeError" not in init.get("_meta", {})
        sid = (await sidecar.new_session(workspace))["sessionId"]
        assert (await sidecar.prompt(sid, "hi"))["stopReason"] == "end_turn"
        assert "sidecar ready" in log_of(sidecar)
        assert pg_server.password not in log_of(sidecar)
    finally:
        await sidecar.close()


async def test_sidecars_starting_at_once_on_an_empty_database_migrate_it_once(
    tmp_path: Path, workspace: Path, pg_url: str
):
    sidecars = await asyncio.gather(
        *(pg_sidecars.start(tmp_path, pg_url, f"host{i}") for i in range(3))
    )
    try:
        for sidecar in sidecars:
            init = await sidecar.call("initialize", {"protocolVersion": 1})
            assert "storeError" not in init.get("_meta", {}), init
        sid = (await sidecars[0].new_session(workspace))["sessionId"]
        assert (await sidecars[2].status(sid))["heldBy"] == f"pid {sidecars[0].pid} on host0"
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            cur = await conn.execute("SELECT version FROM sidecar.schema_version ORDER BY 1")
            assert [v for (v,) in await cur.fetchall()] == [v for v, _ in MIGRATIONS]
        logs = "\n".join(log_of(s) for s in sidecars)
        assert logs.count("schema migrated to version") == 1
    finally:
        for sidecar in sidecars:
            await sidecar.close()


async def test_a_worktree_session_on_a_shared_store_is_used_only_on_its_host(
    tmp_path: Path, pg_url: str
):
    """The worktree is on the disk of the host that made it: another host sharing the
    PostgreSQL store may not resume it (or merge, or delete it with its worktree), and
    is told which host to go to; the record is left as it was."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    alpha = await pg_sidecars.start(tmp_path, pg_url, "alpha", env=GIT_ENV)
    beta = await pg_sidecars.start(tmp_path, pg_url, "beta", env=GIT_ENV)
    try:
        opened = await alpha.call(
            "session/new",
            {"cwd": str(repo), "mcpServers": [], "_meta": {"worktree": True, "approval": "auto"}},
        )
        sid, tree = opened["sessionId"], opened["_meta"]["worktree"]
        await alpha.prompt(sid, "/write work.md made on alpha")
        await alpha.call("session/close", {"sessionId": sid})
        await beta.wait_for(state_of(sid, status="closed", heldBy=None))
        for method, params in [
            ("session/resume", {"sessionId": sid, "cwd": tree["path"]}),
            ("session/load", {"sessionId": sid, "cwd": tree["path"]}),
            ("_session/worktree/merge", {"sessionId": sid}),
            ("session/delete", {"sessionId": sid}),
        ]:
            with pytest.raises(RpcError) as refused:
                await beta.call(method, params)
            assert refused.value.code == ErrorCode.INVALID_STATE, method
            assert "on host alpha" in refused.value.message, (method, refused.value.message)
        seen = await beta.status(sid)
        assert (seen["status"], seen["generation"]) == ("closed", 1)  # nothing half started
        assert seen["worktree"]["path"] == tree["path"]
        assert not (repo / "work.md").exists()  # nothing merged from beta
        resumed = await alpha.call("session/resume", {"sessionId": sid, "cwd": tree["path"]})
        assert resumed["_meta"]["generation"] == 2
        assert Path(tree["path"], "work.md").read_text() == "made on alpha"
    finally:
        await alpha.close()
        await beta.close()
