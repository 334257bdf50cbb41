"""Run one shell command in a real pseudo-terminal, for `pty` sessions.

The command gets a fresh PTY (ptyprocess: new session, the PTY as its
controlling terminal, `TERM` set), so `isatty()` is true, colours and window
size work, and Ctrl-C semantics hold: stopping starts with SIGINT to the
group (see groups.py). A resize reaches running commands through the kernel
(TIOCSWINSZ on the master raises SIGWINCH in the foreground group).

Output goes to the event stream raw, ANSI sequences included; the model gets
it with those sequences removed and CRLF folded to LF. File descriptors are
never persisted: each command, and each runtime generation, has its own PTY.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ptyprocess import PtyProcess

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
TERM = "xterm-256color"


@dataclass
class Terminal:
    """A session's terminal size, applied to the PTYs of commands running now."""

    rows: int = 24
    cols: int = 80
    _running: set[PtyProcess] = field(default_factory=set)

    def resize(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        for process in list(self._running):
            with contextlib.suppress(OSError):
                process.setwinsize(rows, cols)


async def _reap(pid: int) -> int:
    """Wait for the leader without blocking the loop, then reap it (ptyprocess's child is
    ours to reap: asyncio does not know it)."""
    await process_exited(pid)
    _, status = os.waitpid(pid, 0)  # noqa: ASYNC222 (it has exited: this does not block)
    return os.waitstatus_to_exitcode(status)


async def run_command_pty(
    argv: Sequence[str],
    cwd: str,
    limits: CommandLimits,
    terminal: Terminal,
    output: CommandOutput,
) -> CommandResult:
    env = {**os.environ, "TERM": TERM, "COLUMNS": str(terminal.cols), "LINES": str(terminal.rows)}
    watchdog = await Watchdog.start()  # before the command: see Watchdog
    try:
        process = PtyProcess.spawn(
            watchdog.gated(argv),
            cwd=cwd,
            env=env,
            dimensions=(terminal.rows, terminal.cols),
            pass_fds=watchdog.pass_fds,
        )
    except BaseException:
        await watchdog.dismiss()
        raise
    terminal._running.add(process)
    pgid = process.pid  # the child called setsid(): it leads its own group
    watchdog.arm(pgid)
    loop = asyncio.get_running_loop()
    eof = loop.create_future()
    os.set_blocking(process.fd, False)

    def readable() -> None:
        try:
            chunk = os.read(process.fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the slave side is gone
            chunk = b""
        if not chunk:
            loop.remove_reader(process.fd)
            if not eof.done():
                eof.set_result(None)
            return
        output.feed(chunk)

    loop.add_reader(process.fd, readable)
    leader = asyncio.ensure_future(_reap(process.pid))
    timed_out = False
    exit_code: int | None = None
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                exit_code = await asyncio.shield(leader)
        except TimeoutError:
            timed_out = True
        if not timed_out:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(eof), limits.drain_grace)
    finally:
        try:
            if not leader.done() or group_alive(pgid):
                await stop_group(pgid, limits, lambda: leader)
        finally:
            await watchdog.dismiss()
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(process.fd)
        terminal._running.discard(process)
        with contextlib.suppress(OSError):
            os.close(process.fd)
        process.closed = True  # ptyprocess must not close or signal it again
    if leader.done() and not leader.cancelled() and exit_code is None and not timed_out:
        exit_code = leader.result()
    return CommandResult(
        None if timed_out else exit_code, output.text(), output.truncated, timed_out
    )
