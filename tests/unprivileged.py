"""The sidecar as a normal user: the test user, dirs it owns, and a launcher.

Users run the window and the sidecar as themselves, where bubblewrap makes a user
namespace first and the kernel's rules for unprivileged users apply; CI runs as root.
So, as root, the tests create a system user (`acp-tester`; idempotent, and safe when two
runs create it at once) and start the real sidecar as that user. Run as a normal user,
they start it as that user, directly.

The launcher (this file run as a script, by root) execs the sidecar as the user and needs
the interpreter, the venv and the checkout to be reachable by it. They often are not: a
pyenv Python under /root (0700), or a clone under /root in CI. Rather than change the
host's permissions, the launcher gives the sidecar its own mount namespace in which each
such closed directory is an empty tmpfs (0755) holding only those paths, bound back at
their own place; nothing else changes, and no mount leaks to the host (propagation is
private). Then it drops to the user's uid, gid and groups (`setpriv`, which execs: the
spawned pid is the sidecar's) with HOME, USER and LOGNAME the user's.

A second launcher makes bubblewrap fail the way it does on a restricted system: the
sidecar in a user namespace of its own whose `user.max_user_namespaces` is 0 (set only
inside that namespace; the host's is never touched), as a non-root uid without
capabilities there, so bwrap's own user namespace is refused (ENOSPC).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

USER = "acp-tester"
REPO = Path(__file__).resolve().parent.parent
_LOCK = Path(tempfile.gettempdir()) / ".acp-tester-setup.lock"


class SetupError(RuntimeError):
    """The unprivileged group cannot run here: a failure, never a skip (CI must run it)."""


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> Account:
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if found is None:
        raise SetupError(f"{name} is missing: the unprivileged tests need it (util-linux/passwd)")
    return found


def ensure_user() -> Account:
    """The user the sidecar runs as: `acp-tester` (created if missing) when we are root,
    else ourselves. Creation holds a lock, so parallel runs create it once."""
    if os.geteuid() != 0:
        return Account.of(pwd.getpwuid(os.geteuid()))
    with contextlib.suppress(KeyError):
        return Account.of(pwd.getpwnam(USER))
    fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(KeyError):
            return Account.of(pwd.getpwnam(USER))  # made by a run that held the lock first
        done = subprocess.run(
            [
                _tool("useradd"),
                "--system",
                "--create-home",
                "--user-group",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SetupError(f"useradd {USER} failed ({done.returncode}): {done.stderr.strip()}")
        return Account.of(pwd.getpwnam(USER))
    finally:
        os.close(fd)


@contextlib.contextmanager
def owned_dir(account: Account) -> Iterator[Path]:
    """A fresh 0700 directory under the temp dir owned by `account` (pytest's tmp dirs are
    root's and closed to others), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="acp-unprivileged-"))
    try:
        os.chown(path, account.uid, account.gid)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_dirs(account: Account, root: Path, *names: str) -> list[Path]:
    made = []
    for name in names:
        path = root / name
        path.mkdir()
        os.chown(path, account.uid, account.gid)
        made.append(path)
    return made


def _closed_ancestor(path: Path) -> Path | None:
    """The outermost directory on the way to `path` that others cannot enter."""
    for ancestor in [*reversed(path.parents), path]:
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            if ancestor == path:
                raise SetupError(f"{path} itself is closed to other users (mode 0700?)")
            return ancestor
    return None


def needed_paths() -> list[Path]:
    """What the sidecar's interpreter needs: the checkout, the venv, the base Python."""
    paths = {REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(path for path in paths if not any(top in path.parents for top in paths))


def _mount_script(stage: Path) -> str:
    """Shell lines (run as root in a private mount namespace) that make `needed_paths`
    reachable through their closed ancestors."""
    lines = ["set -e", "umask 022"]
    blocked: dict[Path, list[Path]] = {}
    for path in needed_paths():
        closed = _closed_ancestor(path)
        if closed is not None:
            blocked.setdefault(closed, []).append(path)
    keep = [path for paths in blocked.values() for path in paths]
    for index, path in enumerate(keep):
        lines.append(
            f"mkdir -p {stage}/{index}; mount --bind {shlex.quote(str(path))} {stage}/{index}"
        )
    for closed in blocked:
        lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(closed))}")
    for index, path in enumerate(keep):
        quoted = shlex.quote(str(path))
        lines.append(f"mkdir -p {quoted}; mount --bind {stage}/{index} {quoted}")
    return "\n".join(lines)


def launcher(account: Account, where: Path) -> str:
    """An executable that runs `<it> -m sidecar ARGS` as `account` (pass it as the
    harness's `python`); run as a normal user, the interpreter itself."""
    if os.geteuid() != 0:
        return sys.executable
    stage = where / "stage"
    stage.mkdir(mode=0o700, exist_ok=True)
    script = _mount_script(stage)
    drop = [
        _tool("setpriv"),
        f"--reuid={account.uid}",
        f"--regid={account.gid}",
        "--init-groups",
        "--",
        "/usr/bin/env",
        f"HOME={account.home}",
        f"USER={account.name}",
        f"LOGNAME={account.name}",
        "PYTHONDONTWRITEBYTECODE=1",
    ]
    inner = f'{script}\nexec {shlex.join(drop)} "$0" "$@"'
    outer = [_tool("unshare"), "--mount", "--propagation", "private", "--", "/bin/sh", "-c", inner]
    return _write_launcher(where / "as-user", outer)


def restricted_launcher(where: Path) -> str:
    """An executable that runs `<it> -m sidecar ARGS` where unprivileged user namespaces
    are switched off: a user namespace whose user.max_user_namespaces is 0, as uid 1000
    there, with no capabilities left."""
    inner = (
        "echo 0 > /proc/sys/user/max_user_namespaces\n"
        f'exec {_tool("setpriv")} --inh-caps=-all --ambient-caps=-all -- "$0" "$@"'
    )
    outer = [
        _tool("unshare"),
        "--user",
        "--map-user=1000",
        "--map-group=1000",
        "--keep-caps",
        "--",
        "/bin/sh",
        "-c",
        inner,
    ]
    return _write_launcher(where / "restricted", outer)


def _write_launcher(path: Path, argv: list[str]) -> str:
    path.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} {shlex.quote(sys.executable)} "$@"\n')
    path.chmod(0o700)
    return str(path)


def check_runs(python: str) -> None:
    """Fails (SetupError, with the child's own words) unless the launcher can import the
    sidecar as the user: a broken set-up must not look like a sandbox failure."""
    done = subprocess.run(
        [python, "-c", "import os, sidecar.app; print(os.geteuid())"],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
    )
    if done.returncode != 0:
        raise SetupError(f"cannot run the sidecar as the test user: {done.stderr.strip()}")
