"""What the core needs from outside, as small typed interfaces: a provider per runtime,
and (optionally) an HTTP listener per runtime. The wiring passes the implementations in;
the core imports neither an SDK nor aiohttp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from sidecar.agent.providers.base import Provider
from sidecar.core.endpoint import SessionEndpoint
from sidecar.domain.records import SessionRecord


class Listener(Protocol):
    """A runtime's local endpoint: its URL while it serves, and a bounded stop."""

    @property
    def url(self) -> str: ...

    async def stop(self) -> None: ...


# (the session endpoint it serves, the bearer token) -> a listener, or None where binding
# sockets is not allowed (the runtime then runs without an endpoint).
ListenerFactory = Callable[[SessionEndpoint, str], Awaitable[Listener | None]]
# A new provider client per runtime generation, never shared.
ProviderFactory = Callable[[SessionRecord], Provider]
