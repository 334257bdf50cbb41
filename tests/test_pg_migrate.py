"""`python -m sidecar migrate`: moving a SQLite store's sessions into PostgreSQL, for real
(real sidecars fill the SQLite store; the command runs as a process; a PostgreSQL sidecar
reads the result)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from harness import Sidecar
from pg_server import PgServer

from desktop.client import SidecarGone
from protocol.values import Backend, Mode, Status
from sidecar.domain.records import SessionRecord
from sidecar.store.blocking import blocking
from sidecar.store.sqlite import SqliteSessionStore

MCP = [{"name": "files", "command": "/nonexistent/mcp-server", "args": ["--x"], "env": []}]
RULES = [{"decision": "allow", "tool": "bash", "match": "prefix", "value": "git log"}]


def run_migrate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", "migrate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


async def fill_sqlite(data_dir: Path, workspace: Path) -> tuple[dict[str, str], Sidecar]:
    """Sessions of every kind a user leaves behind: used, forked, with rules, MCP servers
    and checkpoints, closed, live in a running sidecar (returned, still running), and
    left running by a dead one."""
    sidecar = await Sidecar.start(data_dir)
    made: dict[str, str] = {}
    try:
        result = await sidecar.call(
            "session/new",
            {
                "cwd": str(workspace),
                "mcpServers": MCP,
                "_meta": {"approval": "auto", "title": "used"},
            },
        )
        used = made["used"] = result["sessionId"]
        await sidecar.prompt(used, "/write notes.txt first version")
        await sidecar.prompt(used, "hello")
        await sidecar.call("_session/permissions/set", {"sessionId": used, "rules": RULES})
        fork = await sidecar.call("session/fork", {"sessionId": used, "cwd": str(workspace)})
        made["fork"] = fork["sessionId"]
        made["closed"] = (await sidecar.new_session(workspace, title="closed"))["sessionId"]
        await sidecar.prompt(made["closed"], "bye")
        for sid in (used, made["fork"], made["closed"]):
            await sidecar.call("session/close", {"sessionId": sid})
        made["live"] = (await sidecar.new_session(workspace, title="live"))["sessionId"]
    except BaseException:
        await sidecar.close()
        raise
    doomed = await Sidecar.start(data_dir)
    made["orphan"] = (await doomed.new_session(workspace, title="orphan"))["sessionId"]
    cut_off = doomed.prompt_task(made["orphan"], "/sleep 60")
    await doomed.wait_state(made["orphan"], "running")
    doomed.sigkill()
    await doomed.wait_exit()
    with contextlib.suppress(SidecarGone):
        await cut_off
    return made, sidecar


async def test_migrate_copies_every_session_once_and_a_sidecar_carries_on(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_url: str
):
    data_dir = tmp_path / "data"
    made, running = await fill_sqlite(data_dir, workspace)
    source = f"sqlite:{data_dir / 'sessions.db'}"
    try:
        first = run_migrate("--from", source, "--to", pg_url)
        assert first.returncode == 1, first.stderr  # one session is live: not complete
        out = first.stdout
        assert "5 session(s) in" in out and f"127.0.0.1:{pg_server.port}/" in out
        assert f"{made['live']}: LIVE in pid {running.pid}" in out
        assert f"{made['orphan']}: copied 2 messages (its sidecar is gone" in out
        assert "done: 4 copied, 0 already there, 1 live (not copied)" in out
        assert pg_server.password not in out + first.stderr
    finally:
        await running.close()  # closes "live" cleanly
    second = run_migrate("--from", source, "--to", pg_url)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "done: 1 copied, 4 already there, 0 live (not copied), 0 differing, 0 failed" in (
        second.stdout
    )
    assert f"start the PostgreSQL sidecar on this host with --data-dir {data_dir}" in second.stdout

    # A PostgreSQL sidecar on the same data dir finds everything, checkpoints included.
    sqlite_side = await Sidecar.start(data_dir)
    try:
        expected = {sid: await sqlite_side.status(sid) for sid in made.values()}
        transcripts = {sid: (await sqlite_side.messages(sid))["messages"] for sid in expected}
        order = [e["sessionId"] for e in (await sqlite_side.call("session/list", {}))["sessions"]]
    finally:
        await sqlite_side.close()
    pg = await Sidecar.start(data_dir, "--store", "postgres", "--database-url", pg_url)
    try:
        listed = [e["sessionId"] for e in (await pg.call("session/list", {}))["sessions"]]
        # Newest first in the order they were copied: "live" came in the second run.
        assert listed == [made["live"], *(sid for sid in order if sid != made["live"])]
        for sid, summary in expected.items():
            got = await pg.status(sid)
            for key in ("title", "status", "generation", "messageCount", "turns", "interrupted",
                        "forkedFrom", "usage", "approval", "createdAt", "updatedAt",
                        "version"):  # fmt: skip
                if key in ("updatedAt", "version") and sid == made["orphan"]:
                    continue  # closed by the migration there, by a restart here
                assert got[key] == summary[key], (sid, key)
            assert (await pg.messages(sid))["messages"] == transcripts[sid]
        orphan = await pg.status(made["orphan"])
        assert orphan["status"] == "closed" and orphan["interrupted"] is True
        assert [m.get("kind") for m in transcripts[made["orphan"]]][-1] == "interrupted"
        rules = await pg.call("_session/permissions", {"sessionId": made["used"]})
        assert rules["rules"] == RULES
        assert [s["name"] for s in (await pg.status(made["used"]))["mcpServers"]] == ["files"]
        changes = await pg.call("_session/changes", {"sessionId": made["used"], "turn": 1})
        assert [f["path"] for f in changes["files"]] == ["notes.txt"]
        # Used on PostgreSQL from now on: a later run leaves it alone and says so.
        await pg.call("session/resume", {"sessionId": made["closed"], "cwd": str(workspace)})
        await pg.prompt(made["closed"], "on postgres now")
    finally:
        await pg.close()
    third = run_migrate("--from", source, "--to", pg_url)
    assert third.returncode == 1
    assert f"{made['closed']}: DIFFERS: 4 messages there, 2 here; left alone" in third.stdout
    assert "4 already there" in third.stdout and "1 differing" in third.stdout


def test_migrate_cut_off_anywhere_just_runs_again(tmp_path: Path, pg_url: str):
    db = tmp_path / "data" / "sessions.db"
    store, close = blocking(lambda: SqliteSessionStore(db))
    try:
        for n in range(120):
            sid = f"sess_{n:04d}"
            store.insert(
                SessionRecord(sid, "/w", f"t{n}", Mode.CRAFT, Backend.PIPE, Status.IDLE, 1, n, n)
            )
            for i in range(n % 7):
                store.append_message(sid, 1, {"role": "user", "content": f"{sid} {i}"})
            store.update(sid, 1, status="closed")
    finally:
        close()
    # Kill the first run part-way, after some sessions were reported copied.
    first = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "migrate", "--from", f"sqlite:{db}", "--to", pg_url],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    for line in first.stdout:
        if line.startswith("[40/120]"):
            first.send_signal(signal.SIGKILL)
            break
    first.wait(timeout=60)
    first.stdout.close()
    again = run_migrate("--from", f"sqlite:{db}", "--to", pg_url)
    assert again.returncode == 0, again.stdout + again.stderr
    copied = again.stdout.count(": copied ")
    present = again.stdout.count(": already there")
    assert copied + present == 120 and present >= 40
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT s.id, s.message_count, count(m.idx) FROM sidecar.sessions s"
            " LEFT JOIN sidecar.messages m ON m.session_seq = s.seq GROUP BY s.seq ORDER BY s.seq"
        ).fetchall()
    assert [r[0] for r in rows] == [f"sess_{n:04d}" for n in range(120)]  # once each, in order
    assert all(count == n % 7 == stored for n, (_, stored, count) in enumerate(rows))


@pytest.mark.parametrize("fault", ["no such file", "not sqlite:", "wrong password"])
def test_migrate_says_what_is_wrong(tmp_path: Path, pg_server: PgServer, fault: str):
    db = tmp_path / "data" / "sessions.db"
    _, close = blocking(lambda: SqliteSessionStore(db))
    close()
    secret = "wrong-secret-1234"
    args: dict[str, tuple[list[str], int, str]] = {
        "no such file": (
            ["--from", f"sqlite:{tmp_path / 'none.db'}", "--to", pg_server.url], 1,
            "no SQLite session store at",
        ),
        "not sqlite:": (["--from", str(db), "--to", pg_server.url], 2, "--from must be sqlite:PATH"),
        "wrong password": (
            ["--from", f"sqlite:{db}", "--to", pg_server.url.replace(pg_server.password, secret)],
            1, "password authentication failed",
        ),
    }  # fmt: skip
    argv, code, needle = args[fault]
    done = run_migrate(*argv)
    assert done.returncode == code, done.stdout + done.stderr
    assert needle in done.stderr
    assert secret not in done.stdout + done.stderr
    assert pg_server.password not in done.stdout + done.stderr
