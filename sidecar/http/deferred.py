"""A session's HTTP listener, opened before aiohttp is loaded.

aiohttp is ~0.13 s of imports, most of what a sidecar's first `session/new` would
otherwise wait for. So the runtime's socket is bound at once (`binding.py`: the session
has its port, and so its URL, from the first moment) and aiohttp serves that socket as
soon as `listener.py` is loaded: by the start-up thread right after the heavy half
(`sidecar/app.py`), or here in a worker thread if nobody has yet. A client that connects
meanwhile waits in the kernel's backlog, as for any busy server; it is never refused.

A listener that fails to start serving is logged and its socket closed (its clients are
refused, the session runs on without an endpoint, as where binding is not allowed).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import socket
from typing import TYPE_CHECKING

from sidecar.http.binding import bind_listener
from sidecar.preload import Preload

if TYPE_CHECKING:  # the light half imports this module: no core, no aiohttp
    from sidecar.core.endpoint import SessionEndpoint
    from sidecar.http.listener import Listener

log = logging.getLogger("sidecar.http")


def _import_listener() -> None:
    importlib.import_module("sidecar.http.listener")


# aiohttp and the listener's routes: `sidecar/app.py`'s start-up thread loads it after the
# heavy half; `_serve` waits for it (or loads it itself).
LISTENER = Preload(_import_listener)


class DeferredListener:
    """One runtime's listener: bound now, served once aiohttp is loaded."""

    def __init__(self, target: SessionEndpoint, token: str, sock: socket.socket, max_body: int):
        self.port: int = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._session_id = target.session_id
        self._sock = sock
        self._serving = asyncio.ensure_future(self._serve(target, token, max_body))
        self._serving.add_done_callback(self._failed)
        self._stop_task: asyncio.Task[None] | None = None

    async def _serve(self, target: SessionEndpoint, token: str, max_body: int) -> Listener:
        if not LISTENER.done:
            await asyncio.to_thread(LISTENER.ensure)
        from sidecar.http.listener import Listener

        listener = Listener(target, token, self._sock, max_body)
        await listener.start()
        return listener

    def _failed(self, serving: asyncio.Future[Listener]) -> None:
        if serving.cancelled() or serving.exception() is None:
            return
        log.error(
            "session %s: the HTTP listener could not start serving: %s",
            self._session_id,
            serving.exception(),
        )
        self._sock.close()

    async def serving(self) -> None:
        """Until aiohttp serves the socket (or could not)."""
        await asyncio.wait([self._serving])

    async def stop(self) -> None:
        """Stop serving (or stop waiting to), then close the socket. Idempotent."""
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._stop_task)

    async def _shutdown(self) -> None:
        if not self._serving.done():
            self._serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([self._serving])
        if not self._serving.cancelled() and self._serving.exception() is None:
            await self._serving.result().stop()
        self._sock.close()


async def open_listener(
    target: SessionEndpoint, token: str, *, max_body: int = 1024 * 1024
) -> DeferredListener | None:
    """Serve `target` on 127.0.0.1:<free port> (soon), or None where binding is not allowed."""
    sock = bind_listener(target.session_id, token, max_body)
    if sock is None:
        return None
    return DeferredListener(target, token, sock, max_body)
