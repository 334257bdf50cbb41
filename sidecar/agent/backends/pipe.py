"""Run one command through pipes, as the leader of its own process group.

Used for `pipe` sessions: stdin is /dev/null, stdout and stderr are one pipe. The argv
comes wrapped by `sidecar/agent/sandbox.py` (bubblewrap: a PID namespace nothing can
leave); see groups.py for how the command's processes are stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from sidecar.agent.backends.groups import (
    CommandLimits,
    CommandResult,
    Watchdog,
    group_alive,
    process_exited,
    stop_group,
)
from sidecar.agent.backends.output import CommandOutput

READ_CHUNK = 65536
REAP_POLL = 0.005


async def _reaped(proc: asyncio.subprocess.Process) -> int | None:
    """The leader's exit status, once asyncio's child watcher has reaped it.

    Not `proc.wait()`: in 3.11 that also waits for the pipes to close, which a process
    that left the group could hold open forever (a timeout that never ended the turn).
    """
    await process_exited(proc.pid)
    while proc.returncode is None:
        await asyncio.sleep(REAP_POLL)
    return proc.returncode


async def run_command(
    argv: Sequence[str],
    cwd: str,
    limits: CommandLimits,
    output: CommandOutput,
) -> CommandResult:
    """Run to the end (or the timeout). `output` is the caller's: cancelled, the output so
    far is still in it."""
    watchdog = await Watchdog.start()  # before the command: see Watchdog
    try:
        proc = await asyncio.create_subprocess_exec(
            *watchdog.gated(argv),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=watchdog.pass_fds,
        )
    except BaseException:
        await watchdog.dismiss()
        raise
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    watchdog.arm(pgid)

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            output.feed(chunk)

    reader = asyncio.create_task(pump())
    timed_out = False
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                await process_exited(proc.pid)
        except TimeoutError:
            timed_out = True
        if not timed_out:
            # A finished command may have left children holding the pipe open.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), limits.drain_grace)
    finally:
        # Runs on timeout, on cancellation and on a normal exit with leftovers alike.
        try:
            if group_alive(pgid):
                await stop_group(pgid, limits, lambda: _reaped(proc))
            else:
                await _reaped(proc)
        finally:
            await watchdog.dismiss()
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    exit_code = None if timed_out else proc.returncode
    return CommandResult(exit_code, output.text(), output.truncated, timed_out)
