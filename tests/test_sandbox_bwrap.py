"""The bubblewrap sandbox, against real bwrap and real processes.

Each policy claim is checked from both sides: the command's view inside, and the host's
disk, sockets and process table outside. Processes are found by a unique marker in their
environment; zombies count as dead (PID 1 here does not reap orphans).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest
from ptyprocess import PtyProcess

from sidecar.agent.sandbox import (
    SandboxMode,
    SandboxStatus,
    SandboxUnavailable,
    probe,
    require,
    wrap,
)

RO, WS, OFF = SandboxMode.READ_ONLY, SandboxMode.WORKSPACE, SandboxMode.OFF
TIMEOUT = 20.0
MARKER_VAR = "SANDBOX_TEST_MARKER"
STATUS = probe()
BWRAP = STATUS.bwrap or "bwrap"
needs_bwrap = pytest.mark.skipif(not STATUS.available, reason=STATUS.reason or "")

# Commands inside the sandbox see a private /tmp: a virtualenv in a checkout under /tmp
# would be hidden there, so they run the interpreter it links to (the stdlib is enough).
PYTHON = os.path.realpath(sys.executable)

# Leaves three kinds of escapee behind, each in a different way out of the group:
# a new session, a fork/setsid/fork daemon, and a new process group (plus a plain
# background job), then reports ready and waits for a line on stdin.
DAEMON = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(300)\n"
    "    os._exit(0)\n"
    "os.wait()\n"
)
NEW_GROUP = "import os, time\nos.setpgid(0, 0)\nif os.fork() == 0:\n    time.sleep(300)\n"
ESCAPEES = (
    f"setsid sleep 300 & {PYTHON} -c '{DAEMON}'; "
    f"{PYTHON} -c '{NEW_GROUP}' & sleep 300 & "
    "sleep 0.3; echo ready"
)


# --- helpers -------------------------------------------------------------------------


def run(script: str, mode: SandboxMode, cwd: Path | str) -> subprocess.CompletedProcess[str]:
    """Run `bash -c script` sandboxed, as the sidecar's pipe backend would: group leader."""
    return subprocess.run(
        wrap(["bash", "-c", script], mode=mode, cwd=str(cwd), bwrap=BWRAP),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        start_new_session=True,
    )


def spawn(script: str, mode: SandboxMode, cwd: Path | str, marker: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        wrap(["bash", "-c", script], mode=mode, cwd=str(cwd), bwrap=BWRAP),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, MARKER_VAR: marker},
        start_new_session=True,
    )


def read_line(stream: IO[str] | None, seconds: float = TIMEOUT) -> str:
    """One line from a pipe, or fail: never block a test forever."""
    assert stream is not None
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    assert box, "no line within the timeout"
    return box[0]


def proc_state(pid: int) -> str | None:
    """The process's state letter, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[0].decode()


def marked_alive(marker: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries the marker."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if needle in environ and proc_state(int(entry)) not in (None, "Z", "X"):
            found.append(int(entry))
    return found


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def start_escapees(
    mode: SandboxMode, cwd: Path, cleanup: list[str], script: str = ""
) -> tuple[subprocess.Popen[str], str]:
    """A sandboxed command that has left escapees behind and now waits on stdin."""
    marker = uuid.uuid4().hex
    cleanup.append(marker)  # before anything can fail
    proc = spawn(f"{ESCAPEES}; {script} read -r _", mode, cwd, marker)
    assert read_line(proc.stdout).strip() == "ready"
    # Positive control: the scan sees them. Outer bwrap, its init, bash, the setsid
    # sleep, the daemon's grandchild, the new group's child, the background sleep.
    assert eventually(lambda: len(marked_alive(marker)) >= 7), marked_alive(marker)
    return proc, marker


def kill_marked(marker: str) -> None:
    """SIGKILL whatever carries the marker, again until nothing does (one may fork)."""
    for _ in range(20):
        pids = marked_alive(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


@pytest.fixture
def marker_cleanup() -> Iterator[list[str]]:
    """Markers registered here are SIGKILLed after the test, should the sandbox leak."""
    markers: list[str] = []
    yield markers
    for marker in markers:
        kill_marked(marker)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A scratch dir outside /tmp (which the sandbox replaces): its siblings are on the
    read-only host filesystem, so escapes fail rather than land in a private tmpfs."""
    base = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir="/var/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A scratch dir in the host's /tmp, which the sandbox replaces with its own."""
    base = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir="/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def workspace(outside_tmp: Path) -> Path:
    path = outside_tmp / "ws"
    path.mkdir()
    (path / "readme.txt").write_text("hello from the host\n")
    return path


