"""Wrap every agent command in bubblewrap: its own PID namespace, plus a sandbox policy.

Why a PID namespace: a process group only holds processes that stay in it; `setsid`,
`setpgid` and double-fork daemons leave it and outlive any signal to the group. A PID
namespace cannot be left, and when its init (PID 1) dies the kernel SIGKILLs everything
still in it.

Modes (`SandboxMode`):

- READ_ONLY: the whole filesystem read-only, a private empty /tmp and /run, no network.
- WORKSPACE: the same, but the session cwd writable and the host's network and /run.
- OFF: filesystem and network as the user has them; still its own PID namespace.

In every mode the kernel's writable interfaces (/proc/sys, /proc/sysrq-trigger,
/proc/irq, /proc/bus, /proc/fs, and all of /sys) are read-only, /proc/kcore, /proc/keys,
/proc/timer_list, /proc/sched_debug, /proc/latency_stats, /proc/acpi, /proc/scsi and
/sys/firmware are masked (those the kernel has), and the directories the caller names in
`hide` (the sidecar's data and config dirs: its store, checkpoints, output spools, every
session's transcript and MCP secrets) are empty read-only tmpfs mounts; a cwd inside one
is bound again over it, one that holds one keeps the rest of its files visible.

The argv `wrap` builds, for `bash -c CMD` in READ_ONLY with cwd /w and hide=(/d,)::

    /bin/sh -c 'trap "" INT QUIT TERM; exec "$0" "$@"' bwrap
        --die-with-parent --unshare-pid --unshare-net --unshare-ipc --cap-drop ALL
        --ro-bind / / --tmpfs /tmp --tmpfs /run --tmpfs /d --ro-bind /w /w --remount-ro /d
        --dev /dev --proc /proc --ro-bind-try /proc/sys /proc/sys (... the other four)
        --ro-bind /dev/null /proc/keys (... files) --tmpfs /proc/acpi --remount-ro /proc/acpi
        (... dirs) --chdir /w -- /usr/bin/env --default-signal=INT,QUIT,TERM,PIPE,XFSZ --
        bash -c CMD

Findings, by experiment (bubblewrap 0.8.0, Linux 6.18, as root and as nobody):

- Tree: the spawned pid is the outer bwrap; its child is bwrap's own init (PID 1 in
  the namespace), which runs the command as PID 2. All three stay in the spawner's
  process group and session (we never pass `--new-session`, so a PTY stays the
  controlling terminal: `test -t 1`, /dev/tty, `stty size` and Ctrl-C all work).
- Command exit: the outer bwrap exits as soon as its init reports the command's status.
  The init itself does not: without `--die-with-parent` it lived on, reparented to the
  host's PID 1, with a `setsid sleep` still running under it. With it, the outer
  bwrap's exit SIGKILLs the init, and so the namespace: `setsid sleep &`,
  fork/setsid/fork daemons, `setpgid(0, 0)` children and `nohup` were all gone a few
  milliseconds after the outer bwrap was reaped, not synchronously (some were still
  dying, state R, when the spawner's wait returned). Poll for "gone" (group_alive
  does); the init is left, as a zombie, for the host's PID 1 to reap.
- Exit status passes through (`exit 7` -> 7). A command killed by signal N comes back as
  128+N (bwrap's init translates it), not as a negative returncode. If bwrap itself
  fails to set up it exits 1 with "bwrap: ..." on stderr, which looks like a command's
  exit 1: probe first. A missing command gives env's 127 ("No such file or directory").
- Signals to bwrap's init from the host: SIGINT, SIGTERM, SIGHUP are dropped (the kernel
  protects a namespace init that has no handler); SIGKILL kills the namespace, and the
  outer bwrap then exits 137.
- The outer bwrap forwards no signals; a SIGINT/SIGTERM would kill it and
  `--die-with-parent` would then SIGKILL the namespace at once, racing the command's own
  handler (seen: a `trap ... TERM` never ran; returncode -2/-15, the command's status
  lost). Hence the /bin/sh prefix: bwrap runs with INT, QUIT and TERM ignored, and
  /usr/bin/env (coreutils >= 9.0) restores them to default for the command. Then a
  SIGINT or SIGTERM to the group reaches only the command (and its children still in
  the group); its handler runs and its exit status passes through; SIGKILL to the group
  kills the outer bwrap, and with it the namespace. SIGHUP is left alone: closing a PTY
  master hangs up the outer bwrap (the session leader) and so ends everything.
- The same env also resets SIGPIPE and SIGXFSZ: Python ignores them and ptyprocess
  (unlike subprocess) passes that on; without it `yes | head -1` on a PTY printed
  "yes: standard output: Broken pipe".
- Death of the spawner: SIGKILL of the outer bwrap, or of the process that spawned it,
  empties the namespace within milliseconds (its init is again left, a zombie, to the
  host's PID 1). Caveat: PR_SET_PDEATHSIG follows
  the spawning *thread*; bwrap spawned from a thread that later exits is SIGKILLed then.
  Spawn from the event-loop thread. bwrap sets it only once running, so a spawner killed
  in that first millisecond would leave it running: hence the watchdog on the group, and
  the gate that holds the command back until the watchdog knows it (backends/groups.py).
- As root, bwrap keeps every capability unless told otherwise: without `--cap-drop ALL`
  `mount -o remount,rw /` inside the sandbox succeeded and a write reached the host
  disk. READ_ONLY and WORKSPACE drop them all; OFF keeps what the user has.
- Always: no_new_privs is set and every bind is nosuid, so setuid programs (sudo, su)
  gain nothing, even in OFF mode. As non-root bwrap adds a user namespace by itself.
- A read-only bind does not stop connecting to Unix sockets on it, and a network
  namespace does not cover filesystem sockets: with only `--ro-bind / /
  --unshare-net`, a socket under /run accepted a connection from inside. So READ_ONLY
  hides /run (docker, D-Bus, systemd, /run/user/UID) under a tmpfs, as /tmp (X11, ssh
  agents). Sockets elsewhere stay reachable. WORKSPACE keeps /run so DNS works where
  /etc/resolv.conf links into it (systemd-resolved), which also leaves those sockets
  (and, with the host's network namespace, abstract sockets) reachable.
- /dev (`--dev`) is a fresh tmpfs with null, zero, full, random, urandom, tty, a new
  devpts and an empty, writable /dev/shm: POSIX shared memory works but is private per
  command. Because devpts is new, ttyname() is wrong: `tty` printed /dev/console (the
  PTY itself works). OFF binds the host's /dev.
- /tmp, /dev (so /dev/shm) and, in READ_ONLY, /run are new tmpfs mounts per command:
  files there do not last from one command to the next; they are memory-backed and
  unsized. DNS: `getent hosts pypi.org` resolved in WORKSPACE, not in READ_ONLY.
- HOME is read-only unless it lies within the cwd: caches (pip, npm, cargo, go) fail to
  write in WORKSPACE.
- A cwd under /tmp or /run stays visible: it is bound after the tmpfs, and bwrap makes
  its parent directories in the tmpfs (private, writable, discarded).
- Inside the namespace getpgid()/getsid() return 0 (the group's leader, the outer bwrap,
  is outside it): `ps -o pgid` shows 0. But `kill 0` still signals the whole group,
  members outside the namespace included: spawned without a new session, a `kill -TERM
  0` inside killed the spawning Python and its shell. Always spawn with
  start_new_session=True (ptyprocess does setsid itself); then the group is only the
  outer bwrap (which ignores INT and TERM) and the sandbox.
- As real root bwrap is privileged: its `--proc` is a procfs where /proc/sys is
  writable (`echo 1 > /proc/sys/vm/drop_caches` exited 0 in every mode, READ_ONLY too,
  `--cap-drop ALL` notwithstanding: root owns those files). bwrap covers only the /proc
  entries that pass access(W_OK) once it has dropped its capabilities (/proc/irq and
  /proc/bus, not the 0555 /proc/sys), so `wrap` binds them read-only itself: the host's,
  from the old root (sysctls are per reader, so /proc/sys/net still shows the sandbox's
  own network); a writable core_pattern would be host-root code execution. As non-root
  (bwrap's own user namespace) every such write already failed, EACCES, in every mode,
  OFF included; the covers changed nothing visible there but the error (EROFS).
- Masking: /dev/null bound over a file is opened EACCES (every bind is nodev), which is
  what a mask needs; a masked dir is an empty tmpfs, remounted read-only (bwrap 0.8
  accepts `--remount-ro` on a mount of its own, not on a plain subdirectory of /proc).
  A hidden dir's tmpfs is remounted read-only only after the cwd's bind, for which bwrap
  may have to make a mount point in it.
- OFF with root's capabilities can `umount -l /proc` and see the host's processes (in
  WORKSPACE: "must be superuser"), and can unmount the covers over /proc/sys, /sys
  (`umount -l`) and the hidden dirs (seen: exit 0), or write the host's devices (/dev is the host's): OFF
  contains accidents (leftover daemons, a stray sysctl write), not a hostile root. No mode stops a command from asking a daemon outside (cron, systemd,
  docker, ssh) to run something for it. In WORKSPACE the cwd's
  .git (hooks, config) is writable: whatever the host later runs from there is not
  sandboxed.

Using it: `probe()` once (it blocks for a few ms: call it via asyncio.to_thread at start),
`require(status)` before each command, then spawn `wrap(...)` as before, from the
event-loop thread, as a new session's leader. The group id is still the spawned pid and
a staged stop still works: SIGINT, then SIGTERM, reach the command as they would without
the sandbox, and SIGKILL to the group ends the namespace.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from protocol.values import Sandbox
from sidecar.agent import sandbox_diagnosis

PROBE_TIMEOUT = 10.0  # seconds the self-test may take

# Runs on the host as the spawned process: ignored dispositions survive exec, so bwrap
# (which forwards nothing) is not killed by the group's SIGINT/SIGTERM of a staged stop.
_IGNORE_IN_BWRAP = ["/bin/sh", "-c", 'trap "" INT QUIT TERM; exec "$0" "$@"']
# Runs inside, as the command's parent-by-exec: undo the above, and what Python ignores.
_RESTORE_IN_COMMAND = ["/usr/bin/env", "--default-signal=INT,QUIT,TERM,PIPE,XFSZ", "--"]
# bwrap's own mounts live there; a cwd bound on top would hide or expose them.
_NO_CWD_UNDER = ("/proc", "/dev", "/sys")
# Writable kernel interfaces, bound read-only over the fresh /proc: as real root bwrap
# covers only those root could not write without CAP_DAC_OVERRIDE (not /proc/sys).
_KERNEL_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
# Readable ones that show the host's memory, keys or hardware: masked where they exist.
_KERNEL_MASKED = (
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/latency_stats",
    "/proc/acpi",
    "/proc/scsi",
    "/sys/firmware",
)


# The one definition of the modes lives with the other shared values.
SandboxMode = Sandbox


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    available: bool
    reason: str | None  # why not, and how to fix it
    bwrap: str | None  # path used


class SandboxUnavailable(Exception):
    """A command was refused because it cannot be contained; running it bare could leave
    processes behind and bypass the session's policy."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        reason = self.reason.rstrip(".")
        return (
            f"The command was NOT run: the command sandbox (bubblewrap) is unavailable. "
            f"{reason}. Every sandbox mode, 'off' included, needs bwrap: it keeps the "
            f"command's processes from outliving it."
        )


