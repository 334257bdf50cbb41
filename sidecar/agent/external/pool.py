"""Which agent connection a session's engine joins: a shared one, a warm one, or a new one.

Why a key of the contained argv and the environment: the sandbox is fixed when an agent
process starts (`agent/sandbox.py`: the real cwd bound, the sandbox mode, the agent's
writable dirs, the hidden dirs; `isolated_home` puts a per-session HOME in the env), so
only sessions whose process would be started exactly alike may share one. Sharing happens
only for agents that declare `shared_process`; every other session gets a connection of
its own. A session that finds no live shared connection for its key takes the warm process
for its place (`--prewarm`) if there is one, else spawns; either becomes the connection
the next sessions with that key join.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sidecar.agent.external.connection import AgentConnection
from sidecar.agent.external.prewarm import WarmAgent


@dataclass(frozen=True, slots=True)
class ShareKey:
    """What must be equal for two sessions to share an agent process."""

    agent: str
    argv: tuple[str, ...]  # contained: bwrap's binds (real cwd, mode, writable, hidden)
    env: tuple[tuple[str, str], ...] = field(repr=False)  # values may be secrets

    @classmethod
    def of(cls, agent: str, argv: Sequence[str], env: Mapping[str, str]) -> ShareKey:
        return cls(agent, tuple(argv), tuple(sorted(env.items())))


class AgentPool:
    """Every live agent connection of this sidecar; the shared ones by key."""

    def __init__(self) -> None:
        self._shared: dict[ShareKey, AgentConnection] = {}
        self._keys: dict[AgentConnection, ShareKey] = {}
        self._live: set[AgentConnection] = set()

    def connect(
        self,
        name: str,
        key: ShareKey | None,
        start: tuple[Sequence[str], Mapping[str, str], str],
        take_warm: Callable[[], WarmAgent | None],
    ) -> AgentConnection:
        """The connection a session joins (it may still be starting: `ready` waits).
        `key` None: the agent does not share; `start`: argv, env, cwd of a new process."""
        if key is not None:
            found = self._shared.get(key)
            if found is not None and found.usable:
                return found
        warm = take_warm()
        if warm is not None:
            connection = AgentConnection(name, key is not None, warm.router)
            connection.adopt(warm.process, warm.conn, warm.init)
        else:
            connection = AgentConnection(name, key is not None)
            connection.spawn(*start)
        connection.on_gone = self._forget
        self._live.add(connection)
        if key is not None:
            self._shared[key] = connection
            self._keys[connection] = key
        return connection

    def _forget(self, connection: AgentConnection) -> None:
        """Draining, stopping or gone: no session joins it any more (and once it is
        stopping or gone, there is nothing left to stop at exit)."""
        key = self._keys.pop(connection, None)
        if key is not None and self._shared.get(key) is connection:
            del self._shared[key]
        if connection.ended:
            self._live.discard(connection)

    async def aclose(self) -> None:
        """Stop every agent process still running (sidecar exit, after every session)."""
        live, self._live = list(self._live), set()
        await asyncio.gather(*(c.stop() for c in live), return_exceptions=True)
