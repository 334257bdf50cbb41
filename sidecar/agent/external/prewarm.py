"""Warm start (`--prewarm AGENT`): one initialized process of an agent kept ready.

Why per directory: each session's agent runs in that session's own sandbox, and the
sandbox is fixed when the process starts (its cwd bound writable, its mode). So a warm
process is made for a place, the directory and sandbox mode of that agent's last session
(the sidecar's working directory, in workspace mode, before its first one), and a new
session of that agent in the same place takes it: spawn and `initialize` are already
done, only the agent's `session/new` is left. A session elsewhere starts cold. Taking
the warm process starts its replacement at once, in the background; an agent's last
session moving to another directory moves its warm process there.

A warm process belongs to no session until taken: whatever it sends meanwhile is dropped
(its router serves no session yet), and it is stopped in stages like any agent at exit.
Taken, it becomes the session's agent connection (`pool.py`), which later sessions of a
`shared_process` agent in the same place join.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from acp import schema
from acp.client.connection import ClientSideConnection

from protocol.values import Sandbox
from sidecar.agent.external.process import AgentProcess
from sidecar.agent.external.router import SessionRouter

log = logging.getLogger(__name__)

RETRY_AFTER: Final = 30.0  # seconds before a warm start that failed is tried again


@dataclass(frozen=True, slots=True)
class Place:
    """Where a warm process can serve: the agent, the real cwd, the sandbox mode."""

    agent: str
    cwd: str
    sandbox: Sandbox


@dataclass(slots=True)
class WarmAgent:
    """A started, initialized agent process waiting for a session."""

    place: Place
    process: AgentProcess
    conn: ClientSideConnection
    router: SessionRouter
    init: schema.InitializeResponse

    async def stop(self) -> None:
        await self.process.stop()
        with contextlib.suppress(Exception):
            await self.conn.close()


Starter = Callable[[Place], Awaitable[WarmAgent]]


class Prewarmer:
    """The warm processes of the agents named by --prewarm, one per agent at most."""

    def __init__(self, agents: frozenset[str], start: Starter, first_cwd: str) -> None:
        self._agents = agents
        self._start = start
        self._ready: dict[str, WarmAgent] = {}
        self._starting: dict[str, asyncio.Task[None]] = {}
        self._wanted: dict[str, Place] = {}
        self._failed_at: dict[str, float] = {}
        self._closed = False
        for agent in agents:
            self._wanted[agent] = Place(agent, first_cwd, Sandbox.WORKSPACE)

    def covers(self, agent: str) -> bool:
        return agent in self._agents

    def begin(self) -> None:
        """Start the first warm processes (from the event loop, once it runs)."""
        for agent in self._agents:
            self._ensure(agent)

    def take(self, place: Place) -> WarmAgent | None:
        """The warm process for exactly this place, if one is ready (its replacement is
        started right away); None otherwise (the session starts cold)."""
        if place.agent not in self._agents:
            return None
        self._wanted[place.agent] = place
        warm = self._ready.get(place.agent)
        if warm is not None and warm.place == place and warm.process.returncode is None:
            del self._ready[place.agent]
            self._ensure(place.agent)
            return warm
        self._ensure(place.agent)  # a new place: the old warm process moves
        return None

    def _ensure(self, agent: str) -> None:
        if self._closed or agent in self._starting:
            return
        loop = asyncio.get_running_loop()
        failed = self._failed_at.get(agent)
        if failed is not None and loop.time() - failed < RETRY_AFTER:
            return
        self._starting[agent] = asyncio.create_task(self._refill(agent), name=f"prewarm {agent}")

    async def _refill(self, agent: str) -> None:
        try:
            place = self._wanted[agent]
            old = self._ready.get(agent)
            if old is not None and old.place == place and old.process.returncode is None:
                return
            if old is not None:
                del self._ready[agent]
                await old.stop()
            try:
                warm = await self._start(place)
            except Exception as exc:  # noqa: BLE001 - a warm start failing only loses the head start
                log.warning("prewarm %s in %s failed: %s", agent, place.cwd, exc)
                self._failed_at[agent] = asyncio.get_running_loop().time()
                return
            if self._closed:
                await warm.stop()
                return
            self._failed_at.pop(agent, None)
            self._ready[agent] = warm
            log.info("prewarm %s: ready in %s", agent, place.cwd)
        finally:
            self._starting.pop(agent, None)
            if not self._closed and self._wanted.get(agent) != (
                self._ready[agent].place if agent in self._ready else None
            ):
                # The wanted place changed while this one started: go again.
                if agent not in self._failed_at:
                    self._ensure(agent)

    async def aclose(self) -> None:
        """Stop every warm process (and the starts in flight)."""
        self._closed = True
        starting = list(self._starting.values())
        for task in starting:
            task.cancel()
        await asyncio.gather(*starting, return_exceptions=True)
        ready, self._ready = list(self._ready.values()), {}
        await asyncio.gather(*(warm.stop() for warm in ready), return_exceptions=True)
