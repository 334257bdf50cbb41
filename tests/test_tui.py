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

    def turn(self, line: str, pattern: str) -> re.Match[str]:
        """A prompt whose turn ends: `pattern` seen, then the state line that says so (the
        answer streams before the turn's end is recorded: a command typed in between would
        find the session still running)."""
        found = self.run(line, pattern)
        self.expect(r"\[idle, gen \d+\]")
        return found

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
    tui.turn("hello", r"Echo: hello\n")
    tui.send("$ echo from-tool")
    tui.expect(r"\$ echo from-tool\napprove\? echo from-tool \(in .*, sandbox: workspace\)")
    tui.send("y")
    tui.expect(r"from-tool\n\[exit 0\](.*\n)*\[idle, gen 1\]")
    tui.send("$ exit 3")
    tui.expect(r"approve\? exit 3")
    tui.send("n")
    tui.expect(r"\[refused\]")
    tui.expect(r"not run: the user refused(.*\n)*\[idle, gen 1\]")
    assert tui.row(sid)[:3] == [sid, "idle", "1"]
    assert tui.row(sid)[-1] == str(workspace)


def test_close_resume_and_forget(tui: Tui):
    sid = tui.new_session()
    tui.run(f"/forget {sid}", r"error: .*live runtime; close it first")
    tui.run(f"/close {sid}", rf"closed {sid}")
    assert tui.row(sid)[1:3] == ["closed", "1"]
    tui.run(f"/resume {sid}", rf"resumed {sid} \(idle, gen 2")
    assert tui.row(sid)[1:3] == ["idle", "2"]
    tui.turn("hello again", r"Echo: hello again")
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
    tui.turn("hello", r"Echo: hello")
    tui.run("/mode ask", r"mode set to ask")
    tui.turn("$ ls", r"Tools are not available in this mode")
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
    tui.turn("after", r"Echo: after")
    tui.run("/cancel", r"nothing to cancel")


def test_a_provider_failure_is_shown_and_the_client_carries_on(tui: Tui):
    tui.new_session()
    tui.run("/fail boom", r"error: offline provider: boom")
    tui.turn("hello", r"Echo: hello")  # the next prompt recovers the session first
    tui.run("/fail again", r"error: offline provider: again")
    tui.run("/close", r"closed")
    tui.run("/resume", r"resumed .*gen 3")
    tui.turn("hello", r"Echo: hello")


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


def test_writes_show_their_diff_and_changes_lists_what_a_turn_changed(tui: Tui, workspace: Path):
    (workspace / "poem.txt").write_text("one\ntwo\nthree\n")
    tui.new_session()
    # The approval shows exactly what will be written, as a diff with line numbers.
    tui.send('/edit poem.txt two "2 (two)"')
    tui.expect(
        r"\[edit\] Edit poem.txt\napprove\? Edit poem.txt\n  --- poem.txt\n  \+\+\+ poem.txt\n"
        r"  @@ -1,3 \+1,3 @@\n   one\n  -two\n  \+2 \(two\)\n   three\n  y once"
    )
    tui.send("y")
    tui.expect(r"\[done\] Wrote poem.txt \(3 lines\)\.")
    tui.expect(r"\[turn 1 changed 1 file\(s\): poem.txt \+1 -1; /changes 1 shows the diff")
    tui.expect(r"\[idle, gen 1\]")
    assert (workspace / "poem.txt").read_text() == "one\n2 (two)\nthree\n"
    # "Always" makes a rule; the next write to that file is not asked about, and its tool
    # card shows the diff instead.
    tui.send("/write notes.txt first line")
    tui.expect(r"approve\? Write notes.txt\n  --- /dev/null\n  \+\+\+ notes.txt\n")
    tui.send("a")
    tui.expect(r"\[turn 2 changed 1 file\(s\): notes.txt \+1 -0")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("/write notes.txt second line")
    tui.expect(
        r"\[edit\] Write notes.txt\n\[done\] Wrote notes.txt \(1 lines?\)\.\n  --- notes.txt\n"
        r"  \+\+\+ notes.txt\n  @@ -1 \+1 @@\n  -first line\n  \+second line\n"
    )
    tui.expect(r"\[turn 3 changed 1 file\(s\): notes.txt \+1 -1")
    tui.expect(r"\[idle, gen 1\]")
    assert "approve?" not in tui.output[tui.mark :]
    tui.run(
        "/changes 1",
        r"turn 1 changed 1 file\(s\):\n  M poem.txt \+1 -1\ndiff --git a/poem.txt b/poem.txt\n"
        r"(.*\n)*?@@ -1,3 \+1,3 @@\n one\n-two\n\+2 \(two\)\n three\n",
    )
    tui.run("/changes", r"turn 3 changed 1 file\(s\):\n  M notes.txt \+1 -1\n")
    tui.send("/read poem.txt")  # reads change nothing: no changes line for the turn
    tui.expect(r"\[read\] Read poem.txt\n\[done\] (.*\n)*\[idle, gen 1\]")
    tui.run("/changes", r"turn 4 changed no files")
    tui.run("/changes 9", r"error: .*no turn 9")
    tui.run("/changes last", r"error: usage: /changes \[TURN\]")


