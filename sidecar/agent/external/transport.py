"""The agent's pipes as ACP's message transport, tolerant of what an agent may print.

The SDK's own stdio reader skips a line that is not JSON, but a JSON line that is not an
object (`[1,2,3]`, `"text"`) ends its receive loop, and with it every pending request.
An agent's stdout is untrusted: here only JSON objects are messages; anything else is
logged (cut short) and skipped, and a line longer than the reader's limit is skipped
whole. Writes are serialised, one message per line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Final

log = logging.getLogger(__name__)

SHOWN: Final = 120  # characters of a skipped line in the log


class AgentTransport:
    """`acp` Transport (send/receive/close) over an agent's stdin and stdout."""

    def __init__(
        self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._name = name
        self._reader = reader
        self._writer = writer
        self._sending = asyncio.Lock()
        self.skipped = 0  # lines that were not messages

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        async with self._sending:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                return None
            text = line.strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                self._skip("not JSON", text)
                continue
            if isinstance(message, dict):
                return message
            self._skip("JSON but not an object", text)

    async def _read_line(self) -> bytes | None:
        """One line; None at EOF. A line over the reader's limit is read through and
        dropped (its end is found, the stream stays in step)."""
        try:
            return await self._reader.readuntil(b"\n") or None
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError:
            while True:
                try:
                    await self._reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as more:
                    await self._reader.readexactly(more.consumed)
                except asyncio.IncompleteReadError:
                    return None
            self._skip("longer than the limit", b"")
            return b""

    def _skip(self, why: str, text: bytes) -> None:
        self.skipped += 1
        shown = text[:SHOWN].decode("utf-8", "replace")
        log.warning("agent %s printed a line that is %s: dropped %r", self._name, why, shown)

    async def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()
