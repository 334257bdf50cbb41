"""The listener's socket: bound to loopback by the OS's choice of port, and capped.

Binding to port 0 lets the OS pick a free port atomically (no check-then-bind race).
Where binding is not allowed at all, the session runs without an endpoint; where
descriptors or ports have run out, the caller is told. A site that refuses
connections beyond a cap keeps one session's idle or trickling clients from using
up the descriptors every other session's listener needs.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from typing import Final

from aiohttp import web

from sidecar.domain import errors

log = logging.getLogger("sidecar.http")

# Per listener: enough for many local tools at once, far below the open-file limit.
MAX_CONNECTIONS: Final = 256
# An idle keep-alive connection is closed after this many seconds.
KEEPALIVE_TIMEOUT: Final = 15.0
# Binding refused by policy or sandbox: run without an endpoint, don't fail the session.
_BIND_UNAVAILABLE: Final = frozenset(
    {errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL}
)
# Out of descriptors, buffers or ephemeral ports: the caller should hear about it.
_BIND_EXHAUSTED: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRINUSE}
)


class _Refuse(asyncio.Protocol):
    """Answers a connection over the cap with a JSON 503 and hangs up, without parsing."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        body = b'{"error": "too many connections to this session\'s listener"}'
        transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        transport.close()


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, counted from the moment it is accepted (not
    when aiohttp gets round to registering it) until the connection is gone."""

    def __init__(self, inner: asyncio.Protocol, site: CappedSockSite) -> None:
        self.inner = inner
        self._site = site
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._site._forget(self)
        self.inner.connection_lost(exc)


class CappedSockSite(web.SockSite):
    """A site with a hard cap on open connections, so idle or trickling clients of one
    session cannot use up the descriptors every other session's listener needs.

    At the cap, the oldest connection with no request being handled (idle keep-alive, or
    a request still trickling in) is closed to make room: a slow client can never lock
    the token holder out. Only when every connection is busy is a newcomer refused (503).
    """

    def __init__(self, runner: web.AppRunner, sock: socket.socket, cap: int) -> None:
        super().__init__(runner, sock)
        self._cap = cap
        self._open: dict[_Tracked, None] = {}  # insertion order: oldest first
        self._busy: dict[asyncio.BaseProtocol, int] = {}

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def begin_request(self, protocol: asyncio.BaseProtocol | None) -> None:
        if protocol is not None:
            self._busy[protocol] = self._busy.get(protocol, 0) + 1

    def end_request(self, protocol: asyncio.BaseProtocol | None) -> None:
        if protocol is None:
            return
        left = self._busy.get(protocol, 0) - 1
        if left > 0:
            self._busy[protocol] = left
        else:
            self._busy.pop(protocol, None)

    def _forget(self, tracked: _Tracked) -> None:
        self._open.pop(tracked, None)
        self._busy.pop(tracked.inner, None)

    def _make_room(self) -> bool:
        for tracked in self._open:
            if tracked.inner not in self._busy and tracked.transport is not None:
                self._open.pop(tracked)
                tracked.transport.close()
                return True
        return False

    async def start(self) -> None:
        server = self._runner.server
        assert server is not None

        def factory() -> asyncio.BaseProtocol:
            if len(self._open) >= self._cap and not self._make_room():
                return _Refuse()
            tracked = _Tracked(server(), self)
            self._open[tracked] = None
            return tracked

        await web.BaseSite.start(self)
        self._server = await asyncio.get_running_loop().create_server(
            factory, sock=self._sock, backlog=self._backlog
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
