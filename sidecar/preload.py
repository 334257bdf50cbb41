"""Modules the start-up thread loads while the event loop already answers, and that
code on the loop may need before they are loaded.

Two threads importing one package at once can each see the other's half-initialized
modules (CPython's import locks are per module: `ImportError: cannot import name ... from
partially initialized module`). So every import of these goes through one `Preload`:
the first `ensure()` imports under its lock, a caller that comes while another thread
is importing waits for it, and later calls cost an attribute check. Code that uses
such a module calls its `ensure()` before importing it (ACP's SDK: `acp/preload.py`;
the HTTP listener: `http/deferred.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Preload:
    def __init__(self, load: Callable[[], None]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self.done = False

    def ensure(self) -> None:
        """Loaded when this returns (here, or by the thread that was loading it)."""
        if self.done:
            return
        with self._lock:
            if not self.done:
                self._load()
                self.done = True
