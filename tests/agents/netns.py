"""A network namespace with only loopback up, owned by one process others can join.

Why: a real agent must be tested fully offline, and must fail if it reaches for anything
but loopback. The owner process (the fake model server) is started by `unshare` in a new
network and mount namespace: `lo` is brought up, and /etc/resolv.conf is bind-mounted (in
that mount namespace only) to name 127.0.0.1 as the resolver, where the server logs every
lookup. Agents join both namespaces with `nsenter --target=<owner pid>`, so 127.0.0.1:PORT
reaches the fake server and every other address is ENETUNREACH. The test process stays
outside: it talks to the agent over pipes and to the server over a Unix socket (filesystem
sockets cross network namespaces).

As root this needs CAP_SYS_ADMIN; as a normal user `unshare --map-root-user` makes a user
namespace too (unprivileged user namespaces must be enabled) and `nsenter --user` joins it.
Tools: unshare, nsenter, mount (Debian util-linux, mount) and ip (iproute2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

TOOLS = {"unshare": "util-linux", "nsenter": "util-linux", "mount": "mount", "ip": "iproute2"}
# Runs in the new namespaces before the owner's own program: $0 is the resolv.conf to use.
SETUP = 'ip link set lo up && mount --bind "$0" /etc/resolv.conf && exec "$@"'
PROBE = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as e:
    print(e.errno)
"""


def require_tools() -> None:
    """Fail (never skip) naming the package to install when a tool is missing."""
    missing = [
        f"{tool} (Debian package {pkg})" for tool, pkg in TOOLS.items() if not shutil.which(tool)
    ]
    if missing:
        raise RuntimeError(f"network-namespace tests need: {', '.join(missing)}")


class Netns:
    """The owner process of a fresh loopback-only namespace; `enter` prefixes argv to join it."""

    def __init__(self, process: subprocess.Popen[bytes], rootless: bool) -> None:
        self.process, self.rootless = process, rootless

    @classmethod
    def start(cls, argv: Sequence[str], tmp: Path, env: Mapping[str, str] | None = None) -> Netns:
        """Start argv as the owner of new network and mount namespaces; tmp holds resolv.conf."""
        require_tools()
        rootless = os.geteuid() != 0
        resolv = tmp / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n", encoding="utf-8")
        unshare = ["unshare", "--net", "--mount", *(["--map-root-user"] if rootless else [])]
        process = subprocess.Popen(
            [*unshare, "--", "sh", "-c", SETUP, str(resolv), *argv],
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(process, rootless)

    @property
    def pid(self) -> int:
        return self.process.pid

    def enter(self, argv: Sequence[str], cwd: Path) -> list[str]:
        """argv run inside the namespaces (joining one resets the directory, so cwd is given)."""
        user = ["--user", "--preserve-credentials"] if self.rootless else []
        target = [f"--target={self.pid}", *user, "--net", "--mount", f"--wd={cwd}"]
        return ["nsenter", *target, "--", *argv]

    def probe(self, host: str, port: int) -> str:
        """What a TCP connect from inside gets: "connected" or the errno's number."""
        argv = self.enter([sys.executable, "-c", PROBE, host, str(port)], Path("/"))
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

    def wait_for(self, path: Path, timeout: float = 20.0) -> None:
        """Wait for the owner to create path (its ready signal), failing if it exits first."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"the namespace owner exited {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the namespace owner did not create {path}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
