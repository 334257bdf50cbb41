"""Which models the provider offers, asked once and kept for a while.

A session's model choice (the ACP `model` config option) lists these. Asking costs a
request to the provider's server, so the answer is cached; when the server cannot say
(down, no such endpoint, no key) the configured model is all there is, and that is
cached for a shorter while.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from sidecar.domain.errors import ProviderError

log = logging.getLogger(__name__)

FRESH: Final = 600.0  # seconds a listed answer is kept
RETRY: Final = 60.0  # seconds until a failed listing is tried again
ASK_TIMEOUT: Final = 5.0


class ModelCatalog:
    def __init__(self, lister: Callable[[], Awaitable[list[str]]], configured: str) -> None:
        self._lister = lister
        self._configured = configured
        self._models: list[str] = []
        self._until = 0.0
        self._asking: asyncio.Task[list[str]] | None = None

    async def models(self) -> list[str]:
        """The offered models, the configured one always among them."""
        if time.monotonic() >= self._until:
            if self._asking is None or self._asking.done():
                self._asking = asyncio.create_task(self._ask())
            self._models = await asyncio.shield(self._asking)
        return self._models

    async def _ask(self) -> list[str]:
        try:
            async with asyncio.timeout(ASK_TIMEOUT):
                listed = await self._lister()
        except (ProviderError, TimeoutError) as exc:
            log.info("model list unavailable (%s); offering %s", exc, self._configured)
            self._until = time.monotonic() + RETRY
            return [self._configured]
        self._until = time.monotonic() + FRESH
        return listed if self._configured in listed else [self._configured, *listed]
