"""The terminal client, driven as a real process over pipes (and once over a pty),
against a real sidecar on a temporary data dir with the offline provider."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import pid_alive

ROOT = Path(__file__).resolve().parents[1]
WAIT = 20.0


def tui_command(data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "desktop.tui", "--data-dir", str(data_dir)]


def tui_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


class Tui:
    """One TUI process over pipes; everything it prints is collected by a reader thread."""

    def __init__(self, data_dir: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            tui_command(data_dir),
            cwd=cwd,
            env=tui_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.output = ""
        self.mark = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.sidecar_pid = int(self.expect(r"sidecar ready \(pid (\d+)\)").group(1))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := os.read(self.proc.stdout.fileno(), 65536):
            with self._lock:
                self.output += chunk.decode("utf-8", "replace")

    def send(self, line: str) -> None:
        """Send a line; later expectations only look at what is printed from now on."""
        with self._lock:
            self.mark = len(self.output)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def expect(self, pattern: str, timeout: float = WAIT) -> re.Match[str]:
        """The first match of `pattern` (a regex) in the output since the last send."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                match = re.compile(pattern).search(self.output, self.mark)
            if match:
                return match
            if time.monotonic() > deadline or self.proc.poll() is not None:
                time.sleep(0.1)
                raise AssertionError(f"{pattern!r} not seen; output:\n{self.output[self.mark :]}")
            time.sleep(0.02)

    def run(self, line: str, pattern: str) -> re.Match[str]:
        self.send(line)
        return self.expect(pattern)

    def new_session(self, *args: str) -> str:
        return self.run(" ".join(["/new", *args]), r"created (sess_\w+)").group(1)

    def row(self, session_id: str) -> list[str]:
        """The /sessions row of `session_id`, split in columns ([mark,] id, status, gen, ...)."""
        line = self.run("/sessions", rf"[ *] {session_id} .*\n").group(0)
        return line.lstrip("* ").split()

    def quit(self) -> int:
        self.send("quit")
        return self.proc.wait(WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if pid_alive(self.sidecar_pid):
            os.kill(self.sidecar_pid, signal.SIGKILL)


@pytest.fixture
def tui(data_dir: Path, workspace: Path) -> Iterator[Tui]:
    running = Tui(data_dir, workspace)
    try:
        yield running
    finally:
        running.kill()


def test_prompt_streams_the_answer_and_tool_calls(tui: Tui, workspace: Path):
    sid = tui.new_session()
    tui.run("hello", r"Echo: hello\n")
    tui.send("$ echo from-tool")
    tui.expect(r"\$ echo from-tool\napprove\? echo from-tool \(in .*, sandbox: workspace\)")
    tui.send("y")
    tui.expect(r"from-tool\n\[exit 0\]")
    tui.send("$ exit 3")
    tui.expect(r"approve\? exit 3")
    tui.send("n")
    tui.expect(r"\[refused\]")
    tui.expect(r"not run: the user refused")
    assert tui.row(sid)[:3] == [sid, "idle", "1"]
    assert tui.row(sid)[-1] == str(workspace)


def test_close_resume_and_forget(tui: Tui):
    sid = tui.new_session()
    tui.run(f"/forget {sid}", r"error: .*live runtime; close it first")
    tui.run(f"/close {sid}", rf"closed {sid}")
    assert tui.row(sid)[1:3] == ["closed", "1"]
    tui.run(f"/resume {sid}", rf"resumed {sid} \(idle, gen 2")
    assert tui.row(sid)[1:3] == ["idle", "2"]
    tui.run("hello again", r"Echo: hello again")
    tui.run("/close", rf"closed {sid}")
    tui.run(f"/forget {sid[5:12]}", rf"forgot {sid}")
    tui.run("/sessions", r"no sessions yet")
    tui.run("hello", r"no current session")


def test_mcp_servers_are_added_and_listed_with_their_tools(tui: Tui):
    server = Path(__file__).parent / "mcp_servers" / "basic_server.py"
    tui.run(f"/new --mcp 'basic={sys.executable} {server}'", r"created sess_")
    deadline = time.monotonic() + 30
    while True:
        tui.send("/mcp")
        try:
            tui.expect(r"basic \(stdio\): connected, 9 tools", timeout=2)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    tui.run('//mcp basic echo {"text": "via tui"}', r"`basic__echo` returned:\nvia tui")
    tui.run("/mcp reconnect nothing", r"error: .*no MCP server named 'nothing'")
    tui.run("/new --mcp broken", r"error: usage: /new")


def test_mode_switch_and_errors(tui: Tui):
    first = tui.new_session()
    tui.run("hello", r"Echo: hello")
    tui.run("/mode ask", r"mode set to ask")
    tui.run("$ ls", r"Tools are not available in this mode")
    tui.run("/mode nonsense", r"error: .*modeId")
    tui.run("/switch nope", r"error: no session matches 'nope'")
    second = tui.new_session("plan")
    assert tui.row(second)[1:5] == ["idle", "1", "plan", "pipe"]
    tui.run(f"/switch {first[5:13]}", rf"switched to {first}")
    tui.expect(r"you: hello\nagent: Echo: hello\n")
    tui.run("/switch sess_", r"error: 'sess_' matches 2 sessions")
    tui.run(f"/resume {first}", r"error: .*already live")


def test_cancel_a_running_turn(tui: Tui):
    tui.new_session()
    tui.run("/sleep 30", r"\[running")
    tui.run("again", r"error: .*busy")
    started = time.monotonic()
    tui.run("/cancel", r"\[turn ended: cancelled\]")
    assert time.monotonic() - started < 10
    tui.run("after", r"Echo: after")
    tui.run("/cancel", r"nothing to cancel")


def test_a_provider_failure_is_shown_and_the_client_carries_on(tui: Tui):
    tui.new_session()
    tui.run("/fail boom", r"error: offline provider: boom")
    tui.run("hello", r"Echo: hello")  # the next prompt recovers the session first
    tui.run("/fail again", r"error: offline provider: again")
    tui.run("/close", r"closed")
    tui.run("/resume", r"resumed .*gen 3")
    tui.run("hello", r"Echo: hello")


def test_quit_closes_sessions_and_leaves_no_child(tui: Tui, data_dir: Path, workspace: Path):
    sid = tui.new_session()
    tui.run("/sleep 30", r"\[running")
    assert children(tui.proc.pid) == [tui.sidecar_pid]
    assert tui.quit() == 0
    assert "bye" in tui.output
    deadline = time.monotonic() + 5
    while pid_alive(tui.sidecar_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(tui.sidecar_pid)

    again = Tui(data_dir, workspace)  # the record was kept, closed (not interrupted)
    try:
        assert again.row(sid)[1:3] == ["closed", "1"]
        again.proc.stdin.close()  # type: ignore[union-attr]  # EOF quits too
        assert again.proc.wait(WAIT) == 0
        assert not pid_alive(again.sidecar_pid)
    finally:
        again.kill()


def test_a_sidecar_that_cannot_start_is_reported(data_dir: Path, workspace: Path):
    result = subprocess.run(
        [*tui_command(data_dir), "--no-such-option"],
        cwd=workspace,
        env=tui_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=WAIT,
    )
    assert result.returncode == 1
    assert b"the sidecar did not start (exit code 2)" in result.stderr
    assert b"unrecognized arguments: --no-such-option" in result.stderr


def test_eof_waits_for_the_running_turn(data_dir: Path, workspace: Path):
    result = subprocess.run(
        tui_command(data_dir),
        cwd=workspace,
        env=tui_env(),
        input=b"/new\n/sleep 0.5 done\n",
        capture_output=True,
        timeout=WAIT,
    )
    assert result.returncode == 0, result.stderr
    assert b"Slept 0.5 s. done" in result.stdout


def test_a_dead_sidecar_is_restarted_and_sessions_are_resumable(tui: Tui):
    sid = tui.new_session()
    tui.run("/sleep 30", r"\[running")
    old = tui.sidecar_pid
    os.kill(old, signal.SIGKILL)
    tui.expect(r"error: sidecar exited")  # the running turn's end
    tui.expect(r"sidecar restarted \(pid (\d+)\).*closed and resumable")
    tui.sidecar_pid = children(tui.proc.pid)[0]
    assert tui.sidecar_pid != old
    assert tui.row(sid)[1:3] == ["closed", "1"]
    assert tui.row(sid)[-1] == "[interrupted]"
    tui.run(f"/switch {sid}", r"not live: /resume")
    tui.expect(r"you: /sleep 30\n\[interrupted\]\n")
    tui.run(f"/resume {sid}", r"resumed .*gen 2")
    tui.run("hello", r"Echo: hello")


def test_on_a_terminal(data_dir: Path, workspace: Path):
    master, slave = os.openpty()
    proc = subprocess.Popen(
        tui_command(data_dir),
        cwd=workspace,
        env={**tui_env(), "TERM": "dumb"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def expect(pattern: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + WAIT
        while not re.search(pattern, seen):
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            if not select.select([master], [], [], 0.1)[0]:
                continue
            try:
                seen += os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                time.sleep(0.05)

    try:
        expect(rb"\n> $")
        os.write(master, b"/new\n")
        expect(rb"created sess_\w+.*\r?\nsess_\w{4}> $")
        os.write(master, b"hello tty\n")
        expect(rb"Echo: hello tty")
        expect(rb"sess_\w{4}> $")
        os.write(master, b"/switch sess_\n")  # one prompt, after the whole output
        expect(rb"switched to .*\r?\nyou: hello tty\r?\nagent: Echo: hello tty\r?\nsess_\w{4}> $")
        os.write(master, b"/sleep 30\n")
        expect(rb"\[running, gen 1\]\r?\n$")
        os.write(master, b"/cancel\n")
        expect(rb"\[turn ended: cancelled\]\r?\nsess_\w{4}> $")
        os.write(master, b"quit\n")
        assert proc.wait(WAIT) == 0
        expect(rb"bye")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
