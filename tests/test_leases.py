"""One writer per session across processes: two real sidecars on one data dir."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode
from sidecar.core.leases import default_host_id


async def test_a_session_live_in_one_sidecar_is_refused_by_another(data_dir: Path, workspace: Path):
    first = await Sidecar.start(data_dir)
    second = await Sidecar.start(data_dir)  # both running now, on one store
    try:
        sid = (await first.new_session(workspace))["sessionId"]
        await first.prompt(sid, "owned by the first")
        seen = await second.status(sid)
        assert seen["live"] is False and seen["status"] == "idle"
        assert seen["heldBy"] == f"pid {first.pid} on {default_host_id()}"
        for method, params in [
            ("session/resume", {"sessionId": sid, "cwd": str(workspace)}),
            ("session/load", {"sessionId": sid, "cwd": str(workspace)}),
            ("session/close", {"sessionId": sid}),
            ("session/delete", {"sessionId": sid}),
        ]:
            with pytest.raises(RpcError) as refused:
                await second.call(method, params)
            assert refused.value.code == ErrorCode.RUNTIME_LIVE, method
            assert f"pid {first.pid}" in refused.value.message, method
        # The first keeps working, untouched: same generation, its turn lands.
        assert (await first.prompt(sid, "still mine"))["stopReason"] == "end_turn"
        assert (await first.status(sid))["generation"] == 1
        assert (await first.status(sid))["heldBy"] is None  # not "elsewhere" for its holder
    finally:
        await first.close()
        await second.close()


async def test_startup_reconciles_only_sessions_whose_holder_is_gone(
    data_dir: Path, workspace: Path
):
    alive = await Sidecar.start(data_dir)
    doomed = await Sidecar.start(data_dir)
    try:
        kept = (await alive.new_session(workspace, title="alive"))["sessionId"]
        lost = (await doomed.new_session(workspace, title="doomed"))["sessionId"]
        doomed.seen.clear()
        doomed.prompt_task(lost, "/sleep 60")
        await doomed.wait_state(lost, "running")
        doomed.sigkill()
        await doomed.wait_exit()

        third = await Sidecar.start(data_dir)
        try:
            gone = await third.status(lost)
            assert gone["status"] == "closed" and gone["interrupted"] is True
            still = await third.status(kept)
            assert still["status"] == "idle" and still["heldBy"] is not None
            assert (await alive.prompt(kept, "unaffected"))["stopReason"] == "end_turn"
            # The dead holder's session can be taken over at once.
            resumed = await third.call("session/resume", {"sessionId": lost, "cwd": str(workspace)})
            assert resumed["_meta"]["generation"] == 2 and resumed["_meta"]["live"] is True
        finally:
            await third.close()
    finally:
        await alive.close()


async def test_a_holder_that_died_after_the_other_started_is_taken_over(
    data_dir: Path, workspace: Path
):
    first = await Sidecar.start(data_dir)
    second = await Sidecar.start(data_dir)
    try:
        sid = (await first.new_session(workspace))["sessionId"]
        await first.prompt(sid, "before the crash")
        first.sigkill()
        await first.wait_exit()
        summary = (await second.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
            "_meta"
        ]
        assert summary["generation"] == 2 and summary["status"] == "idle"
        assert (await second.messages(sid))["total"] == 2
    finally:
        await second.close()


async def test_a_frozen_holder_loses_its_lease_and_cannot_write_after_the_takeover(
    data_dir: Path, workspace: Path
):
    # 3 s: long enough that the first refusal below still meets a running lease on a
    # loaded machine; the takeover is then polled for, not slept for.
    frozen = await Sidecar.start(data_dir, "--lease-ttl", "3")
    other = await Sidecar.start(data_dir, "--lease-ttl", "3")
    try:
        sid = (await frozen.new_session(workspace))["sessionId"]
        await frozen.prompt(sid, "from the first holder")
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            with pytest.raises(RpcError) as early:
                await other.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
            assert early.value.code == ErrorCode.RUNTIME_LIVE  # its lease still runs
            taken = await _resume_once_expired(other, sid, workspace)
            assert taken["_meta"]["generation"] == 2
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        # The old holder wakes up: its writes are fenced, and it lets go of its runtime.
        with pytest.raises(RpcError) as stale:
            await frozen.prompt(sid, "late write from the old holder")
        assert stale.value.code in (ErrorCode.SESSION_NOT_LIVE, ErrorCode.INVALID_STATE)
        await _until_not_live(frozen, sid)  # its next renewal notices the takeover
        assert (await other.prompt(sid, "from the new holder"))["stopReason"] == "end_turn"
        contents = [m["text"] for m in (await other.messages(sid))["messages"]]
        assert "late write from the old holder" not in contents
        assert contents[-2:] == ["from the new holder", "Echo: from the new holder"]
        assert (await other.status(sid))["generation"] == 2
    finally:
        await frozen.close()
        await other.close()


async def _resume_once_expired(sidecar: Sidecar, sid: str, workspace: Path) -> dict:
    """Resume as soon as the frozen holder's lease has run out (it cannot renew)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            return await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        except RpcError as exc:
            if exc.code != ErrorCode.RUNTIME_LIVE or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)


async def _until_not_live(sidecar: Sidecar, sid: str) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while (await sidecar.status(sid))["live"]:
        assert asyncio.get_running_loop().time() < deadline, "the old holder kept its runtime"
        await asyncio.sleep(0.2)