def test_rewind_shows_the_plan_and_asks_then_restores_the_files(tui: Tui, workspace: Path):
    notes, extra = workspace / "notes.txt", workspace / "extra.txt"
    tui.new_session()
    tui.send("/write notes.txt first version")
    tui.expect(r"approve\? Write notes.txt")
    tui.send("a")  # a rule: later writes of notes.txt are not asked about
    tui.expect(r"\[turn 1 changed")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("/write notes.txt second version")
    tui.expect(r"\[turn 2 changed")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("/write extra.txt made in turn 3")
    tui.expect(r"approve\? Write extra.txt")
    tui.send("y")
    tui.expect(r"\[turn 3 changed")
    tui.expect(r"\[idle, gen 1\]")
    tui.run("/rewind", r"  turn 1: /write notes.txt first version\n  turn 2: .*\n  turn 3: .*\n")

    # The dry run's plan, then y/n: n (or anything else) changes nothing.
    plan = r"rewind the files to before turn 2:\n  restore notes.txt\n  remove  extra.txt\ngo ahead\? y/n"
    tui.run("/rewind 2 code", plan)
    tui.run("n", r"\[rewind not done\]")
    tui.run("/rewind 2 code", plan)
    tui.run("hello", r"\[rewind not done\]\n(.*\n)*Echo: hello(.*\n)*\[idle, gen 1\]")  # a prompt
    assert notes.read_text() == "second version" and extra.exists()
    tui.run("/rewind 2 code", plan)
    tui.run("y", r"rewound:\n  restore notes.txt\n  remove  extra.txt\n\(/rewind undo takes")
    assert notes.read_text() == "first version" and not extra.exists()

    # A file changed outside the session since is left alone unless forced.
    notes.write_text("the user's own words\n")
    tui.run(
        "/rewind 1",
        r"rewind files and conversation to before turn 1:\n  conversation: the model no "
        r"longer sees turn 1 and later ones.*\n  conflict notes.txt: changed outside the "
        r"session since the session last changed it; left alone \(--force overwrites\)\n"
        r"go ahead\? y/n",
    )
    tui.run("y", r"rewound:\n  conversation: ")
    assert notes.read_text() == "the user's own words\n"
    tui.run("/rewind 1 code --force --yes", r"rewound:\n  remove  notes.txt\n  conflict notes.txt")
    assert not notes.exists()
    tui.run("/rewind undo --yes", r"rewound:\n  restore notes.txt\n")
    assert notes.read_text() == "the user's own words\n"
    tui.run("/rewind 9", r"error: .*no turn 9")
    tui.run("/rewind 1 sideways", r"error: usage: /rewind TURN")
    tui.run("/rewind 1 --quietly", r"error: usage: /rewind TURN")
