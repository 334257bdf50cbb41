"""Serve an ASGI app on 127.0.0.1 with a free port; write the port to a file when listening."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import uvicorn

Scope = dict[str, Any]


class RequireToken:
    """401 for any request without the expected bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != self._expected:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self._app(scope, receive, send)


def serve(app: Any, port_file: Path, token: str | None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    if token is not None:
        app = RequireToken(app, token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    port_file.write_text(str(sock.getsockname()[1]))
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
