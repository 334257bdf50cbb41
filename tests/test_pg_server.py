"""The throwaway PostgreSQL server the PostgreSQL store's tests stand on.

If these fail, every PostgreSQL test after them would fail for the wrong reason, so they pin
the helper's contract: it starts quickly, its URLs connect (and a wrong password really is
refused), restart keeps data, terminate_backends breaks connections, and no postgres process
outlives stop() or even a SIGKILLed owner.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_server import PgServer, PgServerError

# `pg_server` (one server for the whole test session) comes from conftest.py.


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A private server for tests that stop or kill it."""
    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


def mentioning(text: str) -> list[int]:
    """Live processes whose command line mentions ``text`` (independent of PgServer)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_starts_quickly_and_runs_as_postgres(pg_server: PgServer):
    assert pg_server.is_running()
    assert pg_server.startup_seconds < 10, pg_server.startup_seconds  # ~1-1.5 s; slack for CI
    assert pg_server.url == (
        f"postgresql://sidecar:{pg_server.password}@127.0.0.1:{pg_server.port}/sidecar"
    )
    pids = mentioning(str(pg_server.data_dir))
    assert pg_server.postmaster_pid() in pids
    assert len(pids) >= 4  # postmaster, checkpointer, background writer, walwriter, ...
    if os.geteuid() == 0:
        assert all(os.stat(f"/proc/{pid}").st_uid != 0 for pid in pids)


async def test_url_connects_with_async_psycopg(pg_server: PgServer):
    async with await psycopg.AsyncConnection.connect(pg_server.url) as conn:
        cur = await conn.execute(
            "SELECT current_user, current_database(), inet_server_port(), current_setting('fsync')"
        )
        assert await cur.fetchone() == ("sidecar", "sidecar", pg_server.port, "off")


async def test_superuser_url_uses_the_socket(pg_server: PgServer):
    async with await psycopg.AsyncConnection.connect(pg_server.superuser_url) as conn:
        cur = await conn.execute("SELECT current_user, inet_server_port() IS NULL")
        assert await cur.fetchone() == ("postgres", True)  # NULL port: a Unix socket


async def test_wrong_password_is_refused(pg_server: PgServer):
    wrong = pg_server.url.replace(pg_server.password, "not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        await psycopg.AsyncConnection.connect(wrong)
    no_password = pg_server.url.replace(f":{pg_server.password}@", "@")
    with pytest.raises(psycopg.OperationalError, match="password"):
        await psycopg.AsyncConnection.connect(no_password, passfile="/nonexistent")


async def test_create_database_gives_a_fresh_database(pg_server: PgServer):
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = pg_server.create_database(name)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        assert await (await conn.execute("SELECT current_database()")).fetchone() == (name,)
        await conn.execute("CREATE TABLE t (x int)")  # the sidecar role owns the database
    pg_server.drop_database(name)
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        await psycopg.AsyncConnection.connect(url)


async def test_restart_keeps_data_and_breaks_old_connections(pg_server: PgServer):
    url = pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute("CREATE TABLE kept (x int)")
    await conn.execute("INSERT INTO kept VALUES (1), (2), (3)")
    await asyncio.to_thread(pg_server.restart)
    with pytest.raises(psycopg.OperationalError):
        await conn.execute("SELECT 1")
    assert conn.closed
    async with await psycopg.AsyncConnection.connect(url) as fresh:
        cur = await fresh.execute("SELECT count(*) FROM kept")
        assert await cur.fetchone() == (3,)


async def test_terminate_backends_kills_connections(pg_server: PgServer):
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = pg_server.create_database(name)
    other = await psycopg.AsyncConnection.connect(pg_server.url)  # another database: spared
    victims = [await psycopg.AsyncConnection.connect(url) for _ in range(2)]
    assert await asyncio.to_thread(pg_server.terminate_backends, name) == 2
    for victim in victims:
        with pytest.raises(psycopg.OperationalError, match="terminat"):
            await victim.execute("SELECT 1")
    assert await (await other.execute("SELECT 1")).fetchone() == (1,)
    await other.close()


async def test_kill_and_restart_of_a_durable_server_keeps_commits(tmp_path: Path):
    # Under the default synchronous_commit=off, commits from the last few hundred ms may
    # vanish on kill(); durable=True keeps them. The base_dir must be reachable by `postgres`.
    with PgServer.start(Path("/tmp"), durable=True) as server:
        async with await psycopg.AsyncConnection.connect(server.url, autocommit=True) as conn:
            cur = await conn.execute("SHOW synchronous_commit")
            assert await cur.fetchone() == ("on",)
            await conn.execute("CREATE TABLE t (x int)")
            for i in range(50):
                await conn.execute("INSERT INTO t VALUES (%s)", (i,))
            await asyncio.to_thread(server.kill)
        assert not server.is_running()
        await asyncio.to_thread(server.restart)
        async with await psycopg.AsyncConnection.connect(server.url) as conn:
            assert await (await conn.execute("SELECT count(*) FROM t")).fetchone() == (50,)


async def test_stop_leaves_no_postgres_process(own_server: PgServer):
    conn = await psycopg.AsyncConnection.connect(own_server.url)  # a live backend too
    pids = mentioning(str(own_server.data_dir))
    assert own_server.postmaster_pid() in pids
    assert len(pids) >= 5
    await asyncio.to_thread(own_server.stop)
    assert mentioning(str(own_server.data_dir)) == []
    assert not any(alive(pid) for pid in pids)
    assert not own_server.root.exists()
    own_server.stop()  # idempotent
    with pytest.raises(psycopg.OperationalError):
        await conn.execute("SELECT 1")


def test_server_dies_with_a_sigkilled_owner(tmp_path: Path):
    """The watchdog stops the server when its owner dies without running atexit or finally."""
    script = (
        "import json, os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from pg_server import PgServer\n"
        "s = PgServer.start()\n"
        "print(json.dumps([str(s.root), str(s.data_dir), s.processes()]), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    owner = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert owner.returncode == -signal.SIGKILL, owner.stderr
    root, data_dir, pids = json.loads(owner.stdout)
    assert pids
    assert wait_until(lambda: not mentioning(data_dir) and not Path(root).exists())
    assert not any(alive(pid) for pid in pids)


def test_missing_binaries_name_the_package_and_script(tmp_path: Path):
    with pytest.raises(PgServerError) as info:
        PgServer.start(tmp_path, bindir=tmp_path / "no-such-bin")
    message = str(info.value)
    assert "`postgresql`" in message
    assert "scripts/install-system-deps.sh" in message
    assert list(tmp_path.iterdir()) == []  # nothing created before the check
