"""Store faults through a real sidecar: a clear error or a migration, never a silent loss,
never a crash (a crashing sidecar would be restarted in a loop by its host)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode
from sidecar.store import migrations


async def assert_store_errors_but_stays_up(sidecar: Sidecar, workspace: Path, needle: str):
    init = await sidecar.call("initialize", {"protocolVersion": 1})
    assert needle in init["_meta"]["storeError"]
    for method, params in [
        ("session/list", {}),
        ("session/new", {"cwd": str(workspace), "mcpServers": []}),
        ("_session/status", {"sessionId": "sess_x"}),
    ]:
        with pytest.raises(RpcError) as failed:
            await sidecar.call(method, params)
        assert failed.value.code == ErrorCode.STORE_ERROR, method
        assert needle in failed.value.message, method
    assert sidecar.client.process.returncode is None  # still up


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (os.urandom(8192), "not a database"),
        (None, "not a session store"),  # a foreign SQLite database
    ],
)
async def test_corrupt_or_foreign_database_is_reported_and_left_alone(
    data_dir: Path, workspace: Path, content: bytes | None, needle: str
):
    data_dir.mkdir(mode=0o700)
    db = data_dir / "sessions.db"
    if content is None:
        with contextlib.closing(sqlite3.connect(db)) as conn, conn:
            conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
            conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    sidecar = await Sidecar.start(data_dir)
    try:
        await assert_store_errors_but_stays_up(sidecar, workspace, needle)
    finally:
        assert await sidecar.close() == 0
    assert db.read_bytes() == before


async def test_database_from_a_newer_sidecar_is_refused(data_dir: Path, workspace: Path):
    first = await Sidecar.start(data_dir)
    sid = (await first.new_session(workspace))["sessionId"]
    await first.close()
    with contextlib.closing(sqlite3.connect(data_dir / "sessions.db")) as conn, conn:
        conn.execute(
            f"INSERT INTO {migrations.VERSION_TABLE} VALUES (?, 0)", (migrations.latest() + 1,)
        )
    sidecar = await Sidecar.start(data_dir)
    try:
        await assert_store_errors_but_stays_up(sidecar, workspace, "newer")
    finally:
        await sidecar.close()
    with contextlib.closing(sqlite3.connect(data_dir / "sessions.db")) as conn:
        assert conn.execute("SELECT id FROM sessions").fetchall() == [(sid,)]


async def test_database_from_an_older_sidecar_is_migrated(data_dir: Path, workspace: Path):
    data_dir.mkdir(mode=0o700)
    with contextlib.closing(sqlite3.connect(data_dir / "sessions.db")) as conn, conn:
        conn.execute(migrations._CREATE_VERSION_TABLE)
        for statement in migrations.split_sql(migrations._V1):
            conn.execute(statement)
        conn.execute(f"INSERT INTO {migrations.VERSION_TABLE} VALUES (1, 0)")
        conn.execute(
            "INSERT INTO sessions (id, cwd, title, mode, backend, status, generation,"
            " created_at, updated_at, message_count) VALUES"
            " ('sess_old', ?, 'from v1', 'craft', 'pipe', 'running', 3, 1.0, 1.0, 1)",
            (str(workspace),),
        )
        conn.execute("INSERT INTO messages VALUES (1, 0, ?)", ('{"role":"user","content":"hi"}',))
    sidecar = await Sidecar.start(data_dir)
    try:
        status = await sidecar.status("sess_old")
        # Migrated, then reconciled: the v1 process that left it running is gone.
        assert status["status"] == "closed" and status["interrupted"] is True
        assert status["generation"] == 3 and status["title"] == "from v1"
        resumed = await sidecar.call(
            "session/resume", {"sessionId": "sess_old", "cwd": str(workspace)}
        )
        assert resumed["_meta"]["generation"] == 4
        assert (await sidecar.messages("sess_old"))["messages"][0]["text"] == "hi"
    finally:
        await sidecar.close()


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` at `path` (needs root, as CI and the dev machines run)."""
    path.mkdir(parents=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        reason = f"cannot mount a tmpfs here: {result.stderr.strip()}"
        if os.environ.get("CI"):  # CI runs as root: there this is a failure, not a skip
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


async def test_full_disk_gives_a_clear_error_and_loses_nothing(tmp_path: Path, workspace: Path):
    with small_filesystem(tmp_path / f"small-{uuid.uuid4().hex[:6]}", "1m") as data_dir:
        sidecar = await Sidecar.start(data_dir)
        try:
            sid = (await sidecar.new_session(workspace))["sessionId"]
            await sidecar.prompt(sid, "fits")
            filler = data_dir / "filler"
            with contextlib.suppress(OSError), filler.open("wb") as handle:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            with pytest.raises(RpcError) as full:
                await sidecar.prompt(sid, "does not fit " + "x" * 200_000)
            assert full.value.code == ErrorCode.STORE_ERROR
            assert "full" in full.value.message
            # Nothing half-written; what was acknowledged is still there.
            page = await sidecar.messages(sid)
            assert [m["text"] for m in page["messages"]] == ["fits", "Echo: fits"]
            # Space comes back: the session recovers through close + resume.
            # The refused prompt left the session idle, its record consistent.
            status = await sidecar.status(sid)
            assert status["status"] == "idle" and status["messageCount"] == 2
            filler.unlink()  # space comes back: the same runtime carries on
            assert (await sidecar.prompt(sid, "again"))["stopReason"] == "end_turn"
            assert (await sidecar.messages(sid))["total"] == 4
        finally:
            assert await sidecar.close() == 0


async def test_read_only_data_dir_gives_clear_errors(tmp_path: Path, workspace: Path):
    with small_filesystem(tmp_path / f"ro-{uuid.uuid4().hex[:6]}", "4m") as data_dir:
        first = await Sidecar.start(data_dir)
        sid = (await first.new_session(workspace))["sessionId"]
        await first.prompt(sid, "written before")
        await first.close()
        subprocess.run(["mount", "-o", "remount,ro", str(data_dir)], check=True)
        sidecar = await Sidecar.start(data_dir)
        try:
            init = await sidecar.call("initialize", {"protocolVersion": 1})
            problem = init.get("_meta", {}).get("storeError", "")
            assert "mounted read-only" in problem and str(data_dir) in problem, init
            with pytest.raises(RpcError) as refused:
                await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
            assert refused.value.code == ErrorCode.STORE_ERROR
            assert sidecar.client.process.returncode is None
        finally:
            assert await sidecar.close() == 0
