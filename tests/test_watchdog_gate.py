"""A command spawned behind its watchdog's gate (sidecar/agent/backends/groups.py): it
runs only once its group is watched, so a sidecar that dies at any moment of a spawn
leaves nothing running. Real processes; the sidecar's death is what the kernel does
then: every descriptor it held is closed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sidecar.agent.backends.groups import Watchdog, group_alive


async def _spawn(watchdog: Watchdog, marker: Path) -> asyncio.subprocess.Process:
    argv = ["sh", "-c", f'echo ran > "{marker}"; exec sleep 30']
    return await asyncio.create_subprocess_exec(
        *watchdog.gated(argv), start_new_session=True, pass_fds=watchdog.pass_fds
    )


def _die(watchdog: Watchdog) -> None:
    """What the sidecar's death does to the two pipes only it writes."""
    watchdog._close_gate()
    stdin = watchdog._process.stdin
    assert stdin is not None
    stdin.close()


async def test_a_sidecar_gone_before_the_group_is_watched_leaves_a_command_that_never_ran(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    watchdog = await Watchdog.start()
    command = await _spawn(watchdog, marker)
    await asyncio.sleep(0.3)  # the gate waits: the command has not started
    assert not marker.exists()
    _die(watchdog)
    assert await asyncio.wait_for(command.wait(), 10) == 125
    assert not marker.exists()
    assert await asyncio.wait_for(watchdog._process.wait(), 10) == 0  # EOF before a group


async def test_once_armed_the_command_runs_and_the_sidecar_gone_kills_its_group(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    watchdog = await Watchdog.start()
    command = await _spawn(watchdog, marker)
    watchdog.arm(command.pid)
    for _ in range(200):
        if marker.exists():
            break
        await asyncio.sleep(0.02)
    assert marker.read_text() == "ran\n"
    assert watchdog.pass_fds == ()  # the gate's descriptors are ours no more
    _die(watchdog)
    assert await asyncio.wait_for(command.wait(), 10) == -9  # killed by the watchdog
    assert not group_alive(command.pid)


async def test_the_gate_descriptor_does_not_reach_the_command() -> None:
    watchdog = await Watchdog.start()
    probe = 'test -e "/proc/self/fd/$0" && echo open || echo closed'
    argv = watchdog.gated(["sh", "-c", probe, "GATE"])
    (gate,) = watchdog.pass_fds
    argv[-1] = str(gate)
    command = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, start_new_session=True, pass_fds=(gate,)
    )
    watchdog.arm(command.pid)
    out, _ = await command.communicate()
    await watchdog.dismiss()
    assert out.decode().strip() == "closed"


async def test_a_dismissed_watchdog_closes_a_gate_it_never_opened() -> None:
    watchdog = await Watchdog.start()
    watchdog.gated(["true"])
    read, write = watchdog._gate or (-1, -1)
    await watchdog.dismiss()
    for fd in (read, write):
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise AssertionError(f"descriptor {fd} left open")
