"""An external ACP agent as a session's engine: its process, its session, its turns.

One `ExternalEngine` per runtime generation, disposable like every runtime part: `start`
spawns the agent inside the session's sandbox (`agent/sandbox.py`: its own PID
namespace, the cwd and the agent's own state dirs writable in `workspace`, nothing in
`read-only`; the network kept so it reaches its model), is its ACP client (`initialize`
offering fs and terminals, then the agent's session: loaded or resumed when the record
holds one and the agent can, else new), and `close` stops the process in stages. A turn
is one `session/prompt`; what the agent streams is relayed (`relay.py`), what it asks is
served through the host (`client.py`). A cancel is ACP's `session/cancel`; an agent
that has not ended the turn within the grace is stopped. An agent that exits, crashes or
breaks the protocol fails the turn with `AgentFailed`, naming the agent and the tail of
its stderr; the next prompt or resume starts a new process (a new generation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, schema
from acp.client.connection import ClientSideConnection

from protocol.values import StopReason
from sidecar.agent.engine import EngineStart
from sidecar.agent.external.client import HostClient
from sidecar.agent.external.definitions import AgentDefinition
from sidecar.agent.external.prewarm import Place, Prewarmer
from sidecar.agent.external.process import AgentProcess
from sidecar.agent.external.relay import Relay
from sidecar.agent.external.transport import AgentTransport
from sidecar.agent.host import EngineHost, TurnHost
from sidecar.agent.outcome import TurnOutcome
from sidecar.agent.sandbox import SandboxUnavailable
from sidecar.domain.agent_options import MODE_ID, AgentOption
from sidecar.domain.errors import AgentFailed, InvalidInput
from sidecar.domain.events import AgentOptionsChanged
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord

log = logging.getLogger(__name__)

CLIENT_NAME: Final = "acp-session-host"
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


def _choices(option: schema.SessionConfigOptionSelect) -> tuple[tuple[str, str], ...]:
    flat: list[tuple[str, str]] = []
    for item in option.options:
        if isinstance(item, schema.SessionConfigSelectGroup):
            flat += [(choice.value, choice.name) for choice in item.options]
        else:
            flat.append((item.value, item.name))
    return tuple(flat)


def agent_options(config: Any, modes: schema.SessionModeState | None) -> tuple[AgentOption, ...]:
    """The agent's select options and its modes, as the session offers them."""
    found = [
        AgentOption(o.id, o.name, o.current_value, _choices(o), o.description)
        for o in config or ()
        if isinstance(o, schema.SessionConfigOptionSelect)
    ]
    if modes is not None and not any(o.option_id == MODE_ID for o in found):
        choices = tuple((m.id, m.name) for m in modes.available_modes)
        found.append(AgentOption(MODE_ID, "Agent mode", modes.current_mode_id, choices))
    return tuple(found)


def _capabilities(init: schema.InitializeResponse) -> dict[str, Any]:
    caps = init.agent_capabilities
    return {} if caps is None else caps.model_dump(by_alias=True, exclude_none=True)