@pytest.fixture
def outside(outside_tmp: Path) -> Path:
    path = outside_tmp / "outside"
    path.mkdir()
    (path / "target.txt").write_text("original\n")
    return path


# --- read-only -----------------------------------------------------------------------


@needs_bwrap
def test_read_only_cwd_is_readable_but_not_writable(workspace: Path) -> None:
    done = run("cat readme.txt; echo x > new.txt; echo rc=$?", RO, workspace)
    assert "hello from the host" in done.stdout
    assert "rc=1" in done.stdout
    assert "Read-only file system" in done.stderr
    assert not (workspace / "new.txt").exists()
    assert sorted(p.name for p in workspace.iterdir()) == ["readme.txt"]


@needs_bwrap
def test_read_only_tmp_and_shm_are_writable_but_private(workspace: Path) -> None:
    name = f"sandbox-private-{uuid.uuid4().hex}"
    script = (
        f"echo inside > /tmp/{name} && cat /tmp/{name} && echo shm > /dev/shm/{name} && ls /tmp"
    )
    done = run(script, RO, workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["inside", name]  # a fresh, empty /tmp
    assert not Path("/tmp", name).exists()
    assert not Path("/dev/shm", name).exists()


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="only root starts with capabilities to drop")
def test_read_only_root_cannot_remount_writable(workspace: Path) -> None:
    # bwrap keeps root's capabilities unless told to drop them; with them this succeeds.
    done = run(
        "mount -o remount,rw / ; mount -o remount,rw " + str(workspace) + "; echo x > new.txt",
        RO,
        workspace,
    )
    assert done.returncode != 0
    assert not (workspace / "new.txt").exists()
    assert "0000000000000000" in run("grep CapEff /proc/self/status", RO, workspace).stdout


@needs_bwrap
def test_cwd_under_tmp_stays_visible_despite_private_tmp(under_tmp: Path) -> None:
    cwd = under_tmp / "ws"
    cwd.mkdir()
    (cwd / "data.txt").write_text("under tmp\n")
    for mode in (RO, WS):
        done = run("cat data.txt && ls -A /tmp", mode, cwd)
        assert done.returncode == 0, done.stderr
        # The file, and in /tmp only the first component of the cwd's path.
        assert done.stdout.splitlines() == ["under tmp", cwd.parts[2]]
    done = run("echo new > made.txt && echo x > ../escape.txt; ls ..", WS, cwd)
    assert (cwd / "made.txt").read_text() == "new\n"
    assert not (cwd.parent / "escape.txt").exists()  # landed in the private tmpfs
    assert cwd.parent.exists() and (cwd / "data.txt").exists()


@needs_bwrap
def test_read_only_hides_host_unix_sockets_under_run(workspace: Path) -> None:
    # A read-only bind does not stop connect(); only hiding /run does.
    run_dir = f"/run/user/{os.getuid()}" if os.path.isdir(f"/run/user/{os.getuid()}") else "/run"
    if not os.access(run_dir, os.W_OK):
        pytest.skip(f"{run_dir} is not writable here")
    path = os.path.join(run_dir, f"sandbox-test-{uuid.uuid4().hex[:8]}.sock")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(path)
        server.listen()
        connect = (
            f"{PYTHON} -c 'import socket; "
            f's = socket.socket(socket.AF_UNIX); s.connect("{path}"); print("connected")\''
        )
        assert "connected" in run(connect, WS, workspace).stdout  # control: reachable
        done = run(connect, RO, workspace)
        assert done.returncode != 0
        assert "connected" not in done.stdout
    finally:
        server.close()
        os.unlink(path)


