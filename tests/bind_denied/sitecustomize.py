"""Loaded by Python at start-up when this directory is on PYTHONPATH (tests only).

Simulates a sandbox that forbids binding IP sockets: `socket.socket.bind` raises
PermissionError for AF_INET/AF_INET6 and works as usual for other families
(asyncio's self-pipe is an AF_UNIX socketpair). Announces itself on stderr so a
test can tell the patch was active; stdout is the sidecar's protocol channel.
"""

import errno
import socket
import sys

_original_bind = socket.socket.bind


def _bind(self, address):  # type: ignore[no-untyped-def]
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise PermissionError(errno.EACCES, "bind refused by tests/bind_denied/sitecustomize.py")
    return _original_bind(self, address)


socket.socket.bind = _bind  # type: ignore[method-assign]
sys.stderr.write("bind_denied sitecustomize active\n")
