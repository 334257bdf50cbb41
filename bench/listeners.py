"""Floor and peer for per-session listeners: N loopback HTTP listeners in one process.

`python -m bench.listeners [--threads]` speaks the same newline JSON-RPC as the
other children; `open {"count": K}` opens K more listeners on 127.0.0.1:0 and answers
their ports. Each answers any request with a small JSON body and closes.

- default (asyncio): `asyncio.start_server` per listener with a bare HTTP/1.1
  reply -- the floor for "one listener per session" on an event loop.
- `--threads`: an `http.server.HTTPServer` per listener, each serving from its own
  thread -- the thread-per-listener design the issue quotes (about 22 KiB each).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socketserver
import sys
import threading
from typing import Any

BODY = json.dumps({"status": "idle", "live": True, "generation": 1}).encode()
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(HEAD + BODY)
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(socketserver.TCPServer):
    allow_reuse_address = True


async def serve(threads: bool) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    keep: list[object] = []
    while line := await reader.readline():
        message = json.loads(line)
        ports: list[int] = []
        if message.get("method") == "open":
            for _ in range(int(message["params"]["count"])):
                if threads:
                    server = _Server(("127.0.0.1", 0), _Handler)
                    threading.Thread(target=server.serve_forever, daemon=True).start()
                    ports.append(int(server.server_address[1]))
                    keep.append(server)
                else:
                    aserver = await asyncio.start_server(_answer, "127.0.0.1", 0)
                    ports.append(int(aserver.sockets[0].getsockname()[1]))
                    keep.append(aserver)
        reply = {"jsonrpc": "2.0", "id": message.get("id"), "result": {"ports": ports}}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


def main() -> int:
    asyncio.run(serve("--threads" in sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
