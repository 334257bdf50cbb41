"""A command's output, bounded three times: what the model keeps, what is streamed live,
and what is spooled to disk for the user.

The model and the transcript keep the first `output_cap` bytes, cut back to a line
boundary and as plain text (escape sequences removed, whichever backend: a model has no
terminal). Clients watching the event stream see more, up to `stream_cap` bytes, raw,
then one notice. A spool file, when the runtime gives one, keeps everything up to its
own cap, so "full output" is there after the fact. A command that floods output can fill
neither the store nor the protocol nor the disk.

The caller owns the object: after a cancel, what was printed so far is still here.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Protocol

from sidecar.agent.backends.groups import CommandLimits

# CSI (incl. private modes), OSC (terminated by BEL or ST), and 2-byte escapes.
ANSI_PATTERN = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
# Other C0 controls a terminal would act on (not tab, newline, carriage return).
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    """Plain text: escape sequences and stray control characters removed, CRLF folded."""
    plain = ANSI_PATTERN.sub("", text)
    plain = plain.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", plain)


class Spool(Protocol):
    """Where the whole output goes (a file in the data dir)."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class CommandOutput:
    def __init__(
        self,
        limits: CommandLimits,
        on_output: Callable[[str], None] | None = None,
        spool: Spool | None = None,
        spool_cap: int = 0,
    ) -> None:
        self._cap = limits.output_cap
        self._stream_cap = max(limits.stream_cap, limits.output_cap)
        self._on_output = on_output
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._kept = bytearray()
        self._streamed = 0
        self._spool = spool
        self._spool_cap = spool_cap
        self.total = 0  # bytes the command printed
        self.spooled = 0  # bytes in the spool
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._cap - len(self._kept)
        if room > 0:
            self._kept.extend(chunk[:room])
        if len(chunk) > room:
            self.truncated = True  # the caller keeps draining, so the command never blocks
        self._to_spool(chunk)
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

    def _to_spool(self, chunk: bytes) -> None:
        if self._spool is None:
            return
        room = self._spool_cap - self.spooled
        if room <= 0:
            return
        part = chunk[:room]
        try:
            self._spool.write(part)
        except OSError:
            # A full disk must not stop the command or the turn: the spool stops here and
            # says so (`spool_complete` is False), the model's part is unaffected.
            self.close()
            self._spool_cap = self.spooled
            return
        self.spooled += len(part)

    @property
    def spool_complete(self) -> bool:
        return self.spooled == self.total

    def close(self) -> None:
        spool, self._spool = self._spool, None
        if spool is not None:
            spool.close()

    def text(self) -> str:
        """What the model is told: plain text; when cut, cut after the last whole line."""
        return strip_ansi(self._kept_lines().decode("utf-8", errors="replace"))

    def _kept_lines(self) -> bytes:
        kept = bytes(self._kept)
        if self.truncated:
            end = kept.rfind(b"\n")
            if end > 0:
                return kept[: end + 1]
        return kept

    @property
    def cut_at_line(self) -> bool:
        """Whether the model's part ends where a line ended (not mid-line)."""
        return len(self._kept_lines()) < len(self._kept)