def require(status: SandboxStatus) -> str:
    """The bwrap path to pass to `wrap`, or SandboxUnavailable with the reason."""
    if not status.available or status.bwrap is None:
        raise SandboxUnavailable(status.reason or "bwrap did not pass its self-test")
    return status.bwrap


def _is_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def wrap(
    argv: Sequence[str],
    *,
    mode: SandboxMode,
    cwd: str,
    bwrap: str = "bwrap",
    hide: Sequence[str] = (),
    writable: Sequence[str] = (),
    network: bool = False,
    readable: Sequence[str] = (),
) -> list[str]:
    """The argv that runs `argv` in `cwd` under `mode`; spawn it as the group leader.

    `hide`: directories the command must not see (the sidecar's data and config dirs),
    each covered by an empty read-only tmpfs in every mode; the cwd stays visible when it
    lies inside one. Checks nothing on disk beyond realpath and which of `hide` exist (a
    missing one has nothing to hide, and bwrap could not mount over it): a symlinked cwd
    binds, and starts in, the real directory.

    For a long-lived agent (`agent/external`): `writable` names the paths it must also
    write in WORKSPACE (its own state and login dirs; those that exist are bound
    read-write, even inside a hidden dir), `network` keeps the host's network in
    READ_ONLY (an agent must reach its model; its files stay read-only), and `readable`
    names where its program lives when that is under the private /tmp or /run
    (`program_roots`): bound read-only so it can start at all.
    """
    if not argv:
        raise ValueError("empty argv")
    if "=" in argv[0]:
        raise ValueError(f"argv[0] {argv[0]!r} contains '=': env would take it for a variable")
    if not os.path.isabs(cwd):
        raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
    real = os.path.realpath(cwd)
    beside, inside = _hidden(real, hide)
    # The tmpfs over a hidden dir is sealed read-only only after the cwd's bind, which
    # may need a mount point made in it; a dir inside the cwd is covered after its bind.
    hidden = [option for path in beside for option in ("--tmpfs", path)]
    sealed = [option for path in beside for option in ("--remount-ro", path)] + _covers(inside)
    args = ["--die-with-parent", "--unshare-pid"]
    if mode is SandboxMode.OFF:
        args += ["--bind", "/", "/", "--dev-bind", "/dev", "/dev", *hidden]
        if any(_is_under(real, top) for top in beside):
            args += ["--bind", real, real]  # again, over the tmpfs that hid it
        args += [*sealed, "--proc", "/proc", "--ro-bind", "/sys", "/sys"]
    else:
        if any(_is_under(real, top) for top in _NO_CWD_UNDER):
            raise ValueError(f"refusing a sandboxed cwd under /proc, /dev or /sys: {real}")
        if mode is SandboxMode.WORKSPACE and real == "/":
            raise ValueError("a workspace of / would make everything writable: use mode off")
        if mode is SandboxMode.READ_ONLY and not network:
            args += ["--unshare-net"]
        args += ["--unshare-ipc", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--tmpfs", "/tmp"]
        if mode is SandboxMode.READ_ONLY:
            args += ["--tmpfs", "/run"]  # host sockets; DNS is moot without a network
        args += hidden
        for path in readable:  # before the cwd's bind: one that holds the cwd stays under it
            args += ["--ro-bind", path, path]
        if real != "/":  # after the tmpfs mounts, so a cwd under /tmp, /run or a hidden dir
            args += ["--bind" if mode is SandboxMode.WORKSPACE else "--ro-bind", real, real]
        if mode is SandboxMode.WORKSPACE:
            for path in writable:
                if os.path.lexists(path):
                    extra = os.path.realpath(path)
                    args += ["--bind", extra, extra]
        args += [*sealed, "--dev", "/dev", "--proc", "/proc"]
    args += [*_kernel_covers(), "--chdir", real, "--"]
    return [*_IGNORE_IN_BWRAP, bwrap, *args, *_RESTORE_IN_COMMAND, *argv]


_PRIVATE_TOPS: Final = ("/tmp", "/run")  # a fresh tmpfs in the sandbox: invisible there


def program_roots(argv: Sequence[str]) -> tuple[str, ...]:
    """What an agent's argv needs to see that the sandbox's private /tmp and /run would
    hide: for each absolute path in it that exists there, its install root — the git
    checkout it is in (a clone: its scripts import their neighbours), else the outermost
    `node_modules` above it, the prefix of a `bin/` (a virtualenv, a package), or its own
    directory. Real paths; nothing outside /tmp and /run (the rest is bound already)."""
    roots: list[str] = []
    for word in argv:
        if not os.path.isabs(word) or not os.path.exists(word):
            continue
        for path in dict.fromkeys((os.path.abspath(word), os.path.realpath(word))):
            if not any(_is_under(path, top) for top in _PRIVATE_TOPS):
                continue
            parts = path.split("/")
            checkout = _checkout_of(path)
            if checkout is not None:
                root = checkout
            elif "node_modules" in parts:
                root = "/".join(parts[: parts.index("node_modules") + 1])
            elif len(parts) > 2 and parts[-2] == "bin":
                root = "/".join(parts[:-2])
            else:
                root = os.path.dirname(path)
            if root not in roots:
                roots.append(root)
    return tuple(roots)


def _checkout_of(path: str) -> str | None:
    """The nearest directory above `path` (below /tmp or /run) holding a `.git`."""
    here = os.path.dirname(path)
    while here not in ("/", *_PRIVATE_TOPS):
        if os.path.exists(os.path.join(here, ".git")):
            return here
        here = os.path.dirname(here)
    return None


def _cover(path: str) -> list[str]:
    """bwrap options that put an empty, read-only tmpfs over the directory `path`."""
    return ["--tmpfs", path, "--remount-ro", path]


def _covers(paths: Sequence[str]) -> list[str]:
    return [option for path in paths for option in _cover(path)]


def _hidden(cwd: str, hide: Sequence[str]) -> tuple[list[str], list[str]]:
    """The real dirs of `hide` to cover, in two halves: those mounted before the cwd's
    bind (a hidden dir that holds the cwd, or lies beside it) and those after (inside the
    cwd, whose bind would show them again). A dir inside another one of its half is left
    out (the outer tmpfs has no such path to mount on); a missing one has nothing to hide.
    """
    dirs: list[str] = []
    for path in hide:
        if not os.path.isabs(path):
            raise ValueError(f"a hidden path must be absolute, got {path!r}")
        real = os.path.realpath(path)
        if real == "/":
            raise ValueError(f"refusing to hide / (from {path!r}): nothing would be left")
        if real not in dirs and os.path.isdir(real):
            dirs.append(real)
    inside = [d for d in dirs if d != cwd and _is_under(d, cwd)]
    beside = [d for d in dirs if d not in inside]

    def tops(half: list[str]) -> list[str]:
        return sorted(d for d in half if not any(o != d and _is_under(d, o) for o in half))

    return tops(beside), tops(inside)


@functools.cache
def _kernel_covers() -> tuple[str, ...]:
    """Options that make the kernel's writable interfaces read-only and mask the ones that
    leak host state, as container runtimes do; once per process (the kernel decides which
    exist, and bwrap cannot mount over a missing one)."""
    options: list[str] = []
    for path in _KERNEL_READ_ONLY:
        options += ["--ro-bind-try", path, path]  # the host's, from the old root
    for path in _KERNEL_MASKED:
        if os.path.isdir(path):
            options += _cover(path)
        elif os.path.exists(path):
            options += ["--ro-bind", "/dev/null", path]  # nodev: opening it is refused
    return tuple(options)


# bwrap's own words for the usual failures (0.8.0), and what to do about each; a failure
# to create namespaces is judged by `sandbox_diagnosis` (which setting forbids it).
_HINTS = (
    (
        ("can't mount", "failed to make", "mount"),
        "mounting inside the sandbox was refused, typically by a container runtime: run "
        "the sidecar where new mount namespaces may mount proc and tmpfs",
    ),
    (
        ("loopback", "rtm_newaddr"),
        "setting up a private network was refused, typically by a container runtime: "
        "allow network namespaces",
    ),
    (
        ("default-signal",),
        "/usr/bin/env is older than coreutils 9.0 and cannot restore signal handling: "
        "upgrade coreutils",
    ),
)


def _failure_reason(
    path: str, returncode: int, stderr: str, facts: sandbox_diagnosis.HostFacts | None = None
) -> str:
    """`facts`: the host's user namespace settings (None: read them now)."""
    text = " ".join(stderr.split())[-400:] or "no error output"
    lowered = text.lower()
    hint = sandbox_diagnosis.diagnose(text, facts or sandbox_diagnosis.read_facts()) or next(
        (hint for needles, hint in _HINTS if any(needle in lowered for needle in needles)),
        "fix the error above, or install a working bubblewrap (Debian package bubblewrap)",
    )
    return f"bwrap at {path} failed its self-test (exit {returncode}): {text}; {hint}"


@functools.cache
def _self_test(path: str) -> SandboxStatus:
    # Every option `wrap` emits: /tmp hidden (already private, so harmless) gives a hidden
    # dir's tmpfs and its seal, whatever /proc and /sys hold; the kernel covers are in.
    argv = wrap(["true"], mode=SandboxMode.READ_ONLY, cwd="/", bwrap=path, hide=("/tmp",))
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_TIMEOUT,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        reason = f"bwrap at {path} did not finish its self-test within {PROBE_TIMEOUT:g} s"
        return SandboxStatus(False, reason, path)
    except OSError as exc:
        return SandboxStatus(False, f"bwrap at {path} could not be started: {exc}", path)
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace")
        return SandboxStatus(False, _failure_reason(path, done.returncode, stderr), path)
    return SandboxStatus(True, None, path)


def probe(bwrap: str | None = None) -> SandboxStatus:
    """Whether commands can be sandboxed, by running bwrap once with every feature `wrap`
    uses (blocking, ~10 ms; cached per path, so a fix needs a restart to be noticed).

    `bwrap` is a path or a name looked up on PATH; None means "bwrap".
    """
    name = bwrap or "bwrap"
    path = shutil.which(name)
    if path is None:
        where = name if os.sep in name else f"{name} on PATH"
        reason = (
            f"bwrap not found ({where}): install the Debian package bubblewrap "
            f"(apt install bubblewrap)"
        )
        return SandboxStatus(False, reason, None)
    return _self_test(path)
