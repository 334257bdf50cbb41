"""An external ACP agent as a session's engine: its agent session, its turns.

One `ExternalEngine` per runtime generation, disposable like every runtime part. `start`
joins an agent connection (`pool.py`: the live process the session may share -- an agent
declared `shared_process`, the same contained argv and env --, else the warm one for its
place, else a new one spawned inside the session's sandbox: `agent/sandbox.py`, its own
PID namespace, the cwd and the agent's state dirs writable in `workspace`, the network
kept) and opens the agent's session on it (loaded or resumed when the record holds one
and the agent can, else new). `close` leaves the connection (`session/close` where the
agent takes it, when others stay on it); the last session out stops the process in
stages. A turn is one `session/prompt`; what the agent streams for this session is
relayed (`relay.py`), what it asks for it is served through this session's host
(`client.py`), each routed by session id (`router.py`). A cancel is ACP's
`session/cancel` for this session; an agent that has not ended the turn within the grace
is stopped when this session is alone on it, else this session is detached from it (see
`_give_up`). An agent that exits, crashes or breaks the protocol fails the turn with
`AgentFailed`, naming the agent and the tail of its stderr; the next prompt or resume
starts a new generation, on a new process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from acp import RequestError, schema
from acp.client.connection import ClientSideConnection

from protocol.values import StopReason
from sidecar.agent.engine import EngineStart
from sidecar.agent.external.client import HostClient
from sidecar.agent.external.connection import AgentConnection
from sidecar.agent.external.definitions import AgentDefinition
from sidecar.agent.external.opening import SessionOpener
from sidecar.agent.external.options import AgentOptions
from sidecar.agent.external.pool import AgentPool, ShareKey
from sidecar.agent.external.prewarm import Place, Prewarmer, WarmAgent
from sidecar.agent.external.relay import Relay
from sidecar.agent.host import EngineHost, TurnHost
from sidecar.agent.outcome import TurnOutcome
from sidecar.agent.sandbox import SandboxUnavailable
from sidecar.domain.agent_options import AgentOption
from sidecar.domain.errors import AgentFailed
from sidecar.domain.events import AgentOptionsChanged
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord

log = logging.getLogger(__name__)

_STOPS: Final[dict[str, StopReason]] = {reason.value: reason for reason in StopReason}


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start this agent: argv, environment (already expanded: secrets live only
    here and in the process), the paths it must write, and the start-up bound."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    writable: tuple[str, ...]
    start_timeout: float
    interrupt_grace: float


def _capabilities(init: schema.InitializeResponse) -> dict[str, Any]:
    caps = init.agent_capabilities
    return {} if caps is None else caps.model_dump(by_alias=True, exclude_none=True)


class ExternalEngine:
    """A session's turns run by an external ACP agent."""

    def __init__(
        self,
        definition: AgentDefinition,
        record: SessionRecord,
        launch: Launch,
        remember: Callable[[str, Mapping[str, Any]], None] | None = None,
        prewarm: Prewarmer | None = None,
        pool: AgentPool | None = None,
    ) -> None:
        self._definition = definition
        self._record = record
        self._launch = launch
        self._remember = remember
        self._prewarm = prewarm
        self._pool = pool if pool is not None else AgentPool()
        self._connection: AgentConnection | None = None
        self._client: HostClient | None = None
        self._relay: Relay | None = None
        self._agent_session: str | None = None
        self._caps: schema.AgentCapabilities | None = None
        self._cancel_sent: asyncio.Task[None] | None = None
        self._left = False  # off its connection (closed, or detached)
        self._detached: str | None = None  # why it was detached mid-turn (see _give_up)
        self._host: EngineHost | None = None
        self._options = AgentOptions(definition.name)

    @property
    def name(self) -> str:
        return self._definition.name

    @property
    def uses_provider(self) -> bool:
        return False

    @property
    def embeds_files(self) -> bool:
        offered = self._caps.prompt_capabilities if self._caps is not None else None
        return offered is not None and bool(offered.embedded_context)

    # ---- start -----------------------------------------------------------------------

    async def start(self, host: EngineHost) -> EngineStart:
        """Join (or start) the agent's process, open the agent's session; bounded by the
        start timeout. Raises AgentFailed (the runtime stores its message as lastError)."""
        launch = self._launch
        try:
            return await asyncio.wait_for(self._start(host), launch.start_timeout)
        except TimeoutError:
            process = self._connection.process if self._connection is not None else None
            said = process.stderr_tail(4) if process is not None else ""
            await self.close()
            raise AgentFailed(
                f"agent {self.name!r} did not start within {launch.start_timeout:g} s "
                f"(initialize and session/new): {said or 'no output'}"
            ) from None
        except BaseException:  # AgentFailed, or the runtime's start cancelled
            await self.close()
            raise

    async def _start(self, host: EngineHost) -> EngineStart:
        launch = self._launch
        self._host = host
        relay = Relay(host, self._settings_changed)
        self._relay = relay
        try:
            argv = host.contain(launch.argv, launch.writable)
        except SandboxUnavailable as exc:
            raise AgentFailed(f"agent {self.name!r} cannot be contained: {exc}") from None
        shared = self._definition.shared_process
        key = ShareKey.of(self.name, argv, launch.env) if shared else None
        connection = self._pool.connect(
            self.name, key, (argv, launch.env, host.cwd), lambda: self._take_warm(host)
        )
        connection.join(self)
        self._connection = connection
        if connection.members > 1:
            log.info(
                "agent %s: session %s shares a process with %d other session(s)",
                self.name,
                self._record.session_id,
                connection.members - 1,
            )
        init = await connection.ready()
        client = HostClient(self.name, host, relay)
        self._client = client
        caps = init.agent_capabilities or schema.AgentCapabilities()
        self._caps = caps
        if self._remember is not None:
            self._remember(self.name, _capabilities(init))
        opener = SessionOpener(self.name, connection, client, relay, caps)
        opened = await opener.open(self._record, host.cwd)
        self._options.take(opened.answer)
        client.session_id = opened.start.agent_session
        self._agent_session = opened.start.agent_session
        return opened.start

    def _take_warm(self, host: EngineHost) -> WarmAgent | None:
        if self._prewarm is None:
            return None
        warm = self._prewarm.take(Place(self.name, host.cwd, host.sandbox))
        if warm is not None:
            log.info(
                "agent %s: session %s takes a warm process", self.name, self._record.session_id
            )
        return warm

    # ---- the agent's own settings ----------------------------------------------------

    def options(self) -> tuple[AgentOption, ...]:
        return self._options.offered()

    async def set_option(self, option_id: str, value: str) -> None:
        is_mode = self._options.check(option_id, value)
        conn, session = self._conn_or_fail(), self._agent_session
        if session is None:
            raise AgentFailed(f"agent {self.name!r} is not running")
        if is_mode:
            await self._call(conn.set_session_mode(session_id=session, mode_id=value), "set_mode")
            self._options.mode_set(value)
            return
        answer = await self._call(
            conn.set_config_option(config_id=option_id, session_id=session, value=value),
            "set_config_option",
        )
        self._options.take(answer)

    def _conn_or_fail(self) -> ClientSideConnection:
        if self._detached is not None:
            raise AgentFailed(self._detached)
        conn = self._connection.conn if self._connection is not None else None
        if conn is None or self._left:
            raise AgentFailed(f"agent {self.name!r} is not running")
        return conn

    async def _call(self, request: Any, what: str) -> Any:
        connection = self._connection
        if connection is None:
            if asyncio.iscoroutine(request):
                request.close()  # never to be awaited
            raise AgentFailed(f"agent {self.name!r} is not running")
        return await connection.call(request, what)

    def _settings_changed(self, update: Any) -> None:
        """The agent changed its own settings (the relay passes such updates here)."""
        if self._options.told(update) and self._host is not None:
            self._host.publish(AgentOptionsChanged(self.options()))

    def lost(self, reason: str) -> None:
        """Its process exited on its own (`connection.py`): the host is told, so a session
        idle on it goes to error and its next prompt starts a new generation."""
        if not self._left:
            self._lose(reason)

    # ---- turns -----------------------------------------------------------------------

    def refuses(self, prompt: UserPrompt) -> str | None:
        """What the agent said at `initialize` it takes: text and links always; images,
        audio and embedded resources only where it said so."""
        offered = self._caps.prompt_capabilities if self._caps is not None else None
        wanted = {"image": "image", "audio": "audio", "resource": "embedded_context"}
        for kind, capability in wanted.items():
            if prompt.has(kind) and not (offered is not None and getattr(offered, capability)):
                what = "embedded resources" if kind == "resource" else f"{kind}s"
                return f"the agent {self.name!r} takes no {what} (its promptCapabilities)"
        return None

    async def run_turn(self, host: TurnHost, prompt: UserPrompt) -> TurnOutcome:
        conn, relay, client = self._conn_or_fail(), self._relay, self._client
        process = self._connection.process if self._connection is not None else None
        session = self._agent_session
        if relay is None or client is None or process is None or not session:
            raise AgentFailed(f"agent {self.name!r} is not running")
        if process.returncode is not None:
            raise AgentFailed(f"agent {self.name!r} is not running: {process.describe_exit()}")
        self._cancel_sent = None
        # The turn's before-snapshot now: an agent changes files with its own tools, when
        # it likes, without asking us (its changes are the turn's, for changes and rewind).
        await host.before_tool_call()
        # The content as the client sent it (links, images, resources: the agent reads
        # them itself), or the text when it came as text.
        given = list(prompt.blocks) or [{"type": "text", "text": prompt.text}]
        blocks = schema.PromptRequest.model_validate({"sessionId": session, "prompt": given}).prompt
        asked = asyncio.ensure_future(conn.prompt(session_id=session, prompt=blocks))
        try:
            response = await self._call(asked, "session/prompt")
        except asyncio.CancelledError:
            await asyncio.shield(self._after_cancel(asked, relay, client))
            raise
        except BaseException:
            await asyncio.shield(self._end(relay, client))
            raise
        await client.settled()
        if response.usage is not None:  # what the agent says its model used this turn
            host.count_tokens(response.usage.input_tokens, response.usage.output_tokens)
        text = await self._end(relay, client)
        stop = _STOPS.get(str(response.stop_reason), StopReason.END_TURN)
        if stop is StopReason.CANCELLED:
            raise asyncio.CancelledError()  # the host records a cancelled turn
        return TurnOutcome(text, stop)

    async def _after_cancel(
        self, asked: asyncio.Future[Any], relay: Relay, client: HostClient
    ) -> None:
        """The turn was cancelled: the agent has the grace to end it (ACP: it answers the
        prompt `cancelled`); one that does not is given up on (`_give_up`)."""
        done, _ = await asyncio.wait([asked], timeout=self._launch.interrupt_grace)
        if not done:
            asked.cancel()
            await self._give_up()
        elif not asked.cancelled() and asked.exception() is None:
            await client.settled()
        await self._end(relay, client, cancelled=True)

    async def _give_up(self) -> None:
        """The agent did not end this session's cancelled turn within the grace.

        Alone on its process: the process is stopped, in stages. Sharing it: stopping it
        would kill the other sessions' work, so only this session leaves it, *detached*:
        whatever the agent still sends for it is dropped (updates) or refused (requests:
        no consent, no file, no terminal for it any more), its terminals are stopped,
        `session/close` is sent where the agent takes it; the process takes no new
        session and is stopped when the last of the others leaves. Either way the session
        goes to error once the cancelled turn is recorded (lastError saying which), and
        its next prompt starts a new generation on a new process.
        """
        connection = self._connection
        grace = self._launch.interrupt_grace
        if connection is None:
            return
        if not connection.others(self):
            log.warning(
                "agent %s did not end the turn within %g s of session/cancel: stopping it",
                self.name,
                grace,
            )
            await connection.stop()
            self._lose(
                f"agent {self.name!r} did not end a cancelled turn within {grace:g} s of "
                "session/cancel: it was stopped"
            )
            return
        log.warning(
            "agent %s did not end session %s's turn within %g s of session/cancel: the "
            "session leaves the process it shares with %d other session(s)",
            self.name,
            self._record.session_id,
            grace,
            connection.members - 1,
        )
        self._detached = (
            f"agent {self.name!r} did not end this session's cancelled turn within {grace:g} s "
            "of session/cancel: the session left the agent process it shared with other "
            "sessions (their turns go on)"
        )
        connection.drain()
        await self._leave()
        self._lose(self._detached)

    def _lose(self, reason: str) -> None:
        if self._host is not None:
            self._host.engine_lost(reason)

    async def _end(self, relay: Relay, client: HostClient, *, cancelled: bool = False) -> str:
        client.end_turn()
        return await relay.end_turn(cancelled=cancelled)

    def cancel(self) -> None:
        """ACP's `session/cancel` for this session; the task running the turn is cancelled
        right after, and an agent that has not stopped within the grace is given up on."""
        conn = self._connection.conn if self._connection is not None else None
        session = self._agent_session
        if conn is None or session is None or self._cancel_sent is not None or self._left:
            return
        self._cancel_sent = asyncio.create_task(self._send_cancel(conn, session))

    async def _send_cancel(self, conn: ClientSideConnection, session: str) -> None:
        try:
            await asyncio.wait_for(conn.cancel(session_id=session), self._launch.interrupt_grace)
        except (TimeoutError, ConnectionError, RequestError) as exc:
            log.warning("agent %s: session/cancel failed: %s", self.name, exc)

    # ---- end -------------------------------------------------------------------------

    async def close(self) -> None:
        """Leave the agent's process (the last session out stops it: stdin EOF, SIGTERM,
        SIGKILL to its group, its PID namespace with it). Idempotent."""
        await self._leave()
        if self._cancel_sent is not None and not self._cancel_sent.done():
            self._cancel_sent.cancel()

    async def _leave(self) -> None:
        """Off the connection: this session's terminals stopped, its id no longer routed,
        `session/close` sent if others stay on the process and the agent takes it."""
        connection, client, session = self._connection, self._client, self._agent_session
        if self._left or connection is None:
            self._left = True
            return
        self._left = True
        if client is not None:
            connection.router.forget(client)
            await client.close()
        if session is not None and connection.others(self) and self._closes_sessions():
            await self._close_agent_session(connection, session)
        await connection.leave(self)

    def _closes_sessions(self) -> bool:
        caps = self._caps.session_capabilities if self._caps is not None else None
        return caps is not None and caps.close is not None

    async def _close_agent_session(self, connection: AgentConnection, session: str) -> None:
        """ACP's `session/close`: the agent frees what it holds for the session (bounded
        by the grace: a leaving session is not held up by an agent that does not answer)."""
        conn = connection.conn
        if conn is None:
            return
        try:
            await asyncio.wait_for(
                connection.call(conn.close_session(session_id=session), "session/close"),
                self._launch.interrupt_grace,
            )
        except (TimeoutError, AgentFailed) as exc:
            log.warning("agent %s: session/close of %s failed: %s", self.name, session, exc)
