"""Leases between hosts on one PostgreSQL database: real sidecars with different host ids.

Across hosts only the lease's expiry says a holder is gone (its pid means nothing
elsewhere), and the expiry is judged on the database's clock: a host whose own clock
is an hour off (SIDECAR_TEST_CLOCK_OFFSET, the test-only fake) neither loses its
sessions at once nor keeps them for an hour after it froze.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pg_sidecars
import pytest
from harness import Sidecar
from pg_sidecars import state_of

from desktop.client import RpcError
from protocol.errors import ErrorCode

TTL = "3"
HOUR = 3600


def resume(sidecar: Sidecar, session_id: str, cwd: Path):
    return sidecar.call("session/resume", {"sessionId": session_id, "cwd": str(cwd)})


async def refused(sidecar: Sidecar, session_id: str, cwd: Path, holder: Sidecar, host: str):
    with pytest.raises(RpcError) as error:
        await resume(sidecar, session_id, cwd)
    assert error.value.code == ErrorCode.RUNTIME_LIVE
    assert f"pid {holder.pid} on {host}" in error.value.message


async def takes_over_once_expired(sidecar: Sidecar, session_id: str, cwd: Path) -> dict:
    """Resume as soon as the lease has expired (a lease of TTL seconds, on the database's
    clock): refused until then, taken after; never an hour later."""
    for _ in range(int(float(TTL) * 10)):
        try:
            return (await resume(sidecar, session_id, cwd))["_meta"]
        except RpcError as error:
            assert error.code == ErrorCode.RUNTIME_LIVE
            await asyncio.sleep(0.5)
    raise AssertionError(f"{session_id} was never taken over")


async def test_leases_hold_between_hosts_whose_clocks_are_an_hour_apart(
    tmp_path: Path, workspace: Path, pg_url: str
):
    behind = await pg_sidecars.start(
        tmp_path, pg_url, "behind", "--lease-ttl", TTL,
        env={"SIDECAR_TEST_CLOCK_OFFSET": str(-HOUR)},
    )  # fmt: skip
    ahead = await pg_sidecars.start(
        tmp_path, pg_url, "ahead", "--lease-ttl", TTL,
        env={"SIDECAR_TEST_CLOCK_OFFSET": str(HOUR)},
    )  # fmt: skip
    try:
        slow = (await behind.new_session(workspace, title="behind"))["sessionId"]
        fast = (await ahead.new_session(workspace, title="ahead"))["sessionId"]
        # Judged on its own clock, "behind"'s lease would look an hour stale to "ahead",
        # and "ahead"'s an hour fresh: both are live and held, for TTL seconds at a time.
        await asyncio.sleep(float(TTL) * 1.5)  # past one lease time: renewals keep them
        await refused(ahead, slow, workspace, behind, "behind")
        await refused(behind, fast, workspace, ahead, "ahead")
        assert (await ahead.status(slow))["heldBy"] == f"pid {behind.pid} on behind"
        assert (await behind.status(fast))["heldBy"] == f"pid {ahead.pid} on ahead"
        # "ahead" freezes: "behind" takes its session once the lease runs out, not in an hour.
        os.kill(ahead.pid, signal.SIGSTOP)
        try:
            await refused(behind, fast, workspace, ahead, "ahead")
            taken = await takes_over_once_expired(behind, fast, workspace)
            assert taken["generation"] == 2 and taken["live"] is True
        finally:
            os.kill(ahead.pid, signal.SIGCONT)
        # The old holder wakes up: its write is fenced, and it lets go of its runtime.
        with pytest.raises(RpcError) as stale:
            await ahead.prompt(fast, "late write from the frozen holder")
        assert stale.value.code in (ErrorCode.SESSION_NOT_LIVE, ErrorCode.INVALID_STATE)
        assert (await behind.prompt(fast, "from the new holder"))["stopReason"] == "end_turn"
        await ahead.wait_for(state_of(fast, live=False, heldBy=f"pid {behind.pid} on behind"))
        texts = [m["text"] for m in (await behind.messages(fast))["messages"]]
        assert texts == ["from the new holder", "Echo: from the new holder"]
        # And the other way round: "behind" freezes, "ahead" takes over after TTL.
        os.kill(behind.pid, signal.SIGSTOP)
        try:
            taken = await takes_over_once_expired(ahead, slow, workspace)
            assert taken["generation"] == 2
        finally:
            os.kill(behind.pid, signal.SIGCONT)
    finally:
        await behind.close()
        await ahead.close()


async def test_a_dead_holder_is_known_at_once_on_its_host_and_by_expiry_elsewhere(
    tmp_path: Path, workspace: Path, pg_url: str
):
    doomed = await pg_sidecars.start(tmp_path, pg_url, "alpha", "--lease-ttl", TTL)
    neighbour = await pg_sidecars.start(tmp_path, pg_url, "alpha", "--lease-ttl", TTL)
    remote = await pg_sidecars.start(tmp_path, pg_url, "beta", "--lease-ttl", TTL)
    try:
        here = (await doomed.new_session(workspace, title="for the neighbour"))["sessionId"]
        there = (await doomed.new_session(workspace, title="for the remote"))["sessionId"]
        await doomed.prompt(there, "before the crash")
        doomed.sigkill()
        await doomed.wait_exit()
        # Another host cannot see the pid: only the expiry tells it the holder is gone.
        await refused(remote, there, workspace, doomed, "alpha")
        # The same host sees the pid is gone and takes over at once.
        summary = (await resume(neighbour, here, workspace))["_meta"]
        assert summary["generation"] == 2 and summary["live"] is True
        taken = await takes_over_once_expired(remote, there, workspace)
        assert taken["generation"] == 2
        assert (await remote.messages(there))["total"] == 2  # nothing acknowledged lost
    finally:
        await neighbour.close()
        await remote.close()
