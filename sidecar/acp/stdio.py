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


# A write gathers the lines that work already scheduled on the loop adds within this many
# loop steps, up to this many lines.
COALESCE_STEPS = 16
COALESCE_LINES = 64


def _has_ready_work(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether callbacks other than the running one wait to run (asyncio's own loops keep
    them in `_ready`; another loop is taken as idle, so lines go out at once)."""
    ready = getattr(loop, "_ready", None)
    return bool(ready)


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

    def _take_queued(self, lines: list[bytes]) -> bool:
        """Move every queued line into `lines`; True if the stop mark came with them."""
        queue = self._queue
        while not queue.empty():
            more = queue.get_nowait()
            if more is None:
                return True
            lines.append(more)
        return False

    async def _batch(self, line: bytes) -> tuple[bytes, bool]:
        """`line` and what the loop's work already under way adds behind it, as one write:
        a turn's notifications and its reply come out of a few loop steps with no I/O wait
        between them, and one write (one wake-up of the client) instead of four is most of
        what a prompt's round trip costs on a busy machine. Never waits for anything but
        work already scheduled (bounded in steps and lines), so a lone reply goes out at
        once."""
        lines = [line]
        loop = asyncio.get_running_loop()
        for _ in range(COALESCE_STEPS):
            if self._take_queued(lines):
                return b"".join(lines), True
            if len(lines) >= COALESCE_LINES or not _has_ready_work(loop):
                break
            await asyncio.sleep(0)
        stopping = self._take_queued(lines)
        return (b"".join(lines) if len(lines) > 1 else line), stopping

    async def _run(self) -> None:
        stopping = False
        while not stopping and (line := await self._queue.get()) is not None:
            data, stopping = await self._batch(line)
            self._room.set()
            try:
                if self._writer is not None:
                    self._writer.write(data)
                    await self._writer.drain()
                else:
                    self._stream.write(data)
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
