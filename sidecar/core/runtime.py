"""One runtime generation of one session: everything disposable lives here.

A `SessionRuntime` owns its listener, token, provider client, terminal and turn runner
for one generation and is never revived: resume makes a new one. Every write it makes
goes through the store with its generation, so a superseded or closed runtime cannot
change the record. Its turns (and compactions) live in `TurnRunner`.

The runtime is the one writer of its record and status: its parts (turns, compaction,
rewind, approvals) change them only through `write` (fenced), `transition` (a write and
its event), `append` (a transcript row by itself) and `observe` (a metadata change the
manager stored unfenced); no other module assigns `record` or `status`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from typing_extensions import Unpack

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.agent import sandbox
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.output import CommandOutput
from sidecar.agent.backends.pipe import run_command
from sidecar.agent.backends.pty import Terminal, run_command_pty
from sidecar.agent.engine import BUILTIN, EngineFactory, builtin_engine
from sidecar.agent.instructions import ProjectInstructions
from sidecar.agent.providers.base import Provider
from sidecar.agent.sandbox import SandboxMode, SandboxStatus
from sidecar.checkpoints.store import CheckpointStore
from sidecar.core import worktree_place
from sidecar.core.approvals import ApprovalDesk, Asker
from sidecar.core.checkpointing import TurnCheckpoints
from sidecar.core.endpoint import SessionEndpoint
from sidecar.core.events import EventStream
from sidecar.core.mcp_tools import McpSettings, McpTools
from sidecar.core.output_spools import OutputSpools
from sidecar.core.ports import Listener, ListenerFactory, ProviderFactory
from sidecar.core.turns import TurnRunner
from sidecar.core.views import TerminalSize
from sidecar.domain.errors import (
    InvalidInput,
    InvalidState,
    RuntimeFailed,
    StaleGeneration,
    StoreError,
)
from sidecar.domain.events import McpServersChanged, ModeChanged, StateChanged
from sidecar.domain.records import (
    METADATA_FIELDS,
    SessionRecord,
    check_transition,
    effective_sandbox,
)
from sidecar.domain.redaction import SECRETS
from sidecar.domain.rules import Rule, rules_to_json
from sidecar.domain.transcript import Entry, MarkerEntry, MarkerKind, from_row, to_row
from sidecar.domain.worktree_info import WorktreeInfo, WorktreeState
from sidecar.store.base import RecordChanges, SessionStore
from sidecar.store.images import ImageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RuntimeDeps:
    store: SessionStore
    make_provider: ProviderFactory
    limits: CommandLimits
    open_listener: ListenerFactory | None = None  # None: no HTTP endpoint
    context_budget: int = 0  # characters of provider context before compaction; 0: never
    # Whether commands can be contained (bubblewrap); probed once at start.
    sandbox: SandboxStatus = field(default_factory=sandbox.probe)
    asker: Asker | None = None  # asks the stdio client for consent; None: nobody to ask
    mcp: McpSettings = McpSettings()
    checkpoints: CheckpointStore = field(default_factory=lambda: CheckpointStore(None))
    spools: OutputSpools = field(default_factory=lambda: OutputSpools(None))
    # Images users sent with prompts (by digest; the transcript refers to them).
    images: ImageStore = field(default_factory=lambda: ImageStore(None))
    # Directories no command or MCP server may see (the data and config dirs): sandbox.wrap.
    hide: tuple[str, ...] = ()
    # What runs the turns, one per generation (agent/engine.py); the builtin agent loop.
    make_engine: EngineFactory = builtin_engine
    # Whether a session may name this agent (`session/new`): builtin only, by default.
    knows_agent: Callable[[str], bool] = BUILTIN.__eq__


class SessionRuntime:
    def __init__(self, record: SessionRecord, deps: RuntimeDeps, events: EventStream) -> None:
        self._session_id = record.session_id
        self._generation = record.generation
        self.cwd = record.cwd
        self.backend = record.backend
        self.mode = record.mode
        self._status = record.status
        self.limits = deps.limits
        self.events = events
        self._record = record  # as this runtime last wrote it
        self.terminal = Terminal()  # fresh per generation: PTY descriptors are never persisted
        self.token = secrets.token_urlsafe(32)
        SECRETS.add(self.token)  # masked in every log line while the runtime lives
        self.listener: Listener | None = None
        self._superseded = False
        self.store: SessionStore = deps.store
        self._deps = deps
        self._provider: Provider | None = None
        self._close_task: asyncio.Task[None] | None = None
        self.engine = deps.make_engine(record)
        self.turns = TurnRunner(self, deps.context_budget, self.engine)
        self.approvals = ApprovalDesk(self, deps.asker)
        self.mcp = McpTools(
            record.mcp_servers,
            deps.mcp,
            deps.limits.output_cap,
            record.cwd,
            deps.sandbox,
            hide=deps.hide,
        )
        self.checkpoints = TurnCheckpoints(deps.checkpoints, record.session_id, record.cwd)
        self.images = deps.images
        self.worktree = WorktreeInfo.from_json(record.worktree)
        self.worktree_state: WorktreeState | None = None  # as git said after the last turn
        # AGENTS.md and the like: read for the builtin engine's prompt (an external agent
        # reads its own), at start and whenever a model call sees them change.
        self.instructions = ProjectInstructions(record.cwd, deps.hide)

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def record(self) -> SessionRecord:
        """The record as this runtime last wrote (or observed) it; changed only here."""
        return self._record

    @property
    def status(self) -> Status:
        return self._status

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            raise InvalidState(f"session {self.session_id}: runtime not started")
        return self._provider

    @property
    def url(self) -> str | None:
        return self.listener.url if self.listener else None

    @property
    def closed(self) -> bool:
        return self._close_task is not None

    @property
    def superseded(self) -> bool:
        """Another generation took the session over: nothing this one writes lands."""
        return self._superseded

    def supersede(self) -> None:
        """Marked taken over (lease lost, a newer generation seen): close writes nothing."""
        self._superseded = True

    # ---- state -------------------------------------------------------------------------

    async def write(
        self, *, append: Entry | None = None, **changes: Unpack[RecordChanges]
    ) -> SessionRecord:
        """The runtime's one fenced write of its record (and of a row with it, in the same
        transaction). A refused fence means another generation took over: superseded."""
        row = None if append is None else to_row(append)
        try:
            record = await self.store.update(
                self.session_id, self.generation, append=row, **changes
            )
        except StaleGeneration:
            self._superseded = True
            raise
        self._record = record
        return record

    async def transition(
        self, new: Status, *, append: Entry | None = None, **changes: Unpack[RecordChanges]
    ) -> SessionRecord:
        """The runtime's one way to change its state: fenced write, then one event."""
        check_transition(self.session_id, self.status, new)
        payload: RecordChanges = {**changes, "status": new}
        record = await self.write(append=append, **payload)
        self._status = new
        self.events.publish(StateChanged(record))
        return record

    async def append(self, entry: Entry) -> int:
        """One transcript row by itself (fenced); its index. The record's counters are
        the store's until the next write."""
        try:
            return await self.store.append_message(self.session_id, self.generation, to_row(entry))
        except StaleGeneration:
            self._superseded = True
            raise

    async def entries(self, offset: int, limit: int) -> list[Entry]:
        """A page of the transcript as entries (reads are anyone's; writes are ours)."""
        rows = await self.store.messages(self.session_id, offset, limit)
        return [from_row(row) for row in rows]

    async def stored(self) -> SessionRecord:
        """The record as stored now (its transcript length counts rows `append` added)."""
        return await self.store.get(self.session_id)

    def observe(self, record: SessionRecord, *fields: str) -> None:
        """A metadata change (a name, archived) the manager stored unfenced: the runtime's
        record takes just those `fields` of it, nothing of a record it did not write (the
        rest may be older than the runtime's own last write)."""
        unknown = set(fields) - METADATA_FIELDS
        if unknown:
            raise ValueError(f"not metadata fields: {sorted(unknown)}")
        self._record = self._record.replace(**{name: getattr(record, name) for name in fields})

    def fail_unrecorded(self, reason: str) -> None:
        """The store refused the end of a turn: the runtime is in error here (it takes no
        turn it cannot record) though the record could not say so; clients are told."""
        self._status = Status.ERROR
        self._record = self._record.replace(status=Status.ERROR, last_error=reason)
        self.events.publish(StateChanged(self._record))

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(self, endpoint: SessionEndpoint) -> None:
        """creating -> idle, or -> error with last_error if a resource cannot be had."""
        try:
            if self.engine.uses_provider:
                self._provider = self._deps.make_provider(self.record)
            if self._deps.open_listener is not None:
                self.listener = await self._deps.open_listener(endpoint, self.token)
            started = await self.engine.start(self.turns)
        except Exception as exc:
            if self.closed:
                await self._release()
                raise InvalidState(f"session {self.session_id} was closed while starting") from exc
            log.warning("session %s: runtime failed to start: %s", self.session_id, exc)
            await self._release()
            reason = str(exc) or type(exc).__name__
            await self.transition(
                Status.ERROR,
                last_error=f"runtime failed to start: {reason}",
                lease_owner=None,
                lease_expires=None,
            )
            raise RuntimeFailed(self.session_id, reason) from exc
        if self.closed:
            # Closed while the listener was being opened: close owns the state; free what
            # arrived after it released everything.
            await self._release()
            raise InvalidState(f"session {self.session_id} was closed while starting")
        # In the background: a slow server does not hold the session up. An external
        # agent connects to the session's MCP servers itself (they were given to it).
        if self.engine.uses_provider:
            self.mcp.start(self._announce_mcp)
        self.checkpoints.start_opening(self.record.turns)
        await self.refresh_worktree()
        if self.engine.uses_provider:
            await self.turns.refresh_instructions()  # told with the state that follows
        note = None if started.note is None else MarkerEntry(MarkerKind.AGENT, started.note)
        if started.agent_session != self.record.agent_session:
            await self.transition(Status.IDLE, append=note, agent_session=started.agent_session)
        else:
            await self.transition(Status.IDLE, append=note)

    async def close(self) -> None:
        """Cancel the turn, release everything, then write closed. Idempotent."""
        if self._close_task is None:
            self._close_task = asyncio.create_task(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        """Staged: closing is written first, the runtime's resources are released whatever
        happens (even if the store cannot be written), and closed is written last."""
        self.checkpoints.stop()  # first: closing never waits on a snapshot
        writable = not self.superseded
        failure: StoreError | None = None
        if writable:
            try:
                await self.transition(Status.CLOSING)
            except StaleGeneration:
                writable = False
            except StoreError as exc:
                failure = exc
        try:
            await self.turns.stop()
        finally:
            await self._release()
        if writable and failure is None:
            try:
                await self.transition(Status.CLOSED, lease_owner=None, lease_expires=None)
            except StaleGeneration:
                pass
            except StoreError as exc:
                failure = exc
        self.events.end_subscriptions()
        if failure is not None:
            log.error(
                "session %s: released, but the store refused the write: %s",
                self.session_id,
                failure,
            )
            raise failure

    async def refresh_worktree(self) -> None:
        """Ahead/behind/dirty of the session's worktree, asked again (start, each turn's
        end): what its summary shows until the next time."""
        if self.worktree is not None:
            self.worktree_state = await worktree_place.state(self.worktree)

    def _announce_mcp(self) -> None:
        if not self.closed:
            self.events.publish(McpServersChanged(self.record))

    async def _release(self) -> None:
        await self.checkpoints.aclose()
        try:
            await self.engine.close()
        except Exception:
            log.exception("session %s: closing its engine failed", self.session_id)
        try:
            await self.mcp.aclose()
        except Exception:
            log.exception("session %s: closing its MCP servers failed", self.session_id)
        provider, self._provider = self._provider, None
        try:
            if provider is not None:
                await provider.aclose()
        except Exception:
            log.exception("session %s: closing the provider client failed", self.session_id)
        listener, self.listener = self.listener, None
        if listener is not None:
            await listener.stop()  # last: the endpoint answers until the runtime is gone
        SECRETS.discard(self.token)

    # ---- settings and commands -------------------------------------------------------------

    async def set_mode(self, mode: Mode) -> None:
        if self.status is not Status.IDLE or self.turns.busy:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: the mode changes only while idle"
            )
        await self.write(mode=mode)
        self.mode = mode
        self.events.publish(ModeChanged(mode))

    async def set_model(self, model: str) -> None:
        """The session's model: stored (a resumed session keeps it), used from the next
        model call on."""
        if not self.engine.uses_provider:
            raise InvalidInput(
                "configId",
                f"the session's agent {self.engine.name!r} chooses its own model "
                "(its options are agent.*)",
            )
        if self.status is not Status.IDLE or self.turns.busy:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: the model changes only while idle"
            )
        await self.write(model=model)
        self.provider.model = model

    def resize(self, rows: int, cols: int) -> TerminalSize:
        """The terminal size for this session's commands; running PTYs follow at once."""
        self.terminal.resize(rows, cols)
        return TerminalSize(rows, cols)

    @property
    def sandbox_mode(self) -> SandboxMode:
        return effective_sandbox(self.mode, self.record.sandbox)

    @property
    def hidden_dirs(self) -> tuple[str, ...]:
        """What commands, MCP servers and the file tools may not reach (RuntimeDeps.hide)."""
        return self._deps.hide

    @property
    def sandbox_problem(self) -> str | None:
        status = self._deps.sandbox
        return None if status.available else status.reason

    async def set_rules(self, rules: tuple[Rule, ...]) -> None:
        """Durable, for this and every later generation (and copied by fork)."""
        await self.write(rules=rules_to_json(rules))

    async def set_setting(
        self, *, approval: Approval | None = None, sandbox: Sandbox | None = None
    ) -> None:
        if self.status is not Status.IDLE or self.turns.busy:
            raise InvalidState(
                f"session {self.session_id} is {self.status.value}: settings change only while idle"
            )
        changes: RecordChanges = {}
        if approval is not None:
            changes["approval"] = approval
        if sandbox is not None:
            changes["sandbox"] = sandbox
        await self.write(**changes)

    def command_output(self, call_id: str, on_output: Callable[[str], None]) -> CommandOutput:
        """Where one command's output goes: the model's part, the live stream, the spool."""
        spools = self._deps.spools
        spool = spools.open(self.session_id, call_id)
        return CommandOutput(self.limits, on_output, spool, spools.cap)

    def contain(self, argv: Sequence[str], writable: Sequence[str]) -> list[str]:
        """An agent's argv in the session's sandbox (`EngineHost.contain`)."""
        bwrap = sandbox.require(self._deps.sandbox)
        return sandbox.wrap(
            argv,
            mode=self.sandbox_mode,
            cwd=self.cwd,
            bwrap=bwrap,
            hide=self._deps.hide,
            writable=writable,
            network=True,
            readable=sandbox.program_roots(argv),
        )

    async def execute(self, command: str, output: CommandOutput) -> CommandResult:
        """Run one command contained in its own PID namespace (bubblewrap), under the
        session's sandbox mode. Raises SandboxUnavailable (nothing runs) without bwrap."""
        bwrap = sandbox.require(self._deps.sandbox)
        argv = sandbox.wrap(
            ["bash", "-c", command],
            mode=self.sandbox_mode,
            cwd=self.cwd,
            bwrap=bwrap,
            hide=self._deps.hide,
        )
        if self.backend is Backend.PTY:
            return await run_command_pty(argv, self.cwd, self.limits, self.terminal, output)
        return await run_command(argv, self.cwd, self.limits, output)
