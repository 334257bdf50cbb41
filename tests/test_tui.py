"""The terminal client, driven as a real process over pipes (and once over a pty),
against a real sidecar on a temporary data dir with the offline provider."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from external_agents import AgentSetup
from harness import pid_alive

ROOT = Path(__file__).resolve().parents[1]
WAIT = 45.0


def tui_command(data_dir: Path, *sidecar_args: str) -> list[str]:
    return [sys.executable, "-m", "desktop.tui", "--data-dir", str(data_dir), *sidecar_args]


def tui_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def bare_prefix(sid: str, length: int) -> str:
    """An id prefix without `sess_`, at least `length` characters and extended until it
    holds a letter: a word of digits alone is a listing number in the TUI, not an id."""
    hexpart = sid.removeprefix("sess_")
    end = length
    while hexpart[:end].isdigit():
        end += 1
    return hexpart[:end]


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


CSI = re.compile(rb"\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[^\[\]]")
ROW = re.compile(
    r"(?P<mark>[ *]) +(?P<n>\d+)  (?P<title>.*?) +(?P<status>[a-z]+) +"
    r"(?P<when>just now|\d+[mhd] ago|\d{4}-\d\d-\d\d)  (?P<id>sess_\w+)  (?P<mode>\w+) "
    r"(?P<backend>\w+) gen (?P<gen>\d+)  (?P<cwd>\S+)(?P<notes>.*)\n +(?P<preview>.*)\n"
)


class Screen:
    """Just enough of a terminal to read what prompt_toolkit draws: lines, the cursor,
    cursor moves and erases (the prompt is drawn, erased and drawn again below the output
    printed above it). Nothing scrolls away: `text` is everything still on screen."""

    def __init__(self) -> None:
        self.lines: list[str] = [""]
        self.row = self.col = 0

    def put(self, text: str) -> None:
        for char in text:
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self.row += 1
                if self.row == len(self.lines):
                    self.lines.append("")
            elif char == "\b":
                self.col = max(0, self.col - 1)
            elif char >= " ":
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + char + line[self.col + 1 :]
                self.col += 1

    def feed(self, data: bytes) -> None:
        pos = 0
        for m in CSI.finditer(data):
            self.put(data[pos : m.start()].decode("utf-8", "replace"))
            pos = m.end()
            if m.group(2) is None:
                continue
            arg, final = m.group(1).decode(), m.group(2).decode()
            n = int(arg) if arg.isdigit() else 1
            if final == "A":
                self.row = max(0, self.row - n)
            elif final == "B":
                self.row = min(len(self.lines) - 1, self.row + n)
            elif final == "C":
                self.col += n
            elif final == "D":
                self.col = max(0, self.col - n)
            elif final == "G":
                self.col = n - 1
            elif final in "JK":
                self.lines[self.row] = self.lines[self.row][: self.col]
                if final == "J":
                    del self.lines[self.row + 1 :]
        self.put(data[pos:].decode("utf-8", "replace"))

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.lines)

    def offset_of_row(self) -> int:
        """Where the cursor's line starts in `text`."""
        return sum(len(line.rstrip()) + 1 for line in self.lines[: self.row])