async def call_agent(process: AgentProcess, request: Any, what: str) -> Any:
    """One request to the agent; its death or an error answer is AgentFailed."""
    waiting = asyncio.ensure_future(request)
    exited = asyncio.ensure_future(process.wait())
    try:
        await asyncio.wait([waiting, exited], return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
    if not waiting.done():
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await waiting
        await asyncio.sleep(0.05)  # its last stderr lines
        raise AgentFailed(f"{what}: {process.describe_exit()}")
    try:
        return waiting.result()
    except RequestError as exc:
        raise AgentFailed(f"agent {process.name!r} refused {what}: {exc}") from None
    except ConnectionError:
        await asyncio.sleep(0.05)
        raise AgentFailed(f"{what}: {process.describe_exit()}") from None


async def start_agent(
    name: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    client: HostClient,
    adopt: Callable[[AgentProcess], None] | None = None,
) -> tuple[AgentProcess, ClientSideConnection, schema.InitializeResponse]:
    """Spawn the (contained) agent and `initialize` it, offering fs and terminals."""
    try:
        process = await AgentProcess.spawn(name, argv, env, cwd)
    except OSError as exc:
        raise AgentFailed(f"agent {name!r} could not start: {exc}") from None
    if adopt is not None:
        adopt(process)
    transport = AgentTransport(name, process.stdout, process.stdin)
    # Unstable: resume and close are there in the SDK only with it (0.12).
    conn = connect_to_agent(client, transport, use_unstable_protocol=True)
    try:
        init = await call_agent(
            process,
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(
                    fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=schema.Implementation(name=CLIENT_NAME, version="1"),
            ),
            "initialize",
        )
    except BaseException:
        if adopt is None:  # nobody else holds it: stop it here
            await process.stop()
        raise
    return process, conn, init


class ExternalEngine:
    """A session's turns run by an external ACP agent."""

    def __init__(
        self,
        definition: AgentDefinition,
        record: SessionRecord,
        launch: Launch,
        remember: Callable[[str, Mapping[str, Any]], None] | None = None,
        prewarm: Prewarmer | None = None,
    ) -> None:
        self._definition = definition
        self._record = record
        self._launch = launch
        self._remember = remember
        self._prewarm = prewarm
        self._process: AgentProcess | None = None
        self._conn: ClientSideConnection | None = None
        self._client: HostClient | None = None
        self._relay: Relay | None = None
        self._agent_session: str | None = None
        self._caps: schema.AgentCapabilities | None = None
        self._cancel_sent: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._closed = False
        self._host_for_events: EngineHost | None = None
        self._config: Any = None  # the agent's config options, as it last said them
        self._modes: schema.SessionModeState | None = None

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
        """Spawn, initialize, open the agent's session; bounded by the start timeout.
        Raises AgentFailed (the runtime stores its message as lastError)."""
        launch = self._launch
        try:
            return await asyncio.wait_for(self._start(host), launch.start_timeout)
        except TimeoutError:
            said = self._process.stderr_tail(4) if self._process else ""
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
        self._host_for_events = host
        relay = Relay(host, self._settings_changed)
        self._relay = relay
        warm = None
        if self._prewarm is not None:
            warm = self._prewarm.take(Place(self.name, host.cwd, host.sandbox))
        if warm is not None:
            log.info(
                "agent %s: session %s takes a warm process", self.name, self._record.session_id
            )
            self._process, self._conn, self._client = warm.process, warm.conn, warm.client
            warm.client.attach(host, relay)
            init = warm.init
        else:
            try:
                argv = host.contain(launch.argv, launch.writable)
            except SandboxUnavailable as exc:
                raise AgentFailed(f"agent {self.name!r} cannot be contained: {exc}") from None
            client = HostClient(self.name)
            client.attach(host, relay)
            self._client = client
            self._process, self._conn, init = await start_agent(
                self.name, argv, launch.env, host.cwd, client, self._adopt
            )
        self._caps = init.agent_capabilities or schema.AgentCapabilities()
        if self._remember is not None:
            self._remember(self.name, _capabilities(init))
        started = await self._open_session(host, relay)
        assert self._client is not None and self._process is not None
        self._client.session_id = started.agent_session
        self._agent_session = started.agent_session
        self._watchdog = asyncio.create_task(self._watch(self._process), name=f"watch {self.name}")
        return started

    def _adopt(self, process: AgentProcess) -> None:
        """The process exists (before initialize answers): close stops it, even mid-start."""
        self._process = process

    async def _open_session(self, host: EngineHost, relay: Relay) -> EngineStart:
        """The stored agent session resumed or loaded where the agent can (forked, for a
        fork's first start); else a new one, with a note when a conversation is lost."""
        assert self._conn is not None and self._caps is not None
        conn, caps, record = self._conn, self._caps, self._record
        stored = record.agent_session
        session_caps = caps.session_capabilities
        first_of_fork = record.forked_from is not None and record.generation == 1
        if stored is not None and first_of_fork:
            if session_caps is not None and session_caps.fork is not None:
                forked = await self._call(
                    conn.fork_session(cwd=host.cwd, session_id=stored, mcp_servers=self._mcp()),
                    "session/fork",
                )
                self._settings_from(forked)
                return EngineStart(forked.session_id)
        elif stored is not None:
            try:
                if session_caps is not None and session_caps.resume is not None:
                    resumed = await self._call(
                        conn.resume_session(
                            cwd=host.cwd, session_id=stored, mcp_servers=self._mcp()
                        ),
                        "session/resume",
                    )
                    self._settings_from(resumed)
                    return EngineStart(stored)
                if caps.load_session:
                    return await self._load(host, relay, stored)
            except AgentFailed as exc:
                if self._process is None or self._process.returncode is not None:
                    raise
                # It refused (its own store lost the session, say): start afresh, noted.
                log.warning("agent %s: cannot continue session %s: %s", self.name, stored, exc)
        opened = await self._call(
            conn.new_session(cwd=host.cwd, mcp_servers=self._mcp()), "session/new"
        )
        self._settings_from(opened)
        note = None
        if record.turns > 0:  # a resume, a fork, an import: there was a conversation
            can = "fork" if first_of_fork else "load or resume"
            note = (
                f"The agent {self.name!r} could not {can} its session here: a new agent "
                "session started, and the agent does not know the conversation above."
            )
        return EngineStart(opened.session_id, note)

    async def _load(self, host: EngineHost, relay: Relay, stored: str) -> EngineStart:
        relay.replaying = True  # its history is in our transcript already
        try:
            if self._client is not None:
                self._client.session_id = stored
            loaded = await self._call(
                self._conn_or_fail().load_session(
                    cwd=host.cwd, session_id=stored, mcp_servers=self._mcp()
                ),
                "session/load",
            )
            self._settings_from(loaded)
        finally:
            relay.replaying = False
        return EngineStart(stored)

    def _mcp(self) -> list[Any]:
        """The session's MCP servers, as its client gave them (ACP's own shapes, checked
        by the edge): the agent connects to them itself, inside its sandbox."""
        servers = json.loads(self._record.mcp_servers or "[]")
        return servers if isinstance(servers, list) else []

    def _settings_from(self, response: Any) -> None:
        if response is None:
            return
        if getattr(response, "config_options", None) is not None:
            self._config = response.config_options
        if getattr(response, "modes", None) is not None:
            self._modes = response.modes

    # ---- the agent's own settings ----------------------------------------------------

    def options(self) -> tuple[AgentOption, ...]:
        return agent_options(self._config, self._modes)

    def told(self, update: Any) -> bool:
        """A settings update from the agent (the relay passes them here): kept. True when
        the options changed."""
        if isinstance(update, schema.ConfigOptionUpdate):
            self._config = update.config_options
            return True
        if isinstance(update, schema.CurrentModeUpdate) and self._modes is not None:
            self._modes = self._modes.model_copy(update={"current_mode_id": update.current_mode_id})
            return True
        return False

    async def set_option(self, option_id: str, value: str) -> None:
        option = next((o for o in self.options() if o.option_id == option_id), None)
        if option is None:
            known = ", ".join(o.option_id for o in self.options()) or "none"
            raise InvalidInput(
                "configId", f"agent {self.name!r} has no option {option_id!r} ({known})"
            )
        if value not in {choice for choice, _ in option.choices}:
            allowed = ", ".join(choice for choice, _ in option.choices)
            raise InvalidInput("value", f"{option.name} must be one of {allowed}, got {value!r}")
        conn, session = self._conn_or_fail(), self._agent_session
        if session is None:
            raise AgentFailed(f"agent {self.name!r} is not running")
        is_mode = option_id == MODE_ID and not any(
            isinstance(o, schema.SessionConfigOptionSelect) and o.id == MODE_ID
            for o in self._config or ()
        )
        if is_mode:
            await self._call(conn.set_session_mode(session_id=session, mode_id=value), "set_mode")
            if self._modes is not None:
                self._modes = self._modes.model_copy(update={"current_mode_id": value})
            return
        answer = await self._call(
            conn.set_config_option(config_id=option_id, session_id=session, value=value),
            "set_config_option",
        )
        if answer is not None and answer.config_options is not None:
            self._config = answer.config_options

    def _conn_or_fail(self) -> ClientSideConnection:
        if self._conn is None:
            raise AgentFailed(f"agent {self.name!r} is not running")
        return self._conn

    async def _call(self, request: Any, what: str) -> Any:
        process = self._process
        assert process is not None
        return await call_agent(process, request, what)

    def _settings_changed(self, update: Any) -> None:
        if self.told(update) and self._host_for_events is not None:
            self._host_for_events.publish(AgentOptionsChanged(self.options()))

    async def _watch(self, process: AgentProcess) -> None:
        """An agent that exits between turns: logged (the next turn fails, named)."""
        code = await process.wait()
        if not self._closed:
            log.warning("agent %s exited between turns (status %s)", self.name, code)

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
        conn, relay, client, process = self._conn, self._relay, self._client, self._process
        session = self._agent_session
        if conn is None or relay is None or client is None or process is None or not session:
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
        prompt `cancelled`); one that does not is stopped, and the next turn fails
        naming it (the session then starts a new process, as after a crash)."""
        done, _ = await asyncio.wait([asked], timeout=self._launch.interrupt_grace)
        if not done:
            asked.cancel()
            log.warning(
                "agent %s did not end the turn within %g s of session/cancel: stopping it",
                self.name,
                self._launch.interrupt_grace,
            )
            if self._process is not None:
                await self._process.stop()
        elif not asked.cancelled() and asked.exception() is None:
            await client.settled()
        await self._end(relay, client, cancelled=True)

    async def _end(self, relay: Relay, client: HostClient, *, cancelled: bool = False) -> str:
        client.end_turn()
        return await relay.end_turn(cancelled=cancelled)

    def cancel(self) -> None:
        """ACP's `session/cancel`; the task running the turn is cancelled right after, and
        an agent that has not stopped within the grace is stopped (closing the runtime's
        generation: the next prompt starts a new one)."""
        conn, session = self._conn, self._agent_session
        if conn is None or session is None or self._cancel_sent is not None:
            return
        self._cancel_sent = asyncio.create_task(self._send_cancel(conn, session))

    async def _send_cancel(self, conn: ClientSideConnection, session: str) -> None:
        try:
            await asyncio.wait_for(conn.cancel(session_id=session), self._launch.interrupt_grace)
        except (TimeoutError, ConnectionError, RequestError) as exc:
            log.warning("agent %s: session/cancel failed: %s", self.name, exc)

    # ---- end -------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop the agent: stdin EOF, SIGTERM, SIGKILL to its group (its PID namespace
        with it). Idempotent."""
        self._closed = True
        client, conn, process = self._client, self._conn, self._process
        if client is not None:
            await client.close()
        if process is not None:
            await process.stop()
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        for task in (self._watchdog, self._cancel_sent):
            if task is not None and not task.done():
                task.cancel()
