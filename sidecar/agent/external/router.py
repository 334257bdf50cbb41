"""One agent connection's client side: every update and request routed by its sessionId.

Why: one agent process may serve several sessions (`shared_process`), but consent, file
confinement, terminals and the relay are each session's own (`client.py: HostClient`, one
per session). The SDK's connection takes one client object; this is it. An update goes to
the HostClient of the session it names; a request naming a session this connection does
not serve is refused (-32602), never served by another session's host.

While a session is being opened (`session/new`, `session/fork`: its id is unknown until the
agent answers; the connection opens one at a time), an update naming an id nobody holds is
that session's: an agent may announce its commands before it answers. A request is not:
nothing is asked for a session before it exists. An id that left (closed, detached) stays
known, so its stray updates are dropped, not handed to a session being opened.
"""

from __future__ import annotations

import logging
from typing import Any

from acp import RequestError, schema

from sidecar.agent.external.client import HostClient

log = logging.getLogger(__name__)

NOT_SERVED = "not a session of this agent connection"
# How many ids that left a connection it remembers (the oldest forgotten first): a process
# serving sessions for days must not grow without bound for their stray updates.
LEFT_REMEMBERED = 4096


class SessionRouter:
    """The ACP `Client` of one agent connection: the sessions it serves, by the agent's id."""

    def __init__(self, agent: str) -> None:
        self._agent = agent
        self._routes: dict[str, HostClient] = {}
        self._held: dict[HostClient, set[str]] = {}  # each client's ids, to forget them
        self._opening: HostClient | None = None
        self._left: dict[str, None] = {}  # ids that left, oldest first (an ordered set)

    # ---- which session is whose ------------------------------------------------------

    def add(self, session_id: str, client: HostClient) -> None:
        """`session_id` is now `client`'s. ValueError when another session holds it (an
        agent that hands one id out twice must not merge two sessions)."""
        held = self._routes.get(session_id)
        if held is not None and held is not client:
            raise ValueError(f"agent session {session_id[:80]!r} is another session's")
        self._routes[session_id] = client
        self._held.setdefault(client, set()).add(session_id)
        self._left.pop(session_id, None)

    def remove(self, session_id: str) -> None:
        """The session left this connection: what the agent still sends for it is dropped
        (updates) or refused (requests)."""
        client = self._routes.pop(session_id, None)
        if client is not None:
            self._held[client].discard(session_id)
            self._gone(session_id)

    def forget(self, client: HostClient) -> None:
        """Every id routed to `client` (its session leaves: closed, detached, failed)."""
        for session_id in self._held.pop(client, set()):
            del self._routes[session_id]
            self._gone(session_id)
        if self._opening is client:
            self._opening = None

    def _gone(self, session_id: str) -> None:
        self._left[session_id] = None
        if len(self._left) > LEFT_REMEMBERED:
            del self._left[next(iter(self._left))]

    def holds(self, session_id: str) -> bool:
        return session_id in self._routes

    @property
    def sessions(self) -> int:
        return len(self._routes)

    def opening(self, client: HostClient | None) -> None:
        """`client`'s session is being opened (None: no longer)."""
        self._opening = client

    def _for_update(self, session_id: str) -> HostClient | None:
        client = self._routes.get(session_id)
        if client is None and session_id not in self._left:
            client = self._opening
        return client

    def _for_request(self, session_id: str, what: str) -> HostClient:
        client = self._routes.get(session_id)
        if client is None:
            log.warning(
                "agent %s: %s for session %r, which this connection does not serve: refused",
                self._agent,
                what,
                session_id[:80],
            )
            raise RequestError.invalid_params({"sessionId": NOT_SERVED})
        return client

    # ---- the agent's updates and requests --------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        client = self._for_update(session_id)
        if client is None:
            log.debug("agent %s: an update for session %r: dropped", self._agent, session_id[:80])
            return
        await client.session_update(session_id, update, **kwargs)

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        client = self._for_request(session_id, "a permission request")
        return await client.request_permission(session_id, tool_call, options, **kwargs)

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> schema.ReadTextFileResponse:
        client = self._for_request(session_id, "fs/read_text_file")
        return await client.read_text_file(session_id, path, line, limit, **kwargs)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse | None:
        client = self._for_request(session_id, "fs/write_text_file")
        return await client.write_text_file(session_id, path, content, **kwargs)

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[schema.EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> schema.CreateTerminalResponse:
        client = self._for_request(session_id, "terminal/create")
        return await client.create_terminal(
            session_id, command, args, env, cwd, output_byte_limit, **kwargs
        )

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.TerminalOutputResponse:
        client = self._for_request(session_id, "terminal/output")
        return await client.terminal_output(session_id, terminal_id, **kwargs)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.WaitForTerminalExitResponse:
        client = self._for_request(session_id, "terminal/wait_for_exit")
        return await client.wait_for_terminal_exit(session_id, terminal_id, **kwargs)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.KillTerminalResponse | None:
        client = self._for_request(session_id, "terminal/kill")
        return await client.kill_terminal(session_id, terminal_id, **kwargs)

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.ReleaseTerminalResponse | None:
        client = self._for_request(session_id, "terminal/release")
        return await client.release_terminal(session_id, terminal_id, **kwargs)

    # ---- the rest: nobody's session ---------------------------------------------------

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        log.debug("agent %s: elicitation/complete ignored", self._agent)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        log.info("agent %s: asked %r, which we do not implement", self._agent, method[:80])
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("agent %s: notification %r ignored", self._agent, method[:80])

    def on_connect(self, conn: Any) -> None:
        del conn
