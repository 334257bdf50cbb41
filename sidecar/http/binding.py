"""The listener's socket: bound to loopback by the OS's choice of port, before aiohttp is
needed (`deferred.py`).

Binding to port 0 lets the OS pick a free port atomically (no check-then-bind race).
Where binding is not allowed at all, the session runs without an endpoint; where
descriptors or ports have run out, the caller is told.
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Final

from sidecar.domain import errors

log = logging.getLogger("sidecar.http")

# Binding refused by policy or sandbox: run without an endpoint, don't fail the session.
_BIND_UNAVAILABLE: Final = frozenset(
    {errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL}
)
# Out of descriptors, buffers or ephemeral ports: the caller should hear about it.
_BIND_EXHAUSTED: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRINUSE}
)


def bind_loopback(session_id: str) -> socket.socket | None:
    """A listening socket on 127.0.0.1 with an OS-chosen port (no check-then-bind race)."""
    sock: socket.socket | None = None
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        return sock
    except BaseException as exc:
        if sock is not None:
            sock.close()
        if not isinstance(exc, OSError):
            raise
        if isinstance(exc, PermissionError) or exc.errno in _BIND_UNAVAILABLE:
            log.warning(
                "session %s: socket binding unavailable (%s); running without an HTTP endpoint",
                session_id,
                exc,
            )
            return None
        if exc.errno in _BIND_EXHAUSTED:
            raise errors.ResourceExhausted(
                f"cannot open an HTTP listener for session {session_id}: "
                f"no file descriptors or ports left ({exc.strerror})"
            ) from exc
        raise


def bind_listener(session_id: str, token: str, max_body: int) -> socket.socket | None:
    """A listener's socket once its settings are checked (`bind_loopback`'s None where
    binding is not allowed)."""
    if not token:
        raise ValueError("token must not be empty")
    if max_body < 1:
        raise ValueError("max_body must be at least 1")
    return bind_loopback(session_id)