# --- workspace -----------------------------------------------------------------------


@needs_bwrap
def test_workspace_writes_inside_the_cwd_only(workspace: Path, outside: Path) -> None:
    home_probe = Path.home() / f".sandbox-test-{uuid.uuid4().hex}"
    try:
        done = run(
            f"echo made > made.txt && mkdir -p sub && echo deep > sub/deep.txt; "
            f"echo x > {outside}/new.txt; echo rc1=$?; echo x > {home_probe}; echo rc2=$?",
            WS,
            workspace,
        )
        assert (workspace / "made.txt").read_text() == "made\n"
        assert (workspace / "sub" / "deep.txt").read_text() == "deep\n"
        assert "rc1=1" in done.stdout and "rc2=1" in done.stdout
        assert done.stderr.count("Read-only file system") == 2
        assert not (outside / "new.txt").exists()
        assert not home_probe.exists()
    finally:
        home_probe.unlink(missing_ok=True)


@needs_bwrap
def test_workspace_symlink_to_outside_cannot_be_written_through(
    workspace: Path, outside: Path
) -> None:
    (workspace / "link.txt").symlink_to(outside / "target.txt")
    (workspace / "linkdir").symlink_to(outside)
    done = run(
        "cat link.txt; echo evil > link.txt; echo rc1=$?; echo evil > linkdir/new.txt; "
        "echo rc2=$?; rm linkdir/target.txt; echo rc3=$?",
        WS,
        workspace,
    )
    assert done.stdout.startswith("original\n")  # reading through it is fine (read-only)
    assert "rc1=1" in done.stdout and "rc2=1" in done.stdout and "rc3=1" in done.stdout
    assert (outside / "target.txt").read_text() == "original\n"
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]


@needs_bwrap
def test_workspace_dotdot_escape_fails(workspace: Path, outside: Path) -> None:
    done = run(
        "echo x > ../escape.txt; echo rc1=$?; echo x > ../outside/target.txt; echo rc2=$?",
        WS,
        workspace,
    )
    assert "rc1=1" in done.stdout and "rc2=1" in done.stdout
    assert not (workspace.parent / "escape.txt").exists()
    assert (outside / "target.txt").read_text() == "original\n"


@needs_bwrap
def test_symlinked_cwd_binds_the_real_directory(workspace: Path, under_tmp: Path) -> None:
    # The link lives in /tmp, which the sandbox replaces: only the real path can work.
    link = under_tmp / "ws-link"
    link.symlink_to(workspace)
    done = run("pwd; echo made > made.txt", WS, link)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(workspace)]
    assert (workspace / "made.txt").read_text() == "made\n"


# --- network -------------------------------------------------------------------------


@pytest.fixture
def tcp_server() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(5)
    try:
        yield server, server.getsockname()[1]
    finally:
        server.close()


def connect_script(port: int) -> str:
    return (
        f"{PYTHON} -c 'import socket; "
        f's = socket.create_connection(("127.0.0.1", {port}), timeout=5); '
        f's.sendall(b"from-sandbox"); print("connected")\''
    )


@needs_bwrap
def test_read_only_has_no_network(workspace: Path, tcp_server: tuple[socket.socket, int]) -> None:
    server, port = tcp_server
    done = run(connect_script(port), RO, workspace)
    assert done.returncode != 0
    assert "connected" not in done.stdout
    assert "ConnectionRefusedError" in done.stderr  # its own loopback: nobody listening
    server.settimeout(0.2)
    with pytest.raises(TimeoutError):
        server.accept()


