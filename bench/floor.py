"""The floor: the least a Python process can do to answer newline-delimited JSON-RPC.

`python -m bench.floor` reads one JSON object per line from stdin and, for every
request, writes `{"jsonrpc": "2.0", "id": ..., "result": {"method", "params"}}`: a parse,
a serialization and a pipe round trip, nothing else. It exits on EOF.

`python -m bench.floor --asyncio` does the same on an asyncio event loop (a pipe
`StreamReader` and a write transport, one task per request, as an asyncio server
would): the floor for any asyncio design, the sidecar's included.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


def _reply(line: bytes) -> bytes | None:
    message = json.loads(line)
    if "id" not in message:
        return None
    result = {"method": message.get("method"), "params": message.get("params")}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n"


def blocking() -> None:
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while line := source.readline():
        reply = _reply(line)
        if reply is not None:
            sink.write(reply)
            sink.flush()


async def evented() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    tasks: set[asyncio.Task[Any]] = set()

    async def answer(line: bytes) -> None:
        reply = _reply(line)
        if reply is not None:
            transport.write(reply)

    while line := await reader.readline():
        task = asyncio.create_task(answer(line))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)


def main() -> int:
    if "--asyncio" in sys.argv[1:]:
        asyncio.run(evented())
    else:
        blocking()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
