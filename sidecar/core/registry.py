"""Which runtimes are live in this process, and one lifecycle operation per session at a time.

Registry changes are tied to the runtime object (its generation), never to the bare
session id: a runtime that fails to start removes itself, not whichever runtime has
taken its session's place meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Generic, Protocol, TypeVar

from sidecar.domain.errors import RuntimeLive


class Registrable(Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def generation(self) -> int: ...


R = TypeVar("R", bound=Registrable)


class RuntimeRegistry(Generic[R]):
    def __init__(self) -> None:
        self._by_id: dict[str, R] = {}

    def get(self, session_id: str) -> R | None:
        return self._by_id.get(session_id)

    def add(self, runtime: R) -> None:
        if runtime.session_id in self._by_id:
            raise RuntimeLive(runtime.session_id, "resume")
        self._by_id[runtime.session_id] = runtime

    def remove(self, runtime: R) -> bool:
        """Unregister `runtime` if it is the one registered; True if it was."""
        if self._by_id.get(runtime.session_id) is runtime:
            del self._by_id[runtime.session_id]
            return True
        return False

    def ids(self) -> list[str]:
        return list(self._by_id)

    def __iter__(self) -> Iterator[R]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id


class KeyedLock:
    """One asyncio lock per key, dropped when nobody holds or waits for it (so thousands of
    sessions do not leave thousands of locks behind)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def held(self, key: str) -> bool:
        entry = self._locks.get(key)
        return entry is not None and entry[0].locked()
