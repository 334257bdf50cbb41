"""A command's output, bounded twice: what the model keeps, and what is streamed live.

The model and the transcript keep the first `output_cap` bytes (the cap is marked
in the tool result). Clients watching the event stream see more, up to
`stream_cap` bytes, then one notice: a command that floods output can neither
fill the store nor drown the protocol.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from sidecar.agent.backends.groups import CommandLimits


class CappedOutput:
    def __init__(self, limits: CommandLimits, on_output: Callable[[str], None] | None) -> None:
        self._cap = limits.output_cap
        self._stream_cap = max(limits.stream_cap, limits.output_cap)
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._kept = bytearray()
        self._streamed = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self._cap - len(self._kept)
        if room > 0:
            self._kept.extend(chunk[:room])
        if len(chunk) > room:
            self.truncated = True  # the caller keeps draining, so the command never blocks
        stream_room = self._stream_cap - self._streamed
        if self._on_output is None or stream_room <= 0:
            return
        part = chunk[:stream_room]
        self._streamed += len(part)
        text = self._decoder.decode(part)
        if text:
            self._on_output(text)
        if self._streamed >= self._stream_cap:
            self._on_output(f"\n[output stream truncated at {self._stream_cap} bytes]\n")

    def text(self) -> str:
        return self._kept.decode("utf-8", errors="replace")