@needs_bwrap
@pytest.mark.parametrize("mode", [WS, OFF])
def test_workspace_and_off_share_the_network(
    workspace: Path, tcp_server: tuple[socket.socket, int], mode: SandboxMode
) -> None:
    server, port = tcp_server
    done = run(connect_script(port), mode, workspace)
    assert done.returncode == 0, done.stderr
    assert "connected" in done.stdout
    conn, _ = server.accept()
    with conn:
        assert conn.recv(100) == b"from-sandbox"


# --- off -----------------------------------------------------------------------------


@needs_bwrap
def test_off_writes_as_the_user_but_keeps_its_own_pid_namespace(
    workspace: Path, outside: Path
) -> None:
    name = f"sandbox-off-{uuid.uuid4().hex}"
    try:
        done = run(
            f"echo $$; echo x > {outside}/new.txt && echo y > /tmp/{name} "
            f"&& echo z > /dev/shm/{name}",
            OFF,
            workspace,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["2"]  # bwrap's init is 1, the command 2
        assert (outside / "new.txt").read_text() == "x\n"
        assert Path("/tmp", name).read_text() == "y\n"  # the host's /tmp
        assert Path("/dev/shm", name).read_text() == "z\n"  # and the host's /dev
    finally:
        Path("/tmp", name).unlink(missing_ok=True)
        Path("/dev/shm", name).unlink(missing_ok=True)


# --- containment ---------------------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("mode", [RO, WS, OFF])
def test_nothing_outlives_the_command(
    workspace: Path, mode: SandboxMode, marker_cleanup: list[str]
) -> None:
    proc, marker = start_escapees(mode, workspace, marker_cleanup)
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.wait(TIMEOUT) == 0
    # bwrap exits as soon as its init reports the command's status; the SIGKILL that its
    # exit sends the init (--die-with-parent) empties the namespace milliseconds later.
    assert eventually(lambda: marked_alive(marker) == [], 2.0), marked_alive(marker)


@needs_bwrap
def test_sigkill_of_bwrap_kills_everything_inside(
    workspace: Path, marker_cleanup: list[str]
) -> None:
    proc, marker = start_escapees(WS, workspace, marker_cleanup, "trap '' INT TERM HUP;")
    os.kill(proc.pid, signal.SIGKILL)  # the outer bwrap alone, not its group
    assert proc.wait(TIMEOUT) == -signal.SIGKILL
    assert eventually(lambda: marked_alive(marker) == []), marked_alive(marker)


@needs_bwrap
def test_sigkill_of_the_spawner_kills_everything_inside(
    workspace: Path, marker_cleanup: list[str]
) -> None:
    """--die-with-parent: a sidecar that dies, even by SIGKILL, takes the sandbox along."""
    marker = uuid.uuid4().hex
    marker_cleanup.append(marker)
    argv = wrap(["bash", "-c", f"{ESCAPEES}; sleep 300"], mode=WS, cwd=str(workspace), bwrap=BWRAP)
    spawner = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess; subprocess.run({argv!r})"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, MARKER_VAR: marker},
    )
    try:
        assert read_line(spawner.stdout).strip() == "ready"
        assert eventually(lambda: len(marked_alive(marker)) >= 8)  # the spawner, too
        spawner.kill()
        spawner.wait(TIMEOUT)
        assert eventually(lambda: marked_alive(marker) == []), marked_alive(marker)
    finally:
        spawner.kill()
        spawner.wait(TIMEOUT)


