"""A runtime's turns and compactions: the turn lock, cancellation, and the engine's host.

A turn is run by the runtime's engine (`agent/engine.py`), known only by its interface;
this runner is the engine's host (`agent/host.py: TurnHost`), over the runtime's narrow
`TurnOwner` interface.

One turn (or compaction) at a time. Every prompt gets exactly one answer, whenever a
cancel arrives: the turn is one task, and a cancel reaches it only while its work runs
(the engine's turn, a compaction): claiming the turn, recording what the work changed
and writing its end are never cut half-way, so the state is always put back (idle, or
error with the reason). A cancel that comes while the turn is still being recorded as
running is remembered and applied at once. The runner tells its own cancel from anyone
else's (`Task.uncancel`, as `asyncio.timeout` does): only its own becomes a cancelled
turn. One task, not a supervisor over an inner task: a plain turn is a few loop steps,
and a second task and its wait were a good share of them.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Protocol, TypeVar

from typing_extensions import Unpack

from protocol.values import Mode, RewindScope, Sandbox, Status, StopReason
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.output import CommandOutput
from sidecar.agent.context import ChatMessage, ProviderContext, with_image_parts
from sidecar.agent.engine import Engine
from sidecar.agent.instructions import ProjectInstructions
from sidecar.agent.mcp import McpCallResult, ToolSpec
from sidecar.agent.outcome import TurnOutcome
from sidecar.agent.providers.base import Provider, Usage
from sidecar.agent.providers.offline import CHARS_PER_TOKEN
from sidecar.agent.tools import function_spec, system_prompt, tools_for_mode
from sidecar.core import compaction
from sidecar.core import rewind as rewind_steps
from sidecar.core.approvals import ApprovalDesk
from sidecar.core.checkpointing import TurnCheckpoints
from sidecar.core.events import EventStream
from sidecar.core.hunk_revert import HunkRevert
from sidecar.core.mcp_tools import McpTools
from sidecar.core.parts import RecordWriter
from sidecar.core.views import CompactionOutcome, RewindOutcome
from sidecar.domain.errors import (
    CheckpointError,
    InvalidInput,
    InvalidState,
    ProviderError,
    SessionBusy,
    StaleGeneration,
    StoreError,
)
from sidecar.domain.events import (
    AgentOptionsChanged,
    InstructionsChanged,
    Origin,
    SessionEvent,
    SettingsChanged,
    TitleChanged,
    TurnEnded,
    UsageUpdated,
    UserMessageAdded,
)
from sidecar.domain.images import ImageRef
from sidecar.domain.permissions import PermissionRequest, Verdict
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import DEFAULT_TITLE, SessionRecord
from sidecar.domain.titles import title_from
from sidecar.domain.transcript import Entry, UserEntry, cancelled_marker
from sidecar.store.base import RecordChanges
from sidecar.store.images import ImageStore

# What a client is told of a turn that failed on a bug of ours.
INTERNAL_FAILURE: Final = (
    "the turn stopped on an internal error of the sidecar; its log has the details"
)

log = logging.getLogger(__name__)

T = TypeVar("T")
IMAGES_KEPT: Final = 16  # images' bytes held in memory per runtime (at least the context's)


class _Aborted:
    """What the work of a turn `abort` cancelled gives instead of a result."""


ABORTED: Final = _Aborted()


class TurnOwner(RecordWriter, Protocol):
    """The runtime as its turns see it (`runtime.SessionRuntime`): its state and its
    writes (the runtime is their one writer), its parts, and what runs a command."""

    @property
    def status(self) -> Status: ...

    @property
    def closed(self) -> bool: ...

    @property
    def superseded(self) -> bool: ...

    @property
    def cwd(self) -> str: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def limits(self) -> CommandLimits: ...

    @property
    def provider(self) -> Provider: ...

    @property
    def sandbox_mode(self) -> Sandbox: ...

    @property
    def hidden_dirs(self) -> tuple[str, ...]: ...

    @property
    def events(self) -> EventStream: ...

    @property
    def approvals(self) -> ApprovalDesk: ...

    @property
    def checkpoints(self) -> TurnCheckpoints: ...

    @property
    def mcp(self) -> McpTools: ...

    @property
    def instructions(self) -> ProjectInstructions: ...

    @property
    def images(self) -> ImageStore: ...

    async def transition(
        self, new: Status, *, append: Entry | None = None, **changes: Unpack[RecordChanges]
    ) -> SessionRecord: ...

    async def append(self, entry: Entry) -> int: ...

    async def write(
        self, *, append: Entry | None = None, **changes: Unpack[RecordChanges]
    ) -> SessionRecord: ...

    async def entries(self, offset: int, limit: int) -> list[Entry]: ...

    def fail_unrecorded(self, reason: str) -> None: ...

    def command_output(self, call_id: str, on_output: Callable[[str], None]) -> CommandOutput: ...

    async def execute(self, command: str, output: CommandOutput) -> CommandResult: ...

    def contain(self, argv: Sequence[str], writable: Sequence[str]) -> list[str]: ...

    async def refresh_worktree(self) -> None: ...


def _to_the_end(work: Callable[[], Awaitable[T]]) -> Callable[[], Coroutine[Any, Any, T]]:
    """`work` that, once begun, runs to its end: a cancel meanwhile (the turn's abort)
    waits for it, so the turn lock is never let go while it still writes."""

    async def run() -> T:
        task = asyncio.ensure_future(work())
        while True:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done():
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()  # a cancel is the turn's, not the work's

    return run


class TurnRunner:
    """Runs one runtime's turns with its engine; implements the engine's `TurnHost`."""

    def __init__(self, runtime: TurnOwner, context_budget: int, engine: Engine) -> None:
        self._runtime = runtime
        self._engine = engine  # what runs the turns; known only by its interface
        self._engine_turn = False  # the running work is the engine's (not a compaction)
        self._context_budget = context_budget
        self._supervisor: asyncio.Task[Any] | None = None  # the running turn's task
        self._working = False  # its work runs: a cancel may reach it
        self._lost_after_turn: str | None = None  # the engine went while a turn ran
        self._cancel_requested = False
        self._cancel_sent = False  # abort cancelled the task (once per turn)
        self._context: ProviderContext | None = None
        self._usage = Usage()  # of the running turn (or compaction)
        self._turn: int | None = None  # the running turn's number (None: not a turn)
        self._last: Entry | None = None  # the turn's last row, written with its end
        self._auto_title: str | None = None  # the title this runtime gave, not the user
        # (transcript length, turns) when the running turn began: a fork copies up to here.
        self.before_turn: tuple[int, int] | None = None
        self._image_data: dict[str, str] = {}  # digest -> base64, for the provider

    @property
    def busy(self) -> bool:
        return self._supervisor is not None

    async def settled(self) -> None:
        """Until no turn (or rewind, compaction, revert) runs; never raises."""
        while self._supervisor is not None:
            await asyncio.wait([self._supervisor])

    # ---- starting, cancelling, stopping ----------------------------------------------------

    async def prompt(self, prompt: str | UserPrompt, origin: Origin) -> TurnOutcome:
        """Run one turn. Shielded: a caller that goes away (an HTTP client hanging up) does
        not cancel the turn; cancelling is `abort()`'s job."""
        return await asyncio.shield(self.start_prompt(prompt, origin))

    def refusal(self, message: UserPrompt) -> str | None:
        """Why this runtime's turn would not take the prompt (None: it would): content the
        engine cannot give its agent, an image for a model its provider gives none."""
        refusal = self._engine.refuses(message)
        if refusal is None and message.has("image") and self._engine.uses_provider:
            if not self.provider.takes_images:
                refusal = f"the model {self.provider.model!r} is given no images by its provider"
        return refusal

    async def check(self, message: UserPrompt) -> None:
        """Everything a turn would refuse of `message`, refused now (InvalidInput naming
        `prompt`) and nothing kept: a queued message is refused when it is queued, not
        at its turn."""
        refusal = self.refusal(message)
        if refusal is not None:
            raise InvalidInput("prompt", refusal)
        for block in message.blocks:
            if block.get("type") == "image":
                await self._runtime.images.check(str(block.get("data") or ""))

    def start_prompt(
        self,
        prompt: str | UserPrompt,
        origin: Origin,
        kept: tuple[ImageRef, ...] | None = None,
    ) -> asyncio.Task[TurnOutcome]:
        """Take the turn lock now (synchronously: a cancel that comes right behind finds
        the turn) and return the task that runs it. A prompt the engine cannot take (an
        image for a model that reads none) is refused here, before anything is recorded.
        `kept`: the prompt's images, kept already (`keep_images`); else they are kept
        as the turn starts."""
        message = UserPrompt(prompt) if isinstance(prompt, str) else prompt
        refusal = self.refusal(message)
        if refusal is not None:
            raise InvalidInput("prompt", refusal)
        text = message.text
        cancelled = TurnOutcome("", StopReason.CANCELLED)

        async def claim() -> None:
            # The runtime is the session's one writer: its record has the turn count.
            runtime = self._runtime
            turn = runtime.record.turns + 1
            # Kept (checked by content) before anything is recorded: a refused image
            # leaves the session as it was.
            images = kept if kept is not None else await self.keep_images(message)
            entry = UserEntry(text, turn=turn, images=images)
            titled = runtime.record.title == DEFAULT_TITLE
            if titled:  # an untitled session is named after its first prompt, in one write
                started = await runtime.transition(
                    Status.RUNNING,
                    append=entry,
                    interrupted=False,
                    turns=turn,
                    title=title_from(text),
                )
            else:
                started = await runtime.transition(
                    Status.RUNNING, append=entry, interrupted=False, turns=turn
                )
            self.before_turn = (started.message_count - 1, turn - 1)
            self._turn = turn
            runtime.checkpoints.begin(turn)
            if self._context is not None:
                self._context.append(started.message_count - 1, entry)
            runtime.events.publish(UserMessageAdded(text, origin))
            if titled:
                self._auto_title = started.title
                runtime.events.publish(TitleChanged(started.title, started.updated_at))

        task = self._begin(
            claim, lambda: self._engine.run_turn(self, message), cancelled, self._checkpoint_end
        )
        self._engine_turn = True
        return task

    async def compact(self, keep_turns: int) -> CompactionOutcome:
        """`_session/compact`: summarize all but the last `keep_turns` turns, under the lock."""
        if not self._engine.uses_provider:
            raise InvalidInput(
                "keepTurns",
                f"the session's agent {self._engine.name!r} keeps its own context: "
                "nothing here to compact",
            )

        async def work() -> CompactionOutcome:
            return await compaction.compact(self, await self._ensure_context(), keep_turns)

        cancelled = CompactionOutcome(compacted=False, cancelled=True)
        return await asyncio.shield(self._begin(self._claim_running, work, cancelled))

    async def rewind(
        self, turn: int | None, scope: RewindScope, *, force: bool, dry_run: bool
    ) -> RewindOutcome:
        """`_session/rewind`, under the turn lock (a prompt meanwhile is busy)."""
        if scope is not RewindScope.CODE and not self._engine.uses_provider:
            # An external agent keeps its own conversation, which ACP cannot cut back.
            raise InvalidInput(
                "scope",
                f"the session's agent {self._engine.name!r} keeps its own conversation, "
                "which cannot be rewound: only scope 'code' can be",
            )

        # Not cancellable half way: the restore is journaled, but a rewind asked for is a
        # rewind done, and the turn lock is held until it is.
        work = _to_the_end(
            lambda: rewind_steps.rewind(self, turn, scope, force=force, dry_run=dry_run)
        )
        cancelled = RewindOutcome(scope, turn, None, None, dry_run, cancelled=True)
        return await asyncio.shield(self._begin(self._claim_running, work, cancelled))

    async def revert(
        self, turn: int, path: str, hunks: tuple[str, ...], *, force: bool
    ) -> HunkRevert | None:
        """`_session/revert`, under the turn lock like a rewind (None: cancelled before it
        began; once begun it is done, the restore being journaled)."""

        checkpoints = self._runtime.checkpoints
        work = _to_the_end(
            lambda: checkpoints.revert(turn, self._runtime.record.turns, path, hunks, force=force)
        )
        return await asyncio.shield(self._begin(self._claim_running, work, None))

    async def hold(self, work: Callable[[], Awaitable[T]]) -> T | None:
        """`work` (a merge of the session's branch) under the turn lock like a revert: a
        prompt meanwhile is busy, a queued one waits its end. Once begun it runs to its
        end -- a cancel meanwhile waits for it -- so the lock is never let go while it
        still writes (None: cancelled before it began)."""

        return await asyncio.shield(self._begin(self._claim_running, _to_the_end(work), None))

    async def _claim_running(self) -> None:
        """The first write of work under the turn lock that is not a turn (a compaction,
        rewind, revert, merge): the session runs."""
        started = await self._runtime.transition(Status.RUNNING)
        self.before_turn = (started.message_count, started.turns)

    def abort(self) -> bool:
        """Cancel the running turn; True if there was one (or one was starting)."""
        supervisor = self._supervisor
        if supervisor is None:
            return False
        self._cancel_requested = True
        if self._engine_turn:
            self._engine.cancel()  # told first: an engine elsewhere is asked to stop
        if self._working and not self._cancel_sent:
            self._cancel_sent = True
            supervisor.cancel()
        return True

    def engine_lost(self, reason: str) -> None:
        """What ran the engine is gone between turns (an external agent's process that
        exited, or a shared one another session's turn crashed): the session goes to
        error, lastError saying why, so its next prompt starts a new generation instead of
        failing first. Written under the turn lock (a prompt right then is told the
        session is busy); while a turn runs, after it (one that failed for it is in error
        already; one that ended as the agent exited, its answer sent, is not); ignored once
        closed."""
        runtime = self._runtime
        if self._supervisor is not None:
            self._lost_after_turn = reason
            return
        if runtime.closed or runtime.status is not Status.IDLE:
            return
        lost = asyncio.create_task(self._lost(reason), name=f"lost {runtime.session_id}")
        self._supervisor = lost
        lost.add_done_callback(self._released)

    async def _lost(self, reason: str) -> None:
        runtime = self._runtime
        try:
            await runtime.transition(Status.ERROR, last_error=reason)
        except StaleGeneration:
            return  # another generation is the session's now
        except StoreError as exc:
            log.error("session %s: its engine is gone, unrecorded: %s", runtime.session_id, exc)
            runtime.fail_unrecorded(reason)

    async def stop(self) -> None:
        """Cancel whatever runs and wait until its state is settled (close uses this)."""
        supervisor = self._supervisor
        if supervisor is not None:
            self.abort()
            await asyncio.gather(supervisor, return_exceptions=True)

    def _begin(
        self,
        claim: Callable[[], Awaitable[None]],
        work: Callable[[], Coroutine[Any, Any, T]],
        on_cancel: T,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> asyncio.Task[T]:
        """The turn lock, taken synchronously (so a cancel right behind a prompt sees it)."""
        runtime = self._runtime
        if self._supervisor is not None:
            raise SessionBusy(runtime.session_id)
        if runtime.status is not Status.IDLE:
            raise InvalidState(
                f"session {runtime.session_id} is {runtime.status.value}: "
                "a turn starts only from idle"
            )
        self._cancel_requested = False
        self._cancel_sent = False
        self._engine_turn = False
        self._usage = Usage()
        self._turn = None
        self._last = None
        supervisor = asyncio.create_task(self._supervise(claim, work, on_cancel, after))
        self._supervisor = supervisor
        supervisor.add_done_callback(self._released)
        return supervisor

    def _released(self, task: asyncio.Task[Any]) -> None:
        if self._supervisor is task:
            self._supervisor = None
            self._working = False
            self._engine_turn = False
            self.before_turn = None
            lost, self._lost_after_turn = self._lost_after_turn, None
            if lost is not None:
                self.engine_lost(lost)

    async def _run_work(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T | _Aborted:
        """The work, the only part of a turn a cancel reaches: its result, or ABORTED when
        `abort` cancelled it or the work itself ended the turn cancelled (raising
        CancelledError: the user answered a permission request "cancelled"). Its errors
        are raised; so is a cancel of the task by anyone but `abort` (not ours to hide)."""
        task = asyncio.current_task()
        assert task is not None
        self._working = True
        try:
            result = await work()
        except asyncio.CancelledError:
            if self._cancel_sent:
                if task.uncancel() > 0:
                    raise  # cancelled by someone else too
                return ABORTED
            if task.cancelling():
                raise  # the task was cancelled, not by `abort`
            return ABORTED  # the work ended the turn cancelled itself (a "cancelled" answer)
        finally:
            self._working = False
        if self._cancel_sent and task.cancelling():
            task.uncancel()  # the work swallowed our cancel and finished: its result stands
        return result

    async def _supervise(
        self,
        claim: Callable[[], Awaitable[None]],
        work: Callable[[], Coroutine[Any, Any, T]],
        on_cancel: T,
        after: Callable[[], Awaitable[None]] | None,
    ) -> T:
        await claim()  # a refusal here (store error, superseded) changed nothing
        if self._cancel_requested:
            if after is not None:
                await after()
            await self._end(Status.IDLE, cancelled=True)
            self._runtime.events.publish(TurnEnded(StopReason.CANCELLED))
            return on_cancel
        try:
            result = await self._run_work(work)
        except asyncio.CancelledError:
            raise  # the task itself was cancelled (not by abort): not ours to hide
        except BaseException as failure:
            if after is not None:
                await after()  # however the work ended: what it changed is recorded first
            await self._failed(failure)
            raise
        if after is not None:
            await after()
        if isinstance(result, _Aborted):
            await self._end(Status.IDLE, cancelled=True)
            self._runtime.events.publish(TurnEnded(StopReason.CANCELLED))
            return on_cancel
        await self._end(Status.IDLE)
        stop = result.stop_reason if isinstance(result, TurnOutcome) else StopReason.END_TURN
        self._runtime.events.publish(TurnEnded(stop))
        if isinstance(result, TurnOutcome) and self.before_turn is not None:
            turn = self.before_turn[1] + 1
            return dataclasses.replace(result, usage=self._usage, turn=turn)  # type: ignore[return-value]
        return result

    async def _failed(self, failure: BaseException) -> None:
        """The end of a turn whose work raised `failure` (raised again by the caller)."""
        if isinstance(failure, ProviderError):
            await self._end(Status.ERROR, last_error=str(failure))
            self._runtime.events.publish(TurnEnded(None, str(failure)))
        elif isinstance(failure, InvalidInput | InvalidState | CheckpointError):
            # A refusal (a rewind with nothing to rewind to, a revert whose lines changed
            # since): the session is as it was.
            await self._end(Status.IDLE)
        elif isinstance(failure, StaleGeneration):
            log.warning(
                "session %s: generation %s superseded",
                self._runtime.session_id,
                self._runtime.generation,
            )
        elif isinstance(failure, Exception):
            # Every client reads lastError: it names no internal text (paths, values,
            # a library's message); the log, for whoever runs the sidecar, has it all.
            log.error("session %s: turn failed", self._runtime.session_id, exc_info=failure)
            await self._end(Status.ERROR, last_error=INTERNAL_FAILURE)

    async def _checkpoint_end(self) -> None:
        """The turn's after-checkpoint, and clients told what it changed."""
        turn = self._turn
        if turn is None:
            return
        changes = await self._runtime.checkpoints.end(turn)
        if changes is not None:
            self._runtime.events.publish(changes)
        await self._runtime.refresh_worktree()  # told with the end of the turn's state

    async def _end(
        self, new: Status, last_error: str | None = None, *, cancelled: bool = False
    ) -> None:
        """Write the end of the turn in one write: the state, the usage totals, and the
        turn's last row (its final reply, or a cancelled prompt's marker)."""
        runtime = self._runtime
        last, self._last = self._last, None
        # While closing, close owns the state, but the reply still joins the transcript; a
        # superseded runtime's write is fenced by the store. Either way a reply that could
        # not be recorded fails the prompt: nothing is acknowledged that is not stored.
        if runtime.status is not Status.RUNNING or runtime.closed or runtime.superseded:
            if last is not None:
                await self._record_alone(last, required=True)
            return
        usage = self._usage
        # The turn's token counts join the session's totals in the same write.
        totals: RecordChanges = {
            "usage_input": runtime.record.usage_input + usage.input_tokens,
            "usage_output": runtime.record.usage_output + usage.output_tokens,
        }
        if last_error is not None:
            totals["last_error"] = last_error
        marker = cancelled_marker() if cancelled and self._turn is not None else None
        if last is not None and marker is not None:
            await self._record_alone(last)  # not reached today: a final reply ends the work
            last = None
        try:
            ended = await runtime.transition(
                new, append=marker if marker is not None else last, **totals
            )
        except StaleGeneration:
            if last is None:
                return
            # The reply could not be recorded: the turn fails as its own write would have.
            log.warning(
                "session %s: generation %s superseded", runtime.session_id, runtime.generation
            )
            self._context = None
            raise
        except StoreError as exc:
            # The record cannot follow; the runtime still must not take turns it cannot
            # record. Clients are told (the state as it is here; close releases the runtime
            # and reports the store error).
            log.exception("session %s: cannot record the end of a turn", runtime.session_id)
            runtime.fail_unrecorded(f"cannot record the end of the turn: {exc}")
            if last is not None:
                self._context = None  # the reply is not in the store: reload what is
                raise  # and the prompt is not answered as if it were
            return
        if last is not None and self._context is not None:
            self._context.append(ended.message_count - 1, last)

    async def _record_alone(self, entry: Entry, *, required: bool = False) -> None:
        """Append the turn's last row by itself; `required`: a failure is raised (the
        prompt's answer depends on it), else logged."""
        try:
            await self.record(entry)
        except (StaleGeneration, StoreError) as exc:
            log.warning(
                "session %s: the turn's last row was not recorded: %s",
                self._runtime.session_id,
                exc,
            )
            self._context = None
            if required:
                raise

    # ---- TurnHost --------------------------------------------------------------------------

    @property
    def cwd(self) -> str:
        return self._runtime.cwd

    @property
    def mode(self) -> Mode:
        return self._runtime.mode

    @property
    def limits(self) -> CommandLimits:
        return self._runtime.limits

    @property
    def provider(self) -> Provider:
        return self._runtime.provider

    def record_last(self, entry: Entry) -> None:
        self._last = entry  # `_end` writes it with the turn's state

    async def record(self, entry: Entry) -> None:
        index = await self._runtime.append(entry)
        if self._context is not None:
            self._context.append(index, entry)

    async def read_entries(self, offset: int, limit: int) -> list[Entry]:
        return await self._runtime.entries(offset, limit)

    async def _ensure_context(self) -> ProviderContext:
        if self._context is None:
            # Loaded once per generation, on the first model call, not at resume.
            record = await self._runtime.stored()
            self._context = await ProviderContext.load(self.read_entries, record)
        return self._context

    def forget_context(self) -> None:
        """The record points at a new context (a rewind): load it on the next model call."""
        self._context = None

    def provider_context(self) -> list[ChatMessage]:
        if self._context is None:
            raise InvalidState("the provider context is loaded by before_model_call")
        instructions = self._runtime.instructions.section
        messages = self._context.messages(system_prompt(self.mode, self.cwd, instructions))
        if not self._context.with_images:
            return messages
        return [with_image_parts(m, self._image_data) if "images" in m else m for m in messages]

    async def keep_images(self, message: UserPrompt) -> tuple[ImageRef, ...]:
        """The prompt's images, checked by their content and kept (InvalidInput naming
        `prompt` for one that is no image or too big)."""
        kept = []
        for block in message.blocks:
            if block.get("type") == "image":
                image = await self._runtime.images.put(str(block.get("data") or ""))
                kept.append(image)
        return tuple(kept)

    async def _load_images(self) -> None:
        """The bytes of the images the context holds, read once per runtime (bounded:
        the oldest are dropped from memory, and read again if a later call needs them)."""
        if self._context is None or not self._context.with_images:
            return
        wanted = [i for m in self._context.messages("") for i in m.get("images", ())]
        for image in wanted:
            if image.digest not in self._image_data:
                data = await self._runtime.images.read(image.digest)
                self._image_data[image.digest] = base64.b64encode(data).decode()
        while len(self._image_data) > max(IMAGES_KEPT, len(wanted)):
            self._image_data.pop(next(iter(self._image_data)))

    async def refresh_instructions(self) -> bool:
        """Re-read the project's instruction files if they changed; True when they did.
        The stats run here, on the loop; only a change is read in a worker thread. A
        failure is logged and the prompt keeps what it had."""
        instructions = self._runtime.instructions
        try:
            scan = instructions.scan()
            if instructions.unchanged(scan):
                return False
            return await asyncio.to_thread(instructions.refresh, scan)
        except Exception:
            log.exception("session %s: reading AGENTS.md failed", self._runtime.session_id)
            return False

    async def before_model_call(self) -> None:
        """Load the context once; keep what the provider is sent within the budget; let
        the MCP servers finish connecting so the model sees their tools; the project's
        instruction files as they are now (clients are told when they changed)."""
        if await self.refresh_instructions():
            self._runtime.events.publish(InstructionsChanged(self._runtime.record))
        await self._runtime.mcp.ready()
        context = await self._ensure_context()
        if self._context_budget and context.chars > self._context_budget:
            await compaction.compact(self, context, keep_turns=1)
        await self._load_images()

    def publish(self, event: SessionEvent) -> None:
        if isinstance(event, AgentOptionsChanged):
            # Clients list the agent's options with the session's own: one settings event.
            event = SettingsChanged(self._runtime.record)
        self._runtime.events.publish(event)

    def tool_specs(self) -> list[dict[str, Any]]:
        return [*tools_for_mode(self.mode), *map(function_spec, self._mcp_tools())]

    def _mcp_tools(self) -> list[ToolSpec]:
        return self._runtime.mcp.tools(self.mode)

    def mcp_tool(self, name: str) -> ToolSpec | None:
        return self._runtime.mcp.tool(name, self.mode)

    async def call_mcp(self, name: str, arguments: dict[str, Any]) -> McpCallResult:
        return await self._runtime.mcp.call(name, arguments)

    async def propose_title(self, title: str) -> None:
        runtime = self._runtime
        current = runtime.record.title
        if current not in (DEFAULT_TITLE, self._auto_title):
            return  # the user named it: their name stays
        shown = title_from(title)
        if not title.strip() or shown == current:
            return
        written = await runtime.write(title=shown)
        self._auto_title = written.title
        runtime.events.publish(TitleChanged(written.title, written.updated_at))

    def count_tokens(self, input_tokens: int, output_tokens: int) -> None:
        self._usage = self._usage + Usage(max(input_tokens, 0), max(output_tokens, 0))

    def add_usage(self, usage: Usage | None, context_window: int | None) -> None:
        if usage is None:
            return
        self._usage = self._usage + usage
        size = context_window or max(1, self._context_budget // CHARS_PER_TOKEN)
        self.publish(UsageUpdated(usage.input_tokens + usage.output_tokens, size))

    async def authorize(self, request: PermissionRequest) -> Verdict:
        return await self._runtime.approvals.authorize(request)

    @property
    def sandbox(self) -> Sandbox:
        return self._runtime.sandbox_mode

    @property
    def hidden(self) -> tuple[str, ...]:
        return self._runtime.hidden_dirs

    def command_output(self, call_id: str, on_output: Callable[[str], None]) -> CommandOutput:
        return self._runtime.command_output(call_id, on_output)

    async def execute(self, command: str, output: CommandOutput) -> CommandResult:
        return await self._runtime.execute(command, output)

    async def before_tool_call(self) -> None:
        await self._runtime.checkpoints.ready()

    def contain(self, argv: Sequence[str], writable: Sequence[str]) -> list[str]:
        return self._runtime.contain(argv, writable)

    # ---- for compaction and rewind (their hosts' `runtime`) --------------------------------

    @property
    def runtime(self) -> TurnOwner:
        return self._runtime
