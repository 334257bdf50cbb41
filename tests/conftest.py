"""Shared fixtures: a data dir, a workspace, a running sidecar over real pipes, and one
real PostgreSQL server for the whole test session (a fresh database per test)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Sidecar  # noqa: E402
from pg_server import PgServer  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator:
    """In CI (`CI` set; .ci/run sets it) a skipped test is a failure: every dependency a
    test needs is installed by the project's own files, so a skip there means one is
    missing or broken, and a green run must not hide it."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every test: {reason}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
async def sidecar(data_dir: Path) -> AsyncIterator[Sidecar]:
    running = await Sidecar.start(data_dir)
    try:
        yield running
    finally:
        await running.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Started on first use, stopped at the end. Missing server binaries are an error,
    never a skip (scripts/install-system-deps.sh installs them)."""
    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_database(pg_server: PgServer) -> Iterator[str]:
    """The name of a fresh, empty database owned by the `sidecar` role; dropped after."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    pg_server.create_database(name)
    try:
        yield name
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def pg_url(pg_server: PgServer, pg_database: str) -> str:
    """postgresql://sidecar:PASSWORD@127.0.0.1:PORT/<fresh database>"""
    return pg_server.url_for(pg_database)