# --- signals and exit status ---------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("mode", [RO, WS, OFF])
def test_exit_status_passes_through(workspace: Path, mode: SandboxMode) -> None:
    assert run("exit 7", mode, workspace).returncode == 7
    assert run("exit 0", mode, workspace).returncode == 0
    assert run("kill -TERM $$", mode, workspace).returncode == 128 + signal.SIGTERM
    missing = subprocess.run(
        wrap(["no-such-command-xyz"], mode=mode, cwd=str(workspace), bwrap=BWRAP),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert missing.returncode == 127


@needs_bwrap
def test_staged_stop_reaches_the_command_not_bwrap(
    workspace: Path, marker_cleanup: list[str]
) -> None:
    """SIGINT then SIGTERM to the group reach the command's handlers, with its status;
    a command that ignores both still dies, with everything in it, on SIGKILL."""
    cases = [
        ("trap 'echo got-INT; exit 42' INT;", [signal.SIGINT], 42, "got-INT"),
        (
            "trap '' INT; trap 'echo got-TERM; exit 43' TERM;",
            [signal.SIGINT, signal.SIGTERM],
            43,
            "got-TERM",
        ),
        ("trap '' INT TERM;", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], -signal.SIGKILL, ""),
    ]
    for traps, signals, status, said in cases:
        # The traps go first so that the escapees (other than the daemon) inherit them.
        marker = uuid.uuid4().hex
        marker_cleanup.append(marker)
        proc = spawn(f"{traps} {ESCAPEES}; while :; do sleep 0.05; done", WS, workspace, marker)
        assert read_line(proc.stdout).strip() == "ready"
        for sig in signals[:-1]:
            os.killpg(proc.pid, sig)
            time.sleep(0.3)
            assert proc.poll() is None, f"{sig.name} should have been ignored"
        os.killpg(proc.pid, signals[-1])
        # EOF on its output, too: no escapee is left holding the pipe.
        output, _ = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == status
        assert said in output
        assert eventually(lambda m=marker: marked_alive(m) == []), marked_alive(marker)


# --- pty -----------------------------------------------------------------------------


def pty_output(process: PtyProcess, seconds: float = TIMEOUT, until: bytes | None = None) -> bytes:
    """What the PTY shows until EOF (or `until` appears), bounded by `seconds`."""
    output = b""
    deadline = time.monotonic() + seconds
    while until is None or until not in output:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([process.fd], [], [], left)[0]:
            break
        try:
            chunk = os.read(process.fd, 4096)
        except OSError:  # EIO: every holder of the slave side is gone
            break
        if not chunk:
            break
        output += chunk
    return output


@needs_bwrap
@pytest.mark.parametrize("mode", [RO, WS, OFF])
def test_pty_stays_the_controlling_terminal(workspace: Path, mode: SandboxMode) -> None:
    argv = wrap(
        [
            "bash",
            "-c",
            "test -t 1 && echo tty; echo via-dev-tty > /dev/tty; stty size; yes | head -n 1",
        ],
        mode=mode,
        cwd=str(workspace),
        bwrap=BWRAP,
    )
    process = PtyProcess.spawn(argv, dimensions=(33, 99))
    try:
        output = pty_output(process).decode(errors="replace")
        process.wait()
    finally:
        process.close(force=True)
    assert "tty" in output.split()
    assert "via-dev-tty" in output
    assert "33 99" in output
    assert "Broken pipe" not in output  # SIGPIPE is the default again inside
    assert process.exitstatus == 0


@needs_bwrap
def test_ctrl_c_on_the_pty_reaches_the_command(workspace: Path) -> None:
    script = "trap 'echo got-INT; exit 5' INT; echo ready; while :; do sleep 0.05; done"
    argv = wrap(["bash", "-c", script], mode=WS, cwd=str(workspace), bwrap=BWRAP)
    process = PtyProcess.spawn(argv)
    try:
        assert b"ready" in pty_output(process, until=b"ready")
        process.write(b"\x03")
        assert b"got-INT" in pty_output(process)
        process.wait()
    finally:
        process.close(force=True)
    assert process.exitstatus == 5


# --- probe and argument checks -------------------------------------------------------


