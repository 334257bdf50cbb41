"""Drive an async `SessionStore` from synchronous code (benchmark set-up, tests).

Every call runs the store's own coroutine to completion on one private event loop, so
the caller exercises the real async implementation. Never use it inside a running loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from sidecar.store.base import SessionStore


class BlockingStore:
    def __init__(self, store: SessionStore, loop: asyncio.AbstractEventLoop) -> None:
        self.impl = store
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.impl, name)
        if not inspect.iscoroutinefunction(method):
            return method  # plain attributes and helpers (e.g. `_conn`, `path`) as they are

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(method(*args, **kwargs))

        return call


def blocking(factory: Callable[[], SessionStore]) -> tuple[BlockingStore, Callable[[], None]]:
    """A store made on a fresh private loop, and the function that closes both."""
    loop = asyncio.new_event_loop()
    store = BlockingStore(loop.run_until_complete(_make(factory)), loop)

    def close() -> None:
        try:
            store.close()
        finally:
            loop.close()

    return store, close


async def _make(factory: Callable[[], SessionStore]) -> SessionStore:
    return factory()
