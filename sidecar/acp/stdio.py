"""The sidecar's stdio as asyncio streams, with stdout reserved for the protocol.

At start the real stdout is duplicated to a private descriptor and fd 1 is
pointed at stderr: a stray print() anywhere (ours, a library's, a child's)
lands in the log instead of corrupting the JSON-RPC stream.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import threading
from typing import BinaryIO

from protocol.framing import MAX_MESSAGE_BYTES


def reserve_stdout() -> BinaryIO:
    protocol_fd = os.dup(sys.stdout.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return os.fdopen(protocol_fd, "wb", buffering=0)


async def open_reader(limit: int = MAX_MESSAGE_BYTES) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:
        # stdin is a regular file (`python -m sidecar < requests.jsonl`): feed it from a thread.
        stdin = sys.stdin.buffer
        assert isinstance(stdin, io.BufferedReader)

        def feed() -> None:
            try:
                while chunk := stdin.read1(1 << 16):
                    loop.call_soon_threadsafe(reader.feed_data, chunk)
            finally:
                loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=feed, name="stdin-feeder", daemon=True).start()
    return reader


class LineWriter:
    """Writes whole lines in the order they were queued, from one task."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._transport: asyncio.WriteTransport | None = None
        self._protocol: asyncio.StreamReaderProtocol | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._room = asyncio.Event()  # set whenever a queued line has been taken
        self.broken = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, self._stream
            )
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        except ValueError:
            self._writer = None  # a regular file: plain blocking writes are fine
        self._task = asyncio.create_task(self._run(), name="stdout-writer")

    def send(self, line: bytes) -> None:
        if not self.broken:
            self._queue.put_nowait(line)

    async def below(self, lines: int) -> None:
        """Wait until at most `lines` are queued: a producer of many notifications (a long
        replay) lets the replies of other requests through instead of queueing ahead of
        them by the thousand."""
        while self._queue.qsize() > lines and not self.broken and self._task is not None:
            self._room.clear()
            await self._room.wait()

    async def _run(self) -> None:
        while (line := await self._queue.get()) is not None:
            self._room.set()
            try:
                if self._writer is not None:
                    self._writer.write(line)
                    await self._writer.drain()
                else:
                    self._stream.write(line)
            except (BrokenPipeError, ConnectionResetError):
                # The client is gone; nothing more can be delivered. Shutdown follows EOF.
                self.broken = True
                self._room.set()
                return

    async def aclose(self) -> None:
        """Flush what is queued, then stop."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        await self._task
        if self._writer is not None:
            self._writer.close()