class Tui:
    """One TUI process, over pipes or (`pty=True`) on a terminal, where the line editor
    runs; everything it prints is collected by a reader thread (on a pty: `raw` as it was
    written, `output` as a terminal would show it)."""

    def __init__(
        self,
        data_dir: Path,
        cwd: Path,
        *,
        pty: bool = False,
        size: tuple[int, int] = (24, 80),
        sidecar_args: Sequence[str] = (),
    ) -> None:
        self.pty = pty
        self.raw = b""
        self.screen = Screen()
        if pty:
            self.master, slave = os.openpty()
            set_size(self.master, *size)
            self.proc = subprocess.Popen(
                tui_command(data_dir, *sidecar_args),
                cwd=cwd,
                env={**tui_env(), "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"},
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
            )
            os.close(slave)
        else:
            self.proc = subprocess.Popen(
                tui_command(data_dir, *sidecar_args),
                cwd=cwd,
                env=tui_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        self._output = ""
        self.mark = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.sidecar_pid = int(self.expect(r"sidecar ready \(pid (\d+)\)").group(1))

    @property
    def output(self) -> str:
        with self._lock:
            return self.screen.text if self.pty else self._output

    def _read(self) -> None:
        fd = self.master if self.pty else self.proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                if self.pty:
                    self.raw += chunk
                    self.screen.feed(chunk)
                else:
                    self._output += chunk.decode("utf-8", "replace")

    def write(self, data: bytes) -> None:
        if self.pty:
            os.write(self.master, data)
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def type(self, keys: bytes) -> None:
        """Keys typed on the terminal, without Enter (later expectations: from here)."""
        with self._lock:
            self.mark = self.screen.offset_of_row()
        self.write(keys)

    def send(self, line: str) -> None:
        """Send a line; later expectations only look at what is printed from now on (on
        a pty: from the prompt line the line is typed on)."""
        with self._lock:
            self.mark = self.screen.offset_of_row() if self.pty else len(self._output)
            self.raw_mark = len(self.raw)
        self.write(line.encode() + (b"\r" if self.pty else b"\n"))

    def expect(
        self, pattern: str, timeout: float = WAIT, start: int | None = None
    ) -> re.Match[str]:
        """The first match of `pattern` (a regex) in the output since the last send."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.compile(pattern).search(self.output, self.mark if start is None else start)
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
        """A prompt whose turn ends: `pattern` seen, then the state line that says so
        after it (the answer streams before the turn's end is recorded: a command typed in
        between would find the session still running; and a session restarted for the
        prompt says idle before it runs)."""
        found = self.run(line, pattern)
        self.expect(r"\[idle, gen \d+\]", start=found.end())
        return found

    def new_session(self, *args: str) -> str:
        return self.run(" ".join(["/new", *args]), r"created (sess_\w+)").group(1)

    def row(self, session_id: str) -> dict[str, str]:
        """The /sessions row of `session_id` (and its preview line), by field."""
        line = self.run("/sessions", rf"[ *] +\d+ .* {session_id[:13]} .*\n.*\n").group(0)
        found = ROW.fullmatch(line)
        assert found, line
        return found.groupdict()

    def quit(self) -> int:
        self.send("quit")
        return self.proc.wait(WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if pid_alive(self.sidecar_pid):
            os.kill(self.sidecar_pid, signal.SIGKILL)
        if self.pty:
            self._reader.join(5)
            os.close(self.master)


def set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


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
    row = tui.row(sid)
    assert (row["status"], row["gen"], row["cwd"]) == ("idle", "1", str(workspace))
    assert sid.startswith(row["id"]) and row["title"] == "hello"
    assert row["preview"].startswith("agent: ")


def test_the_agents_plan_is_printed_with_status_marks_when_it_changes(tui: Tui):
    tui.new_session()
    entries = [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Fix the bug", "status": "in_progress", "priority": "medium"},
        {"content": "Write a test", "status": "pending", "priority": "low"},
    ]
    call = "//tool update_plan " + json.dumps({"entries": entries})
    tui.turn(
        call,
        r"plan \(1/3 done\):\n  \[x\] Read the code \(high\)\n  \[~\] Fix the bug\n"
        r"  \[ \] Write a test\n",
    )
    # The same plan again prints nothing; a changed one is printed whole.
    tui.turn(call, r"Plan updated: 3 entries")
    assert "plan (" not in tui.output[tui.mark :], tui.output[tui.mark :]
    entries[1]["status"] = "completed"
    tui.turn(
        "//tool update_plan " + json.dumps({"entries": entries}),
        r"plan \(2/3 done\):\n  \[x\] Read the code \(high\)\n  \[x\] Fix the bug\n",
    )


def test_close_resume_and_forget(tui: Tui):
    sid = tui.new_session()
    tui.run(f"/forget {sid}", rf"close and delete 'Untitled session' \({sid}\) .*\? y/N")
    tui.run("n", r"\[not deleted\]")
    tui.run(f"/close {sid}", rf"closed {sid}")
    assert tui.row(sid)["status"] == "closed"
    tui.run(f"/resume {sid}", rf"resumed {sid} \(idle, gen 2")
    row = tui.row(sid)
    assert (row["status"], row["gen"]) == ("idle", "2")
    tui.turn("hello again", r"Echo: hello again")
    tui.run("/close", rf"closed {sid}")
    tui.run(f"/forget {bare_prefix(sid, 7)}", rf"delete 'hello again' \({sid}\) and its transcript")
    tui.run("y", rf"forgot {sid}")
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
    row = tui.row(second)
    assert (row["status"], row["gen"], row["mode"], row["backend"]) == ("idle", "1", "plan", "pipe")
    tui.run(f"/switch {bare_prefix(first, 8)}", rf"switched to {first}")
    tui.expect(r"you: hello\nagent: Echo: hello\n")
    tui.run("/switch sess_", r"error: 'sess_' matches 2 sessions")
    tui.run(f"/resume {first}", r"error: .*already live")


def test_cancel_a_running_turn(tui: Tui):
    tui.new_session()
    tui.run("//sleep 30", r"\[running")
    tui.run("again", r"\[queue: 1 waiting\]\n  1\. again\n")  # waits, not "busy"
    started = time.monotonic()
    tui.run("/cancel", r"\[turn ended: cancelled\]")
    tui.expect(r"\[queue: 1 waiting, paused\]\n  1\. again\n  /queue run goes on")
    assert time.monotonic() - started < 10
    tui.turn("after", r"Echo: after")  # idle: at once, ahead of the paused queue
    tui.run("/cancel", r"nothing to cancel")


def test_prompts_typed_while_a_turn_runs_wait_in_the_queue_and_can_be_steered(tui: Tui):
    tui.new_session()
    tui.run("//sleep 30", r"\[running")
    tui.run("first queued", r"\[queue: 1 waiting\]\n  1\. first queued\n")
    tui.run("second queued", r"\[queue: 2 waiting\]\n  1\. first queued\n  2\. second queued\n")
    tui.run("third queued", r"\[queue: 3 waiting\]")
    tui.run(
        "/queue edit 2 second, edited",
        r"  1\. first queued\n  2\. second, edited\n  3\. third queued\n",
    )
    tui.run("/queue move 3 1", r"  1\. third queued\n  2\. first queued\n  3\. second, edited\n")
    tui.run("/queue remove 2", r"\[queue: 2 waiting\]\n  1\. third queued\n  2\. second, edited\n")
    tui.run("/queue", r"\[queue: 2 waiting\]\n  1\. third queued\n  2\. second, edited\n")
    tui.run("/queue remove 9", r"error: no queued message '9'")
    tui.run("/queue frobnicate", r"error: usage: /queue")
    tui.run("/help", r"/queue remove N \| edit N TEXT")
    # Stop: the queue is kept, paused; /queue run goes on, in order, each turn shown.
    tui.run("/cancel", r"\[turn ended: cancelled\]")
    tui.expect(r"\[queue: 2 waiting, paused\]")
    tui.run("/queue run", r"you: third queued\n(.*\n)*?Echo: third queued")
    tui.expect(r"you: second, edited\n(.*\n)*?Echo: second, edited")
    tui.expect(r"\[queue: empty\]")
    # /cancel --clear empties it.
    tui.run("//sleep 30", r"\[running")
    tui.run("dropped", r"\[queue: 1 waiting\]")
    tui.run("/cancel --clear", r"\[queue: empty\]")
    tui.expect(r"\[turn ended: cancelled\]")
    # /now: the running turn is cancelled and this one runs next.
    tui.run("//sleep 30", r"\[running")
    tui.run("/now urgent", r"you: urgent\n(.*\n)*?Echo: urgent")
    tui.expect(r"\[idle, gen 1\]")
    assert "dropped" not in tui.output[tui.mark :]


def test_a_provider_failure_is_shown_and_the_client_carries_on(tui: Tui):
    tui.new_session()
    tui.run("//fail boom", r"error: offline provider: boom")
    tui.turn("hello", r"Echo: hello")  # the next prompt recovers the session first
    tui.run("//fail again", r"error: offline provider: again")
    tui.run("/close", r"closed")
    tui.run("/resume", r"resumed .*gen 3")
    tui.turn("hello", r"Echo: hello")


def test_quit_closes_sessions_and_leaves_no_child(tui: Tui, data_dir: Path, workspace: Path):
    sid = tui.new_session()
    tui.run("//sleep 30", r"\[running")
    assert children(tui.proc.pid) == [tui.sidecar_pid]
    assert tui.quit() == 0
    assert "bye" in tui.output
    deadline = time.monotonic() + 5
    while pid_alive(tui.sidecar_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(tui.sidecar_pid)

    again = Tui(data_dir, workspace)  # the record was kept, closed (not interrupted)
    try:
        row = again.row(sid)
        assert (row["status"], row["gen"], row["notes"]) == ("closed", "1", "")
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
        input=b"/new\n//sleep 0.5 done\n",
        capture_output=True,
        timeout=WAIT,
    )
    assert result.returncode == 0, result.stderr
    assert b"Slept 0.5 s. done" in result.stdout


def test_a_dead_sidecar_is_restarted_and_sessions_are_resumable(tui: Tui):
    sid = tui.new_session()
    tui.run("//sleep 30", r"\[running")
    old = tui.sidecar_pid
    os.kill(old, signal.SIGKILL)
    tui.expect(r"error: sidecar exited")  # the running turn's end
    tui.expect(r"sidecar restarted \(pid (\d+)\).*closed and resumable")
    tui.sidecar_pid = children(tui.proc.pid)[0]
    assert tui.sidecar_pid != old
    row = tui.row(sid)
    assert (row["status"], row["gen"], row["notes"]) == ("closed", "1", "  [interrupted]")
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
        os.write(master, b"//sleep 30\n")
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
    tui.send('//edit poem.txt two "2 (two)"')
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
    tui.send("//write notes.txt first line")
    tui.expect(r"approve\? Write notes.txt\n  --- /dev/null\n  \+\+\+ notes.txt\n")
    tui.send("a")
    tui.expect(r"\[turn 2 changed 1 file\(s\): notes.txt \+1 -0")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("//write notes.txt second line")
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
    tui.send("//read poem.txt")  # reads change nothing: no changes line for the turn
    tui.expect(r"\[read\] Read poem.txt\n\[done\] (.*\n)*\[idle, gen 1\]")
    tui.run("/changes", r"turn 4 changed no files")
    tui.run("/changes 9", r"error: .*no turn 9")
    tui.run("/changes last", r"error: usage: /changes \[TURN\]")


def test_rewind_shows_the_plan_and_asks_then_restores_the_files(tui: Tui, workspace: Path):
    notes, extra = workspace / "notes.txt", workspace / "extra.txt"
    tui.new_session()
    tui.send("//write notes.txt first version")
    tui.expect(r"approve\? Write notes.txt")
    tui.send("a")  # a rule: later writes of notes.txt are not asked about
    tui.expect(r"\[turn 1 changed")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("//write notes.txt second version")
    tui.expect(r"\[turn 2 changed")
    tui.expect(r"\[idle, gen 1\]")
    tui.send("//write extra.txt made in turn 3")
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


# ---- the TUI as a daily tool (issue 15, point 15) ----


@pytest.fixture
def tty(data_dir: Path, workspace: Path) -> Iterator[Tui]:
    """The TUI on a real terminal (a pty of 30x120): the line editor runs."""
    running = Tui(data_dir, workspace, pty=True, size=(30, 120))
    try:
        yield running
    finally:
        running.kill()


def test_an_unknown_command_is_answered_here_and_never_sent(tty: Tui):
    sid = tty.new_session()
    tty.run("/sesions", r"unknown command /sesions — did you mean /sessions\?")
    tty.run("/nonsense words", r"unknown command /nonsense; /help lists the commands")
    row = tty.row(sid)  # the provider saw no prompt: nothing in the transcript
    assert row["preview"] == "(no messages yet)" and row["title"] == "Untitled session"
    tty.turn("//sesions please", r"Echo: /sesions please")  # //text: a literal slash
    assert tty.row(sid)["preview"] == "agent: Echo: /sesions please"


def test_sessions_are_numbered_and_picked_by_number(tty: Tui, workspace: Path, tmp_path: Path):
    first = tty.new_session()
    tty.turn("first words", r"Echo: first words")
    project = tmp_path / "project"
    project.mkdir()
    second = tty.run(
        f"/new --cwd {project} --title 'Second one' plan", rf"created (sess_\w+) .*in {project}"
    ).group(1)
    tty.send("/sessions")
    listing = tty.expect(r"/switch N or /resume N picks one").string[tty.mark :]
    rows = [m.groupdict() for m in ROW.finditer(listing)]
    assert [(r["n"], r["mark"]) for r in rows] == [("1", "*"), ("2", " ")]
    assert (rows[0]["title"], rows[0]["mode"], rows[0]["cwd"]) == (
        "Second one",
        "plan",
        str(project),
    )
    assert second.startswith(rows[0]["id"]) and first.startswith(rows[1]["id"])
    assert rows[1]["preview"] == "agent: Echo: first words" and rows[1]["when"] == "just now"
    tty.run("/switch 2", rf"switched to {first}")
    tty.expect(r"you: first words\nagent: Echo: first words\n")
    tty.run("/close 1", rf"closed {second}")
    tty.run("/resume 1", rf"resumed {second} \(idle, gen 2, mode plan\)")
    tty.run("/switch 3", r"error: no session matches '3'")
    # ~ is expanded; a missing directory is refused with what to do.
    home = Path.home()
    tty.run("/new --cwd ~", rf"created sess_\w+ .*in {home}\)")
    tty.run(
        "/new --cwd ~/no/such/dir",
        rf"error: no such directory: {home}/no/such/dir \(give an existing directory to --cwd\)",
    )
    tty.run("/new --title", r"error: usage: /new \[--cwd DIR\]")


def test_the_line_editor_completes_and_keeps_history(data_dir: Path, workspace: Path):
    tty = Tui(data_dir, workspace, pty=True)
    try:
        sid = tty.new_session()
        tty.type(b"/sessi\t")  # Tab completes the command
        tty.expect(r"> /sessions$")
        tty.write(b"\r")
        tty.expect(rf"\*  1  .* {sid[:13]} ")
        tty.type(b"/swi\t")  # a command that takes an argument: a space after it
        tty.expect(r"> /switch")
        tty.write(b"1\r")  # so "1" is its argument, not "/switch1"
        tty.expect(rf"switched to {sid}")
        tty.type(b"/close sess_\t")  # and a session id
        tty.expect(rf"> /close {sid}$")
        tty.write(b"\x15")  # Ctrl-U: not sent
        assert tty.quit() == 0
    finally:
        tty.kill()
    history = (data_dir / "tui-history").read_text()
    assert "/sessions" in history and "/switch 1" in history
    again = Tui(data_dir, workspace, pty=True)  # history survives the client
    try:
        again.expect(r"\n>$")  # the editor's prompt
        for line in ("quit", "/switch 1"):  # up: the last line typed, then the ones before
            again.type(b"\x1b[A")
            again.expect(rf"> {line}$")
        again.type(b"\x1b[A")
        again.expect(r"> /sessions$")
        again.write(b"\r")
        again.expect(rf"  1  .* {sid[:13]} ")
    finally:
        again.kill()


def test_output_arriving_while_typing_is_printed_above_the_prompt(tty: Tui):
    tty.new_session()
    tty.send("//sleep 1 woke")
    tty.write(b"half a li")  # typing while the turn runs and prints
    found = tty.expect(r"Slept 1 s. woke\n(.*\n)*sess_\w{4}> half a li$")
    assert found
    tty.write(b"ne\x15")  # Ctrl-U drops it again
    tty.run("/sessions", r"picks one")


def test_ctrl_c_in_the_line_editor_cancels_the_running_turn(tty: Tui):
    tty.new_session()
    tty.run("//sleep 30", r"\[running, gen 1\]")
    tty.type(b"\x03")
    tty.expect(r"\[cancelling\]")
    tty.expect(r"\[turn ended: cancelled\]")
    tty.type(b"\x03")  # nothing runs: Ctrl-C says how to leave
    tty.expect(r"\(quit or Ctrl-D leaves\)")
    tty.type(b"\x04")  # Ctrl-D on an empty line leaves
    assert tty.proc.wait(WAIT) == 0


def test_the_pty_is_sized_to_the_terminal_and_follows_a_resize(tty: Tui):
    tty.new_session("pty")
    tty.send("$ stty size")
    tty.expect(r"approve\? stty size")
    tty.send("y")
    tty.expect(r"\n30 120\n(.*\n)*\[idle, gen 1\]")
    set_size(tty.master, 40, 100)
    os.kill(tty.proc.pid, signal.SIGWINCH)
    tty.send("$ stty size")
    tty.expect(r"approve\? stty size")
    tty.send("y")
    tty.expect(r"\n40 100\n(.*\n)*\[idle, gen 1\]")


def test_command_output_reaches_the_terminal_with_its_colours_only(tty: Tui):
    tty.new_session()
    tty.send(r"$ printf '\033]0;owned\007\033[2J\033[31mred\033[0m plain\n'")
    tty.expect(r"approve\? printf")
    tty.send("y")
    tty.expect(r"\nred plain\n(.*\n)*\[idle, gen 1\]")
    printed = tty.raw[tty.raw_mark :]
    assert b"\x1b[31mred\x1b[0m plain" in printed
    assert b"\x1b]0;owned" not in printed
    assert b"\x1b[2J" not in printed


def test_long_output_is_collapsed_and_paged_with_output(tui: Tui):
    tui.new_session()
    tui.send("$ seq 1 20000")
    tui.expect(r"approve\? seq 1 20000")
    tui.send("y")
    shown = tui.expect(
        r"(?<!\d)1\n2\n(.*\n)*20\n\.\.\. 19970 line\(s\) not shown \(20000 in all\); /output pages "
        r"through the whole output\n19991\n(.*\n)*20000\n\[exit 0\]"
    )
    assert "\n21\n" not in shown.group(0) and "\n19990\n" not in shown.group(0)
    tui.expect(r"\[idle, gen 1\]")
    page = tui.run(
        "/output", r"\[output, lines 1-200 of 20000, page 1 of 100\]\n1\n(.*\n)*\[/output 2"
    )
    assert "\n200\n" in page.group(0) and "\n201\n" not in page.group(0)
    tui.run("/output 100", r"\[output, lines 19801-20000 of 20000, page 100 of 100\]\n19801\n")
    tui.expect(r"\n20000\n")
    tui.run("/output 101", r"error: no page 101: the output has 100 page\(s\)")


def test_errors_say_what_to_do_and_retry_sends_the_prompt_again(tui: Tui):
    sid = tui.new_session()
    tui.run("//fail boom", r"error: offline provider: boom — /retry to try again or /resume")
    tui.run(
        f"/switch {sid[:12]}", r"failed: offline provider: boom; /retry to try again or /resume"
    )
    tui.run("/retry", r"\[retrying: /fail boom\]\n(.*\n)*error: offline provider: boom")
    tui.run("/resume", rf"resumed {sid} \(idle, gen 3, mode craft\) after its error")
    tui.turn("hello", r"Echo: hello")
    tui.run("/retry", r"\[retrying: hello\]\n(.*\n)*Echo: hello")
    tui.run(f"/resume {sid}", r"error: .* is already live \(idle\)")


def test_forget_asks_first(tui: Tui):
    sid = tui.new_session()
    tui.run("/close", rf"closed {sid}")
    tui.run("/forget 1", rf"delete 'Untitled session' \({sid}\) and its transcript for good\? y/N")
    tui.run("", r"\[not deleted\]")  # Enter alone is no
    assert tui.row(sid)["status"] == "closed"
    tui.run("/forget 1", r"y/N")
    tui.run("yes", rf"forgot {sid}")
    tui.run("/sessions", r"no sessions yet")


def test_a_session_live_in_another_sidecar_shows_its_holder(
    tui: Tui, data_dir: Path, workspace: Path
):
    other = Tui(data_dir, workspace)  # a second client (and sidecar) on the same data dir
    try:
        sid = other.new_session()
        row = tui.row(sid)
        assert row["notes"].startswith("  [live in another sidecar: "), row
        tui.run(
            f"/resume {sid[:12]}", r"error: .* is live in another sidecar \(.*\); close it there"
        )
        tui.run(f"/switch {sid[:12]}", r"live in another sidecar \(.*\): it is read-only here")
    finally:
        other.kill()


def external_agents(root: Path) -> AgentSetup:
    """The scripted agent as `scripted`, and `ghost`: listed, with an install command, but
    its program is nowhere (as a preset not installed, whatever this machine has)."""
    setup = AgentSetup(root)
    setup.add("scripted")
    with setup.file.open("a") as toml:
        toml.write(
            '\n[agents.ghost]\ncommand = ["no-such-agent-acp-program"]\n'
            'install = "npm install -g ghost-agent-acp"\n'
        )
    return setup


@pytest.fixture
def agents_tui(data_dir: Path, workspace: Path, tmp_path: Path) -> Iterator[tuple[Tui, AgentSetup]]:
    setup = external_agents(tmp_path / "agents")
    running = Tui(data_dir, workspace, sidecar_args=setup.args())
    try:
        yield running, setup
    finally:
        running.kill()


def test_agents_lists_each_agent_available_or_how_to_install_it(
    agents_tui: tuple[Tui, AgentSetup],
) -> None:
    tui, _ = agents_tui
    tui.send("/agents")
    listing = tui.expect(r"(?s)  builtin +available  \[builtin\]\n.*/new --agent NAME").group(0)
    lines = {line.split()[0]: line for line in listing.splitlines()[:-1]}
    assert list(lines)[0] == "builtin", "builtin first"
    assert re.fullmatch(
        r"  ghost +not installed: npm install -g ghost-agent-acp  \[config\]", lines["ghost"]
    )
    assert re.fullmatch(
        r"  scripted +available  .*scripted_agent\.py  \[config\]", lines["scripted"]
    )
    assert {"claude", "codex", "gemini", "qwen"} <= set(lines), "the presets are listed too"
    assert "[preset]" in lines["claude"]


def test_new_with_an_agent_runs_its_turns_and_the_list_shows_it(
    agents_tui: tuple[Tui, AgentSetup],
) -> None:
    tui, setup = agents_tui
    sid = tui.run(
        "/new --agent scripted --title Outside",
        r"created (sess_\w+) \(idle, gen 1, mode craft, agent scripted, backend pipe\)",
    ).group(1)
    # The agent's own plan is printed as the builtin's is.
    tui.turn(
        "plan read the code | write the fix",
        r"plan \(0/2 done\):\n  \[~\] read the code\n  \[ \] write the fix\n",
    )
    tui.turn("say hi from agent", r"\nhi from agent\n")
    assert "session/prompt" in setup.methods("scripted"), "the scripted agent ran the turn"
    builtin = tui.new_session("--title", "Ours")
    row = tui.row(sid)
    assert (row["title"], row["status"], row["notes"]) == ("Outside", "idle", "  [agent: scripted]")
    assert row["preview"] == "agent: hi from agent"
    assert tui.row(builtin)["notes"] == "", "the builtin loop is not worth a note"
    # One listed but not installed: how to install it, and no session made.
    tui.run(
        "/new --agent ghost",
        r"error: agent 'ghost' is not installed; install it with: npm install -g ghost-agent-acp",
    )
    tui.run("/sessions", r"/switch N")
    assert tui.output[tui.mark :].count("sess_") == 2
    # An unknown name: the sidecar's refusal, naming the field.
    tui.run("/new --agent nosuch", r"error: .*_meta\.agent.*'nosuch'")
    tui.run("/new --agent", r"error: usage: /new .*--agent NAME")
    tui.run("/help", r"/agents +the agents a session can run")


def test_new_in_a_worktree_merge_and_discard(data_dir: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    who = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    (repo / "README.md").write_text("tui\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*who, "commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    tui = Tui(data_dir, repo)
    try:
        tui.run(
            "/new --branch tui-work --title Tree",
            r"created sess_\w+ \(.*, on branch tui-work in \S+repo\.worktrees/",
        )
        tui.run("//write made.txt in the tree", r"y once · a always")
        tui.turn("y", r"Created made\.txt")
        tui.run("/merge squash", r"merged into main \(squash\): [0-9a-f]{12}")
        assert (repo / "made.txt").read_text() == "in the tree"
        tui.run("/merge sideways", r"usage: /merge \[merge\|squash\|rebase\]")
        tui.run("/close", r"closed sess_\w+")
        tui.run("/discard", r"worktree and branch removed")
        tui.run("/help", r"/merge \[merge\|squash\|rebase\]")
    finally:
        tui.kill()


def mention_files(workspace: Path) -> None:
    """A nested file to mention, an ignored one, and a git repository around them."""
    parser = workspace / "src" / "server" / "request_parser.py"
    parser.parent.mkdir(parents=True)
    parser.write_text("PARSER_BODY = 42\n")
    (workspace / ".gitignore").write_text("*.log\n")
    (workspace / "request_parser.log").write_text("ignored\n")
    (workspace / "my notes.md").write_text("spaced name\n")
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)


def test_at_completes_paths_as_you_type_and_sends_the_file(data_dir: Path, workspace: Path):
    mention_files(workspace)
    tty = Tui(data_dir, workspace, pty=True, size=(30, 120))
    try:
        tty.new_session()
        tty.type(b"explain @reqpars")  # the menu opens by itself: the sidecar's paths
        tty.expect(r"src/server/request_parser\.py")
        assert "request_parser.log" not in tty.output[tty.mark :]  # git-ignored
        tty.write(b"\t")  # Tab takes the first
        tty.expect(r"> explain @src/server/request_parser\.py")
        tty.write(b"\r")
        # The offline model echoes what it got: the text, then the file under its path.
        tty.expect(r"\[file src/server/request_parser\.py\]\s+PARSER_BODY = 42")
        tty.expect(r"\[idle, gen 1\]")
        tty.type(b"and @my")  # a path with a space is completed quoted
        tty.expect(r"my notes\.md")
        tty.write(b"\t")
        tty.expect(r'> and @"my notes\.md"')
        tty.write(b"\r")
        tty.expect(r"\[file my notes\.md\]\s+spaced name")
    finally:
        tty.kill()


def test_mentions_on_a_pipe_name_existing_paths_only(tui: Tui, workspace: Path):
    mention_files(workspace)
    tui.new_session()
    tui.turn(
        "read @src/server/request_parser.py, mail me@example.com, see @missing.py",
        r"PARSER_BODY = 42",
    )
    shown = tui.output[tui.mark :]
    # me@example.com is no mention, and @missing.py names nothing: both stay text.
    assert "[file src/server/request_parser.py]" in shown
    assert "missing.py: not found" not in shown and "example.com]" not in shown


def test_the_queue_is_printed_with_what_each_message_carries_and_why_it_paused() -> None:
    from desktop.tui_queue import queue_lines

    image = {"type": "image", "mimeType": "image/png", "data": "AA=="}
    body = {
        "queue": [
            {"id": "q_1", "prompt": [image]},
            {"id": "q_2", "prompt": [{"type": "text", "text": "look\nhere"}, image, image]},
            *(
                {"id": f"q_{n}", "prompt": [{"type": "text", "text": f"m{n}"}]}
                for n in range(3, 14)
            ),
        ],
        "paused": True,
        "refused": {"id": "q_1", "reason": "the model 'm' is given no images by its provider"},
    }
    lines = queue_lines(body, lambda text: text)
    assert lines[:3] == [
        "[queue: 13 waiting, paused]",
        "  1. [+1 image]  (refused)",
        "  2. look here [+2 images]",
    ]
    assert lines[-2:] == [
        "  ... and 3 more",
        "  a message was not sent: the model 'm' is given no images by its provider;"
        " /queue edit or remove it, then /queue run",
    ]
    assert queue_lines({"queue": [], "paused": False}, str) == ["[queue: empty]"]