def test_probe_reports_a_missing_bwrap_with_its_path(tmp_path: Path) -> None:
    bogus = str(tmp_path / "no" / "bwrap")
    status = probe(bogus)
    assert status == SandboxStatus(False, status.reason, None)
    assert status.reason is not None and bogus in status.reason and "bubblewrap" in status.reason
    with pytest.raises(SandboxUnavailable) as raised:
        require(status)
    message = str(raised.value)
    assert "NOT run" in message and bogus in message and "install" in message


def test_probe_reports_a_failing_bwrap_with_its_exit() -> None:
    status = probe("/bin/false")
    assert not status.available
    assert status.reason is not None and "/bin/false" in status.reason and "exit 1" in status.reason


@needs_bwrap
def test_probe_accepts_the_real_bwrap() -> None:
    status = probe()
    assert status.available and status.reason is None
    assert status.bwrap is not None and os.path.isabs(status.bwrap)
    assert require(status) == status.bwrap
    assert probe() is status  # cached: the self-test runs once per path


@pytest.mark.parametrize("mode", list(SandboxMode))
def test_wrap_refuses_a_relative_cwd(mode: SandboxMode) -> None:
    with pytest.raises(ValueError):
        wrap(["true"], mode=mode, cwd="relative/dir")
    with pytest.raises(ValueError):
        wrap([], mode=mode, cwd="/")


def test_wrap_refuses_cwds_that_would_punch_holes() -> None:
    for cwd in ("/proc/1", "/dev", "/sys/fs"):
        for mode in (RO, WS):
            with pytest.raises(ValueError):
                wrap(["true"], mode=mode, cwd=cwd)
    with pytest.raises(ValueError):
        wrap(["true"], mode=WS, cwd="/")


# --- the kernel's interfaces and hidden dirs -----------------------------------------


def at(argv: list[str], *options: str) -> int:
    """Where `options` appear together in `argv` (a test failure if they do not)."""
    for index in range(len(argv) - len(options) + 1):
        if tuple(argv[index : index + len(options)]) == options:
            return index
    raise AssertionError(f"{options} not in {argv}")


@pytest.mark.parametrize("mode", list(SandboxMode))
def test_wrap_covers_the_kernel_interfaces_after_its_proc(mode: SandboxMode) -> None:
    argv = wrap(["true"], mode=mode, cwd="/var")
    proc = at(argv, "--proc", "/proc")
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"):
        assert at(argv, "--ro-bind-try", path, path) > proc  # over the new /proc, not under
    for path in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"):
        if os.path.isfile(path):
            assert at(argv, "--ro-bind", "/dev/null", path) > proc
        else:
            assert path not in argv  # bwrap could not mount over a missing file
    for path in ("/proc/acpi", "/proc/scsi", "/sys/firmware"):
        if os.path.isdir(path):
            assert at(argv, "--remount-ro", path) > at(argv, "--tmpfs", path) > proc
        else:
            assert path not in argv
    if mode is OFF:  # / is bound read-write there: /sys needs its own read-only bind
        assert at(argv, "--ro-bind", "/sys", "/sys") > at(argv, "--bind", "/", "/")
    assert at(argv, "--chdir", "/var") > proc


