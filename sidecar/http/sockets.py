"""The listener's site: capped, so one session's idle or trickling clients cannot use up
the descriptors every other session's listener needs (the socket itself is bound by
`binding.py`)."""

from __future__ import annotations

import asyncio
import socket
from http import HTTPStatus
from typing import Final

from aiohttp import web

# Per listener: enough for many local tools at once, far below the open-file limit.
MAX_CONNECTIONS: Final = 256
# An idle keep-alive connection is closed after this many seconds.
KEEPALIVE_TIMEOUT: Final = 15.0


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


class _JsonErrors(web.RequestHandler):
    """aiohttp's handler for one connection, answering in JSON what its HTTP parser refuses
    (a request line or header over its limits, broken framing): those requests never reach
    a route or a middleware, and aiohttp's own answer is text/plain, where every other
    error of the listener is `{"error": "..."}`."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; refuses if already sent
        try:
            phrase = HTTPStatus(status).phrase.lower()
        except ValueError:
            phrase = str(status)
        what = "the request could not be read" if status < 500 else "the request failed"
        response = web.json_response({"error": f"{phrase}: {what}"}, status=status)
        response.force_close()
        return response


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
            handler = server()
            handler.__class__ = _JsonErrors  # the same object, its errors in JSON
            tracked = _Tracked(handler, self)
            self._open[tracked] = None
            return tracked

        await web.BaseSite.start(self)
        self._server = await asyncio.get_running_loop().create_server(
            factory, sock=self._sock, backlog=self._backlog
        )
