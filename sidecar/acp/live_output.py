"""A running command's output as standard ACP content, for every client.

ACP's `tool_call_update.content` replaces the previous content, so a live view is the
accumulated output so far, resent as it grows: at most about ten times a second per
call (a flooding command cannot flood the client), and once more when it goes quiet,
so the last live update is always complete. The accumulation stops at the stream cap,
as the output events themselves do.

The content is plain text, as the transcript's is: escape sequences are removed as the
chunks arrive (a sequence cut between two chunks waits for its end), so a client that
shows text shows no escape codes; the colours ride only in our `_meta.output` chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from sidecar.agent.backends.output import ANSI_PATTERN, strip_ansi

INTERVAL: Final = 0.1  # seconds between content updates of one call
MAX_HELD: Final = 4096  # characters of an unfinished escape sequence waited for, at most


def _plain_upto(text: str) -> int:
    """Where `text` can be cut and stripped: before an escape sequence that has not ended
    yet, or a carriage return that may be half of a CRLF."""
    end = len(text)
    esc = text.rfind("\x1b", max(0, end - MAX_HELD))
    if esc != -1 and ANSI_PATTERN.match(text, esc) is None:
        end = esc
    if end and text[end - 1] == "\r":
        end -= 1
    return end


@dataclass
class _Call:
    chunks: list[str] = field(default_factory=list)  # plain text
    size: int = 0  # raw characters taken (the cap counts what the command printed)
    held: str = ""  # raw text not stripped yet (an escape sequence cut between chunks)
    last_sent: float = float("-inf")
    timer: asyncio.TimerHandle | None = None


class LiveOutput:
    """Accumulates output per tool call and decides when to send it.

    `send(call_id, text)` is called with the whole output so far whenever an update is
    due; the caller turns it into a `tool_call_update`.
    """

    def __init__(self, send: Callable[[str, str], None], cap: int) -> None:
        self._send = send
        self._cap = cap
        self._calls: dict[str, _Call] = {}

    def add(self, call_id: str, text: str) -> None:
        call = self._calls.setdefault(call_id, _Call())
        room = self._cap - call.size
        if room > 0:
            part = text[:room]
            call.size += len(part)
            raw = call.held + part
            cut = _plain_upto(raw)
            call.held = raw[cut:]
            call.chunks.append(strip_ansi(raw[:cut]))
        loop = asyncio.get_running_loop()
        due = call.last_sent + INTERVAL - loop.time()
        if due <= 0:
            self._flush(call_id)
        elif call.timer is None:
            call.timer = loop.call_later(due, self._flush, call_id)

    def finish(self, call_id: str) -> None:
        """The call ended: bring the live view up to date once more, then forget it."""
        call = self._calls.get(call_id)
        if call is None:
            return
        if call.held:
            call.chunks.append(strip_ansi(call.held))
            call.held = ""
            self._flush(call_id)
        elif call.timer is not None:
            self._flush(call_id)
        self._calls.pop(call_id, None)

    def _flush(self, call_id: str) -> None:
        call = self._calls.get(call_id)
        if call is None:
            return
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        call.last_sent = asyncio.get_running_loop().time()
        text = "".join(call.chunks)
        call.chunks = [text]
        self._send(call_id, text)
