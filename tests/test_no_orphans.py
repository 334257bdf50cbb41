"""No descendant of the sidecar survives cancel, close or sidecar exit, for both backends.

Every process the sidecar starts inherits a unique marker in its environment; after
each scenario no live (non-zombie) process on the machine may carry it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import harness
import pytest
from harness import Sidecar, eventually

# A grandchild in the background, a child that ignores SIGTERM (and SIGINT), and the
# leader itself blocked in sleep.
STUBBORN = (
    "bash -c 'sleep 1000 & sleep 1000' & "
    "(trap '' TERM INT; sleep 1000) & "
    "echo started > started.txt; sleep 1000"
)


def marked_processes(marker: str) -> list[int]:
    return harness.marked_processes("ORPHAN_MARKER", marker)


async def start_stubborn_turn(
    data_dir: Path, workspace: Path, backend: str
) -> tuple[Sidecar, str, str, asyncio.Task]:
    marker = uuid.uuid4().hex
    sidecar = await Sidecar.start(
        data_dir, "--kill-grace", "0.5", "--interrupt-grace", "0.2", env={"ORPHAN_MARKER": marker}
    )
    sid = (await sidecar.new_session(workspace, backend=backend))["sessionId"]
    turn = sidecar.prompt_task(sid, f"$ {STUBBORN}")
    assert await eventually(lambda: (workspace / "started.txt").exists())
    # The sidecar itself plus bash, two sleeps in the grandchild, the trapped subshell's sleep…
    assert await eventually(lambda: len(marked_processes(marker)) >= 5)
    return sidecar, sid, marker, turn


@pytest.mark.parametrize("backend", ["pipe", "pty"])
@pytest.mark.parametrize("how", ["cancel", "close"])
async def test_no_descendant_survives_cancel_or_close(
    data_dir: Path, workspace: Path, backend: str, how: str
):
    sidecar, sid, marker, turn = await start_stubborn_turn(data_dir, workspace, backend)
    try:
        if how == "cancel":
            await sidecar.call("session/cancel", {"sessionId": sid})
        else:
            await sidecar.call("session/close", {"sessionId": sid})
        assert (await asyncio.wait_for(turn, 15))["stopReason"] == "cancelled"
        survivors = [pid for pid in marked_processes(marker) if pid != sidecar.pid]
        assert survivors == [], f"descendants survived {how}: {survivors}"
    finally:
        await sidecar.close()
    assert marked_processes(marker) == []


@pytest.mark.parametrize("backend", ["pipe", "pty"])
@pytest.mark.parametrize("how", ["stdin", "SIGTERM", "SIGINT"])
async def test_no_descendant_survives_sidecar_exit(
    data_dir: Path, workspace: Path, backend: str, how: str
):
    sidecar, sid, marker, _ = await start_stubborn_turn(data_dir, workspace, backend)
    if how == "stdin":
        code = await sidecar.close()
    else:
        os.kill(sidecar.pid, getattr(signal, how))
        code = await asyncio.wait_for(sidecar.client.process.wait(), 20)
        await sidecar.close()
    assert code == 0
    assert marked_processes(marker) == [], "descendants survived the sidecar's exit"
    # The exit went through close: the record says closed, not interrupted.
    again = await Sidecar.start(data_dir)
    try:
        status = await again.status(sid)
        assert status["status"] == "closed" and status["interrupted"] is False
    finally:
        await again.close()


@pytest.mark.parametrize("backend", ["pipe", "pty"])
async def test_a_command_that_forks_many_children_is_cleaned_up_on_cancel(
    data_dir: Path, workspace: Path, backend: str
):
    marker = uuid.uuid4().hex
    sidecar = await Sidecar.start(
        data_dir, "--kill-grace", "0.5", "--interrupt-grace", "0.2", env={"ORPHAN_MARKER": marker}
    )
    try:
        sid = (await sidecar.new_session(workspace, backend=backend))["sessionId"]
        command = "for i in $(seq 150); do sleep 1000 & done; echo forked > forked.txt; wait"
        turn = sidecar.prompt_task(sid, f"$ {command}")
        assert await eventually(lambda: (workspace / "forked.txt").exists(), timeout=20)
        assert len(marked_processes(marker)) > 150
        await sidecar.call("session/cancel", {"sessionId": sid})
        assert (await asyncio.wait_for(turn, 20))["stopReason"] == "cancelled"
        assert [p for p in marked_processes(marker) if p != sidecar.pid] == []
    finally:
        await sidecar.close()


@pytest.mark.parametrize("backend", ["pipe", "pty"])
async def test_commands_die_with_a_sidecar_killed_by_sigkill(
    data_dir: Path, workspace: Path, backend: str
):
    """Nothing of ours runs after SIGKILL: each command's watchdog stops its group."""
    marker = uuid.uuid4().hex
    sidecar = await Sidecar.start(data_dir, env={"ORPHAN_MARKER": marker})
    sid = (await sidecar.new_session(workspace, backend=backend))["sessionId"]
    command = "trap '' HUP INT TERM; (sleep 1000 &) ; echo started > started.txt; sleep 1000"
    sidecar.prompt_task(sid, f"$ {command}")
    assert await eventually(lambda: (workspace / "started.txt").exists())
    assert await eventually(lambda: len(marked_processes(marker)) >= 3)
    sidecar.sigkill()
    await sidecar.wait_exit()
    assert await eventually(lambda: marked_processes(marker) == []), marked_processes(marker)
