"""Shared fixtures: a data dir, a workspace, and a running sidecar over real pipes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Sidecar  # noqa: E402


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
