"""A session's agent session opened on its agent connection: forked, resumed, loaded or new.

The record's stored agent session is resumed where the agent can, else loaded (its replay
is in our transcript already: not relayed again), and a fork's first start forks it; where
none of that works a new agent session starts, with a note when a conversation is lost.
On a shared connection the session's id is routed to its `HostClient` before anything is
asked (a resume or a load names it) or as the agent answers (`session/new`,
`session/fork`: one at a time per connection, so what arrives for an id nobody holds
before that answer is this session's: `router.py`). A stored id another session on the
same process already drives (an imported copy, say) is not opened twice: a new one starts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acp import schema

from sidecar.agent.engine import EngineStart
from sidecar.agent.external.client import HostClient
from sidecar.agent.external.connection import AgentConnection
from sidecar.agent.external.relay import Relay
from sidecar.domain.errors import AgentFailed
from sidecar.domain.records import SessionRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Opened:
    """The agent session as the runtime stores it, and the agent's answer (its settings)."""

    start: EngineStart
    answer: Any


def mcp_servers(record: SessionRecord) -> list[Any]:
    """The session's MCP servers, as its client gave them (ACP's own shapes, checked by
    the edge): the agent connects to them itself, inside its sandbox."""
    servers = json.loads(record.mcp_servers or "[]")
    return servers if isinstance(servers, list) else []


class SessionOpener:
    """Opens one session's agent session on a connection (`open` once, at start)."""

    def __init__(
        self,
        name: str,
        connection: AgentConnection,
        client: HostClient,
        relay: Relay,
        caps: schema.AgentCapabilities,
    ) -> None:
        self._name = name
        self._connection = connection
        self._client = client
        self._relay = relay
        self._caps = caps

    async def open(self, record: SessionRecord, cwd: str) -> Opened:
        connection, caps = self._connection, self._caps
        conn = connection.conn
        if conn is None:
            raise AgentFailed(f"agent {self._name!r} is not running")
        servers = mcp_servers(record)
        stored = record.agent_session
        session_caps = caps.session_capabilities
        first_of_fork = record.forked_from is not None and record.generation == 1
        if stored is not None and first_of_fork:
            if session_caps is not None and session_caps.fork is not None:
                forked = await self._opened(
                    lambda: conn.fork_session(cwd=cwd, session_id=stored, mcp_servers=servers),
                    "session/fork",
                )
                return Opened(EngineStart(forked.session_id), forked)
        elif stored is not None and connection.router.holds(stored):
            log.warning(
                "agent %s: session %s's agent session is in use on its process: a new one",
                self._name,
                record.session_id,
            )
        elif stored is not None:
            continued = await self._continue(stored, cwd, servers)
            if continued is not None:
                return continued
        opened = await self._opened(
            lambda: conn.new_session(cwd=cwd, mcp_servers=servers), "session/new"
        )
        note = None
        if record.turns > 0:  # a resume, a fork, an import: there was a conversation
            can = "fork" if first_of_fork else "load or resume"
            note = (
                f"The agent {self._name!r} could not {can} its session here: a new agent "
                "session started, and the agent does not know the conversation above."
            )
        return Opened(EngineStart(opened.session_id, note), opened)

    async def _continue(self, stored: str, cwd: str, servers: list[Any]) -> Opened | None:
        """The stored agent session resumed, else loaded; None when the agent can do
        neither or refused (its own store lost the session, say)."""
        connection, caps, client = self._connection, self._caps, self._client
        conn = connection.conn
        assert conn is not None
        session_caps = caps.session_capabilities
        connection.router.add(stored, client)
        client.session_id = stored
        try:
            if session_caps is not None and session_caps.resume is not None:
                resumed = await connection.call(
                    conn.resume_session(cwd=cwd, session_id=stored, mcp_servers=servers),
                    "session/resume",
                )
                return Opened(EngineStart(stored), resumed)
            if caps.load_session:
                self._relay.replaying = True  # its history is in our transcript already
                try:
                    loaded = await connection.call(
                        conn.load_session(cwd=cwd, session_id=stored, mcp_servers=servers),
                        "session/load",
                    )
                finally:
                    self._relay.replaying = False
                return Opened(EngineStart(stored), loaded)
        except AgentFailed as exc:
            process = connection.process
            if process is None or process.returncode is not None:
                raise
            log.warning("agent %s: cannot continue session %s: %s", self._name, stored, exc)
        connection.router.remove(stored)
        client.session_id = None
        return None

    async def _opened(self, request: Callable[[], Awaitable[Any]], what: str) -> Any:
        """`session/new` or `session/fork`: one at a time on a connection, so what the
        agent sends for an id nobody holds, before it answers, is this session's."""
        connection, client = self._connection, self._client
        async with connection.opening:
            connection.router.opening(client)
            try:
                answer = await connection.call(request(), what)
                connection.router.add(answer.session_id, client)
            except ValueError as exc:
                raise AgentFailed(f"agent {self._name!r} answered {what} with {exc}") from None
            finally:
                connection.router.opening(None)
        return answer
