"""Process groups: the unit a command's processes are stopped in, in stages.

Every command runs as the leader of a fresh session and process group, so one
signal to the group reaches its background children and grandchildren too.
Stopping is staged and every stage is bounded: SIGINT (what Ctrl-C sends; a
cooperative stop) -> `interrupt_grace` -> SIGTERM -> `kill_grace` -> SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandLimits:
    timeout: float = 600.0  # seconds a command may run
    output_cap: int = 64 * 1024  # bytes of output kept for the model and the transcript
    stream_cap: int = 1024 * 1024  # bytes of output streamed to clients as events
    interrupt_grace: float = 0.5  # seconds between SIGINT and SIGTERM
    kill_grace: float = 2.0  # seconds between SIGTERM and SIGKILL
    drain_grace: float = 0.2  # after exit, how long leftover writers may keep output open


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None  # None when the command was stopped by us
    output: str  # for the model: capped (and, from a PTY, without ANSI sequences)
    truncated: bool
    timed_out: bool


def group_alive(pgid: int) -> bool:
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


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


async def process_exited(pid: int) -> None:
    """Return once `pid` has exited, without reaping it (its owner may reap it).

    Needed because asyncio (3.11) finishes `Process.wait()` only after the child's
    pipes close, and a background grandchild can hold them open forever.
    """
    loop = asyncio.get_running_loop()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone (and reaped)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(pidfd, readable)
        try:
            await ready
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return
    while True:  # no pidfd (old kernel, not Linux): poll without reaping
        try:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT  # WNOHANG: never blocks
            if os.waitid(os.P_PID, pid, flags) is not None:  # noqa: ASYNC222
                return
        except ChildProcessError:
            return
        await asyncio.sleep(0.05)


# Reads the group id, then its stdin until EOF, which comes only when the sidecar's end
# closes: the sidecar died (even by SIGKILL, when nothing of ours can run). Then it kills
# the group. EOF before a group id: the sidecar died before the command began.
_WATCHDOG = (
    'read -r group || exit 0; read -r _ignored; kill -s KILL -- "-$group" 2>/dev/null; exit 0'
)


# The command's first process: waits until the sidecar says its group is watched (one
# line on the gate's descriptor), then becomes the command. EOF first means the sidecar
# died before it could say so: the command never starts. bash, not sh: the descriptor's
# number is the sidecar's (often over 9, which dash cannot name).
_GATE = 'read -r _ <&{fd} || exit 125; exec {fd}<&-; exec "$@"'


class Watchdog:
    """Stops a command's process group if the sidecar dies first.

    Cleanup on cancel, close and exit is ours (staged, in `stop_group`); this covers the
    one case where no code of ours runs. It is a tiny `sh` outside the group, fed by a
    pipe whose only writer is the sidecar. It is started before the command, and the
    command is spawned behind a gate (`gated`: a shell that execs the command only once
    told to): `arm` tells the watchdog the group, then opens the gate. So there is no
    moment at which the command runs unwatched: a sidecar killed before `arm` leaves a
    gate that reads EOF and exits, one killed after leaves a watched group (bubblewrap's
    own `--die-with-parent` is set only once bwrap runs, a moment too late for this).
    """

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._gate: tuple[int, int] | None = None  # (read end for the command, write end)

    @classmethod
    async def start(cls) -> Watchdog:
        """Ready to watch a group not yet spawned (`arm` it with the group's id)."""
        return cls(await cls._spawn())

    @classmethod
    async def watch(cls, pgid: int) -> Watchdog:
        """Start watching a group already spawned; if even that fails (no processes or
        descriptors left), the group is killed at once rather than left unwatched."""
        try:
            watchdog = await cls.start()
        except BaseException:
            signal_group(pgid, signal.SIGKILL)
            raise
        watchdog.arm(pgid)
        return watchdog

    def gated(self, argv: Sequence[str]) -> list[str]:
        """`argv` behind the gate `arm` opens; spawn it with `pass_fds=self.pass_fds`."""
        if self._gate is None:
            read, write = os.pipe()
            os.set_inheritable(read, True)
            self._gate = (read, write)
        return ["bash", "-c", _GATE.format(fd=self._gate[0]), "gate", *argv]

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._gate[0],) if self._gate is not None else ()

    def arm(self, pgid: int) -> None:
        """The group to kill if the sidecar dies (written at once: a pipe with room),
        then the gate opened: the command runs from here on."""
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(f"{pgid}\n".encode())
        if self._gate is not None:
            read, write = self._gate
            self._gate = None
            os.close(read)  # the command has its own copy
            try:
                os.write(write, b"\n")
            finally:
                os.close(write)

    def _close_gate(self) -> None:
        if self._gate is not None:
            for fd in self._gate:
                os.close(fd)
            self._gate = None

    @staticmethod
    async def _spawn() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            _WATCHDOG,
            "watchdog",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )

    async def dismiss(self) -> None:
        """The command is over and its group stopped by us (or it never started): end the
        watchdog unfired."""
        self._close_gate()
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()
        await self._process.wait()


async def _wait_group_gone(pgid: int, seconds: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while group_alive(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def stop_group(
    pgid: int, limits: CommandLimits, reap: Callable[[], Awaitable[object]]
) -> None:
    """Staged stop of the whole group, then reap the leader. Never leaves the group behind,
    even when this wind-down is itself cancelled."""
    try:
        for sig, grace in (
            (signal.SIGINT, limits.interrupt_grace),
            (signal.SIGTERM, limits.kill_grace),
        ):
            signal_group(pgid, sig)
            if await _wait_group_gone(pgid, grace):
                break
    finally:
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
    await reap()
