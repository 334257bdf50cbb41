"""Run one shell command through pipes, in its own process group.

The command owns a fresh process group (`start_new_session=True`), so stopping
it means signalling the group: background children (`sleep 1000 &`) go too.
Stopping is staged: SIGTERM to the group, a grace period, then SIGKILL. It
happens on timeout, on cancellation (the turn was cancelled or the session
closed) and after a normal exit if the command left anything running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class CommandLimits:
    timeout: float = 600.0  # seconds a command may run
    output_cap: int = 64 * 1024  # bytes of output kept for the model and the transcript
    kill_grace: float = 2.0  # seconds between SIGTERM and SIGKILL
    drain_grace: float = 0.2  # after exit, how long leftover writers may keep the pipe open


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None  # None when the command was killed by us
    output: str
    truncated: bool
    timed_out: bool


def _group_alive(pgid: int) -> bool:
    """True while any non-zombie process is left in the group.

    killpg(pgid, 0) alone is not enough: where PID 1 does not reap (containers,
    micro-VMs), dead grandchildren stay zombies and would look alive forever.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no procfs: trust killpg
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


async def stop_group(proc: asyncio.subprocess.Process, pgid: int, grace: float) -> None:
    """SIGTERM the group, wait up to `grace`, SIGKILL what is left; reap the leader."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = asyncio.get_running_loop().time() + grace
    try:
        while _group_alive(pgid) and asyncio.get_running_loop().time() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 0.02)
    finally:
        # Also reached when this wind-down is itself cancelled: never leave the group behind.
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
    await proc.wait()


async def run_command(
    command: str,
    cwd: str,
    limits: CommandLimits,
    on_output: Callable[[str], None] | None = None,
) -> CommandResult:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    assert proc.stdout is not None
    kept = bytearray()
    truncated = False
    decoder_tail = b""

    async def pump() -> None:
        nonlocal truncated, decoder_tail
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(READ_CHUNK):
            room = limits.output_cap - len(kept)
            if room > 0:
                kept.extend(chunk[:room])
            if len(chunk) > room:
                truncated = True
            if on_output is not None and room > 0:
                data = decoder_tail + chunk[:room]
                text = data.decode("utf-8", errors="ignore")
                decoder_tail = data[len(text.encode("utf-8")) :][:3]
                if text:
                    on_output(text)

    reader = asyncio.create_task(pump())
    timed_out = False
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        if not timed_out:
            # A finished command may have left children holding the pipe open.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), limits.drain_grace)
    finally:
        # Runs on timeout, on cancellation and on a normal exit with leftovers alike.
        if proc.returncode is None or _group_alive(pgid):
            await stop_group(proc, pgid, limits.kill_grace)
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    output = kept.decode("utf-8", errors="replace")
    exit_code = None if timed_out else proc.returncode
    return CommandResult(exit_code, output, truncated, timed_out)
