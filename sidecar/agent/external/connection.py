"""One external agent process and its ACP connection, serving one session or several.

Why apart from the engine: an agent declared `shared_process` serves every session of the
same agent whose sandbox is identical over one process and one connection (`pool.py` keys
them), each session with its own agent session id; the connection's router (`router.py`)
hands each update and request to its session's `HostClient`. An engine (one per runtime
generation) joins a connection when it starts and leaves it when it closes; the process is
stopped, in stages, when its last session leaves. Any other agent gets a connection of its
own, which its one session leaves the same way.

A connection that has a session detached from it (its agent ignored a cancel; see
`engine.py`) is *draining*: it takes no new session and stops when the last of the others
leaves. A process that exits is forgotten by the pool at once, so the next session (a
recovered one too) starts a new process; each session still on it finds out at its next
request (`call_agent`: AgentFailed naming the agent, its exit and its stderr's tail).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, schema
from acp.client.connection import ClientSideConnection

from sidecar.agent.external.process import AgentProcess
from sidecar.agent.external.router import SessionRouter
from sidecar.agent.external.transport import AgentTransport
from sidecar.domain.errors import AgentFailed

log = logging.getLogger(__name__)

CLIENT_NAME: Final = "acp-session-host"


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
    router: SessionRouter,
    adopt: Callable[[AgentProcess], None] | None = None,
) -> tuple[AgentProcess, ClientSideConnection, schema.InitializeResponse]:
    """Spawn the (contained) agent and `initialize` it, offering fs and terminals.
    `adopt` is told of the process as soon as it exists (whoever holds it stops it)."""
    try:
        process = await AgentProcess.spawn(name, argv, env, cwd)
    except OSError as exc:
        raise AgentFailed(f"agent {name!r} could not start: {exc}") from None
    if adopt is not None:
        adopt(process)
    transport = AgentTransport(name, process.stdout, process.stdin)
    # Unstable: resume and close are there in the SDK only with it (0.12).
    conn = connect_to_agent(router, transport, use_unstable_protocol=True)
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


class Member(Protocol):
    """A session on a connection (its engine)."""

    def lost(self, reason: str) -> None:
        """The process exited on its own (`reason`: how, in the agent's words)."""


class AgentConnection:
    """An agent process, its connection and its router; the sessions on it are members."""

    def __init__(self, name: str, shared: bool, router: SessionRouter | None = None) -> None:
        self.name = name
        self.shared = shared  # may other sessions join it (the agent declared it)
        self.router = router or SessionRouter(name)
        self.process: AgentProcess | None = None
        self.conn: ClientSideConnection | None = None
        self.init: schema.InitializeResponse | None = None
        # session/new and session/fork one at a time: their ids are unknown until answered.
        self.opening = asyncio.Lock()
        self.draining = False
        self._members: set[Member] = set()
        self._started: asyncio.Future[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self.on_gone: Callable[[AgentConnection], None] = lambda connection: None

    # ---- start -----------------------------------------------------------------------

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
        """Start the process and `initialize` it, in the background (`ready` waits)."""
        self._started = asyncio.ensure_future(self._spawn(argv, env, cwd))
        self._started.add_done_callback(_retrieve)

    async def _spawn(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
        try:
            process, conn, init = await start_agent(
                self.name, argv, env, cwd, self.router, self._spawned
            )
        except BaseException:
            await self._stop_process()
            self.on_gone(self)
            raise
        self._adopted(conn, init)

    def _spawned(self, process: AgentProcess) -> None:
        """The process exists (before `initialize` answers): a stop stops it, even now."""
        self.process = process

    def adopt(
        self,
        process: AgentProcess,
        conn: ClientSideConnection,
        init: schema.InitializeResponse,
    ) -> None:
        """An initialized process (a warm one, `--prewarm`) becomes this connection's."""
        self.process = process
        self._adopted(conn, init)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        self._started = done

    def _adopted(self, conn: ClientSideConnection, init: schema.InitializeResponse) -> None:
        self.conn, self.init = conn, init
        assert self.process is not None
        self._watch = asyncio.create_task(self._watch_exit(self.process), name=f"watch {self.name}")

    async def ready(self) -> schema.InitializeResponse:
        """The agent's `initialize` answer, once the process is up (AgentFailed if it
        could not start). Cancelling one waiter leaves the start to the others."""
        assert self._started is not None
        await asyncio.shield(self._started)
        assert self.init is not None
        return self.init

    async def _watch_exit(self, process: AgentProcess) -> None:
        """An agent that exits on its own: forgotten at once (the next session starts a
        new one), and each session on it told (`Member.lost`: one in a turn fails that
        turn anyway, naming the agent; an idle one goes to error, so its next prompt
        starts a new generation)."""
        code = await process.ended()
        if self._stopping is None:
            log.warning(
                "agent %s exited (status %s) with %d session(s) on it",
                self.name,
                code,
                len(self._members),
            )
            self.on_gone(self)
            reason = process.describe_exit()
            for member in list(self._members):
                member.lost(reason)

    # ---- members ---------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Whether a new session may join: shared, not draining, not stopping, not dead."""
        process = self.process
        alive = process is None or process.returncode is None
        return self.shared and alive and not self.draining and self._stopping is None

    @property
    def ended(self) -> bool:
        """Stopping, stopped or exited."""
        process = self.process
        return self._stopping is not None or (
            process is not None and process.returncode is not None
        )

    @property
    def members(self) -> int:
        return len(self._members)

    def join(self, member: Member) -> None:
        self._members.add(member)

    def others(self, member: Member) -> bool:
        """Whether sessions besides `member` are on this connection."""
        return len(self._members) > (member in self._members)

    async def leave(self, member: Member) -> None:
        """`member`'s session is off this connection: the last one out stops it."""
        self._members.discard(member)
        if not self._members:
            await self.stop()

    def drain(self) -> None:
        """No new session joins; the process stops when the last member leaves."""
        self.draining = True
        self.on_gone(self)

    async def call(self, request: Any, what: str) -> Any:
        """One request to the agent (see `call_agent`)."""
        if self.process is None:
            if asyncio.iscoroutine(request):
                request.close()  # never to be awaited
            raise AgentFailed(f"agent {self.name!r} is not running")
        return await call_agent(self.process, request, what)

    # ---- stop ------------------------------------------------------------------------

    def stop(self) -> asyncio.Task[None]:
        """Stop it in stages (stdin EOF, SIGTERM, SIGKILL to its group); idempotent."""
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop(), name=f"stop {self.name}")
            self.on_gone(self)
        return self._stopping

    async def _stop(self) -> None:
        started = self._started
        if started is not None and not started.done():
            started.cancel()
            await asyncio.gather(started, return_exceptions=True)
        await self._stop_process()
        if self._watch is not None and not self._watch.done():
            self._watch.cancel()

    async def _stop_process(self) -> None:
        if self.process is not None:
            await self.process.stop()
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()


def _retrieve(started: asyncio.Future[None]) -> None:
    """A start that failed with no session left waiting for it: its error is logged by the
    session that saw it, not as 'never retrieved'."""
    if not started.cancelled():
        started.exception()
