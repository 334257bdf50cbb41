"""An external agent's process: spawned contained, its stderr kept, stopped in stages.

Why staged and by group: agents that ignore stdin EOF exist (claude-agent-acp while a
session is open, codex-acp always), and one killed by SIGTERM mid-turn has left its
children running. The process is the outer bubblewrap of a PID namespace
(`agent/sandbox.py`), the leader of its own session and group: SIGTERM to the group
reaches the agent (bwrap ignores it), SIGKILL to the group ends the namespace, and with
it everything the agent started, daemons included.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Final

from sidecar.agent.backends.groups import Watchdog

log = logging.getLogger(__name__)

STDERR_LINES: Final = 40  # the tail kept for an error message
STDERR_LINE_CHARS: Final = 400  # each kept line cut to this (an agent may print anything)
READ_LIMIT: Final = 64 * 1024 * 1024  # one stdout line may be this long (an ACP message)
EOF_GRACE: Final = 2.0  # seconds an agent has to exit after its stdin closes
TERM_GRACE: Final = 2.0  # then after SIGTERM, before SIGKILL


class AgentProcess:
    """One running agent (one runtime generation's)."""

    def __init__(
        self, name: str, process: asyncio.subprocess.Process, watchdog: Watchdog | None = None
    ) -> None:
        self.name = name
        self._process = process
        self._watchdog = watchdog  # kills the group if the sidecar dies (even mid-spawn)
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._stderr = asyncio.create_task(self._read_stderr(), name=f"agent {name} stderr")
        self._stopping: asyncio.Task[None] | None = None

    @classmethod
    async def spawn(
        cls, name: str, argv: Sequence[str], env: Mapping[str, str], cwd: str
    ) -> AgentProcess:
        """Start `argv` (already wrapped in the sandbox) as a new session's leader. Raises
        OSError when it cannot start (a missing bwrap or program, no processes left)."""
        watchdog = await Watchdog.start()
        try:
            process = await asyncio.create_subprocess_exec(
                *watchdog.gated(argv),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                limit=READ_LIMIT,
                pass_fds=watchdog.pass_fds,
            )
        except BaseException:
            await watchdog.dismiss()
            raise
        watchdog.arm(process.pid)
        return cls(name, process, watchdog)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self._process.stdout is not None
        return self._process.stdout

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    async def ended(self) -> int:
        """Its exit status, once it has exited and its last stderr lines are read (what
        `describe_exit` says then is complete)."""
        code = await self._process.wait()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([self._stderr], timeout=1.0)
        return code

    def stderr_tail(self, lines: int = 8) -> str:
        """The last lines the agent printed on stderr (for an error message: the agent's
        own words, cut short, after the log's redaction rules in `describe_exit`)."""
        kept = list(self._tail)[-lines:]
        return "\n".join(kept)

    def describe_exit(self) -> str:
        """How the agent ended, for lastError: its exit status and its stderr's tail."""
        code = self._process.returncode
        if code is None:
            how = "stopped answering"
        elif code < 0:
            how = f"was killed by signal {-code}"
        elif code > 128:
            how = f"exited with status {code} (signal {code - 128}?)"
        else:
            how = f"exited with status {code}"
        tail = self.stderr_tail()
        return f"agent {self.name!r} {how}" + (f"; its last output:\n{tail}" if tail else "")

    async def _read_stderr(self) -> None:
        stream = self._process.stderr
        assert stream is not None
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line beyond the limit: its start is lost, go on
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self._tail.append(text[:STDERR_LINE_CHARS])
                log.debug("agent %s: %s", self.name, text[:STDERR_LINE_CHARS])

    def stop(self) -> asyncio.Task[None]:
        """Stop it in stages (stdin EOF, SIGTERM, SIGKILL, each to the whole group);
        idempotent: every caller awaits the same stop."""
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop(), name=f"stop agent {self.name}")
        return self._stopping

    async def _stop(self) -> None:
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        for then, grace in ((signal.SIGTERM, EOF_GRACE), (signal.SIGKILL, TERM_GRACE)):
            if await self._exited_within(grace):
                break
            self._signal_group(then)
        else:
            await self._exited_within(None)
        # The outer bwrap is gone; with --die-with-parent its namespace goes with it. A
        # leftover in the group (never reached: all of it is in the namespace) is killed.
        self._signal_group(signal.SIGKILL)
        if self._watchdog is not None:
            await self._watchdog.dismiss()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([self._stderr], timeout=1.0)
        if not self._stderr.done():
            self._stderr.cancel()

    async def _exited_within(self, seconds: float | None) -> bool:
        try:
            await asyncio.wait_for(asyncio.shield(self._process.wait()), seconds)
        except TimeoutError:
            return False
        return True

    def _signal_group(self, number: signal.Signals) -> None:
        try:
            os.killpg(self._process.pid, number)
        except ProcessLookupError:
            pass  # the group is empty: nothing left to stop
        except PermissionError as exc:  # not ours any more (pid reused): say so, go on
            log.warning("agent %s: cannot signal group %s: %s", self.name, self._process.pid, exc)
