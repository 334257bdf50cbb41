"""What aiohttp may log about a malformed request, made safe and bounded.

aiohttp logs a request it cannot parse as "Error handling request" with the exception,
whose text quotes the offending header line: an `Authorization` line with a stray byte
put the bearer token in the log. And any local process can send such requests as fast
as it likes. So aiohttp gets a logger of its own whose filter rewrites every record to
one short line naming only the peer and the kind of error (never the exception text,
never a traceback), and lets at most a few through per interval, counting the rest.
"""

from __future__ import annotations

import logging
import time
from typing import Final

BURST: Final = 5  # records let through per interval
INTERVAL: Final = 10.0  # seconds


class _SafeAndBounded(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._window_start = 0.0
        self._passed = 0
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        if error is None and not str(record.msg).startswith("Error handling request"):
            return True  # aiohttp's own plain notes ("Ignored premature client disconnection")
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        kind = type(error).__name__ if error is not None else "error"
        record.msg = "malformed HTTP request from %s refused (%s)"
        record.args = (peer, kind)
        now = time.monotonic()
        if now - self._window_start >= INTERVAL:
            if self._dropped:
                record.msg += "; %d more in the last %.0f s not logged"
                record.args = (peer, kind, self._dropped, INTERVAL)
            self._window_start, self._passed, self._dropped = now, 0, 0
        if self._passed >= BURST:
            self._dropped += 1
            return False
        self._passed += 1
        return True


def request_error_logger() -> logging.Logger:
    """The logger aiohttp's request handlers get (one for the process)."""
    logger = logging.getLogger("sidecar.http.requests")
    if not any(isinstance(f, _SafeAndBounded) for f in logger.filters):
        logger.addFilter(_SafeAndBounded())
    return logger