def test_wrap_hides_dirs_before_or_after_the_cwd_bind(tmp_path: Path) -> None:
    cwd, beside, holder = tmp_path / "home", tmp_path / "data", tmp_path / "keep"
    inside, inner = cwd / ".local" / "share" / "acp", beside / "nested"
    for path in (inside, inner, holder / "worktree"):
        path.mkdir(parents=True)
    hide = [str(beside), str(inside), str(inner), str(tmp_path / "missing"), str(beside)]
    for mode in (RO, WS):
        argv = wrap(["true"], mode=mode, cwd=str(cwd), hide=hide)
        bind = at(argv, "--bind" if mode is WS else "--ro-bind", str(cwd), str(cwd))
        assert at(argv, "--tmpfs", str(beside)) < bind < at(argv, "--remount-ro", str(beside))
        assert bind < at(argv, "--tmpfs", str(inside)) < at(argv, "--remount-ro", str(inside))
        assert argv.count(str(beside)) == 2  # given twice, covered once
        assert str(inner) not in argv  # inside a hidden dir: nothing to mount it on
        assert str(tmp_path / "missing") not in argv
        assert at(argv, "--tmpfs", "/tmp") < at(argv, "--tmpfs", str(beside))
    # A cwd inside a hidden dir is bound again over its tmpfs, in `off` too.
    tree = holder / "worktree"
    for mode in SandboxMode:
        argv = wrap(["true"], mode=mode, cwd=str(tree), hide=[str(holder)])
        binding = "--ro-bind" if mode is RO else "--bind"
        bind = at(argv, binding, str(tree), str(tree))
        assert at(argv, "--tmpfs", str(holder)) < bind < at(argv, "--remount-ro", str(holder))
    argv = wrap(["true"], mode=OFF, cwd=str(cwd), hide=[str(beside), str(inside)])
    assert str(cwd) not in argv[: at(argv, "--chdir")]  # nothing to bind again in `off`
    assert at(argv, "--tmpfs", str(inside)) < at(argv, "--proc", "/proc")
    # Callers that pass no `hide` get no tmpfs but the usual ones and the kernel's masks.
    for mode in SandboxMode:
        argv = wrap(["true"], mode=mode, cwd=str(cwd))
        tmpfs = {argv[i + 1] for i, option in enumerate(argv) if option == "--tmpfs"}
        assert tmpfs <= {"/tmp", "/run", "/proc/acpi", "/proc/scsi", "/sys/firmware"}


def test_wrap_refuses_to_hide_a_relative_path_or_the_root() -> None:
    for hide in (["data"], ["/"], ["/var/.."]):
        with pytest.raises(ValueError, match="hid"):
            wrap(["true"], mode=RO, cwd="/var", hide=hide)


@needs_bwrap
@pytest.mark.parametrize("mode", [RO, WS, OFF])
def test_kernel_settings_are_read_only_even_to_root(workspace: Path, mode: SandboxMode) -> None:
    # Before: as real root bwrap's /proc/sys was writable in every mode (exit 0); as
    # non-root the write failed EACCES, and now EROFS as well.
    done = run(
        "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname; echo rc=$?; "
        "test -w /proc/sys/vm/drop_caches || echo ro; test -w /sys/kernel || echo ro",
        mode,
        workspace,
    )
    assert done.stdout.split() == ["rc=1", "ro", "ro"], done.stderr
    assert "Read-only file system" in done.stderr


@needs_bwrap
@pytest.mark.parametrize("mode", [RO, WS, OFF])
def test_hidden_dirs_are_empty_and_sealed(
    outside_tmp: Path, workspace: Path, mode: SandboxMode
) -> None:
    data = outside_tmp / "data"
    (data / "checkpoints").mkdir(parents=True)
    (data / "sessions.db").write_text("secret\n")
    inside = workspace / "cache"
    inside.mkdir()
    (inside / "x").write_text("hidden too\n")
    script = (
        f"ls -A {data} {inside}; cat {data}/sessions.db; echo x > {data}/new; "
        "echo rc=$?; cat readme.txt"
    )
    argv = wrap(
        ["bash", "-c", script],
        mode=mode,
        cwd=str(workspace),
        bwrap=BWRAP,
        hide=[str(data), str(inside)],
    )
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )
    assert "secret" not in done.stdout and "checkpoints" not in done.stdout
    assert "rc=1" in done.stdout and "Read-only file system" in done.stderr
    assert "hello from the host" in done.stdout
    assert sorted(p.name for p in data.iterdir()) == ["checkpoints", "sessions.db"]
    assert (inside / "x").read_text() == "hidden too\n"
