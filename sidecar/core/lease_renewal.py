"""Keeping this process's leases alive, and noticing the ones it lost.

Every lease this process holds is renewed in one statement every third of the lease
time, whatever their number; each round first measures the store's clock again, so
expiries stay on the store's clock even if this host's clock is stepped. A session another process took over meanwhile (after we
were frozen past the expiry, say) is not in the renewed set any more: its runtime here
is dropped, unwritten (its writes would be fenced anyway). A lease renewed for a
session with no runtime here (its close could not write `closed` while the store was
away) is released: otherwise we would keep it, and every other host off it, for as
long as we live.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

from sidecar.core.leases import Leases
from sidecar.core.registry import RuntimeRegistry
from sidecar.domain.errors import SidecarError
from sidecar.domain.records import now
from sidecar.store.base import SessionStore

log = logging.getLogger(__name__)


class Renewed(Protocol):
    """What the renewal reads of a live runtime, and the mark it sets on a lost one."""

    @property
    def session_id(self) -> str: ...

    @property
    def generation(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    @property
    def superseded(self) -> bool: ...

    def supersede(self) -> None: ...


R = TypeVar("R", bound=Renewed)


class LeaseRenewal(Generic[R]):
    def __init__(
        self,
        store: SessionStore,
        leases: Leases,
        registry: RuntimeRegistry[R],
        drop: Callable[[R], Coroutine[Any, Any, None]],
        release: Callable[[str], Coroutine[Any, Any, None]],
    ) -> None:
        self._store = store
        self._leases = leases
        self._registry = registry
        self._drop = drop
        self._release = release
        self._task: asyncio.Task[None] | None = None
        self._dropping: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="leases")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(self._leases.ttl / 3)
            await self.renew_once()

    async def renew_once(self) -> None:
        try:
            await self._leases.sync(self._store)
            held = await self._store.renew_leases(self._leases.owner, self._leases.expiry(now()))
        except SidecarError as exc:
            log.error("renewing leases failed: %s", exc)
            return
        for runtime in self._registry:
            if runtime.session_id not in held and not runtime.closed and not runtime.superseded:
                log.warning(
                    "session %s was taken over elsewhere; stopping here", runtime.session_id
                )
                runtime.supersede()
                self._background(self._drop(runtime))
        for session_id in held.difference(self._registry.ids()):
            self._background(self._release(session_id))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)
