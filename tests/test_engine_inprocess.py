"""The engine seam in process: the runtime drives a scripted engine (no provider, no
model), through `agent/engine.py`'s interface only. What the host owns whatever engine
runs (the user message and the turn's end in the transcript, consent, commands in the
sandbox, the events clients see, cancel and close) is checked from the outside: the
manager's answers, the stored transcript and the event stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.values import Approval, Status, StopReason
from sidecar.agent.backends.groups import CommandLimits
from sidecar.agent.engine import Engine, EngineStart
from sidecar.agent.host import EngineHost
from sidecar.agent.outcome import TurnOutcome
from sidecar.agent.providers.offline import OfflineProvider
from sidecar.core.events import Event, EventHub
from sidecar.core.leases import Leases
from sidecar.core.manager import ManagerDeps, NewSession, SessionManager
from sidecar.core.runtime import RuntimeDeps
from sidecar.domain.agent_options import AgentOption
from sidecar.domain.events import (
    AgentTextChunk,
    AgentThoughtChunk,
    Origin,
    StateChanged,
    TitleChanged,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolKind,
    ToolOutputChunk,
    TurnEnded,
    UserMessageAdded,
)
from sidecar.domain.permissions import PermissionRequest
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import AssistantEntry, MarkerEntry, ToolResultEntry, UserEntry
from sidecar.store.memory import MemorySessionStore


class ScriptedEngine:
    """Thinks, says something, asks to run one command, runs it in the host's sandbox,
    records its result, and ends; a prompt `wait` blocks until cancelled."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def uses_provider(self) -> bool:
        return False  # it runs no model of the host's: the runtime makes it no provider

    @property
    def embeds_files(self) -> bool:
        return False

    def options(self) -> tuple[AgentOption, ...]:
        return ()

    async def set_option(self, option_id: str, value: str) -> None:
        raise AssertionError("no options to set")

    async def start(self, host: EngineHost) -> EngineStart:
        assert host.cwd  # the session's, before any turn
        self.log.append("started")
        return EngineStart()

    def refuses(self, prompt: UserPrompt) -> str | None:
        return "no pictures, please" if prompt.has("image") else None

    async def run_turn(self, host: EngineHost, message: UserPrompt) -> TurnOutcome:
        prompt = message.text
        self.log.append(f"turn {prompt}")
        if prompt == "wait":
            await asyncio.Event().wait()  # until the host cancels the task
        if prompt.startswith("title "):
            await host.propose_title(prompt.removeprefix("title "))
            host.record_last(AssistantEntry("named"))
            return TurnOutcome("named", StopReason.END_TURN)
        host.publish(AgentThoughtChunk("planning"))
        host.publish(AgentTextChunk(f"on it: {prompt}"))
        call = "scripted_1"
        host.publish(ToolCallStarted(call, "bash", "echo from-engine", ToolKind.EXECUTE))
        verdict = await host.authorize(
            PermissionRequest(call, "bash", "echo from-engine", ToolKind.EXECUTE, "echo x")
        )
        self.log.append(f"allowed {verdict.allowed}")
        if not verdict.allowed:
            reason = verdict.reason or "refused"
            await host.record(ToolResultEntry(call, "bash", reason, ok=False))
            host.publish(ToolCallFinished(call, False, reason, None, False))
            host.record_last(AssistantEntry("not run"))
            return TurnOutcome("not run", StopReason.END_TURN)
        host.publish(ToolCallRunning(call))
        output = host.command_output(call, lambda text: host.publish(ToolOutputChunk(call, text)))
        result = await host.execute("echo from-engine", output)
        await host.record(ToolResultEntry(call, "bash", result.output, result.exit_code))
        host.publish(ToolCallFinished(call, result.exit_code == 0, result.output, 0, False))
        host.record_last(AssistantEntry("done"))
        return TurnOutcome("done", StopReason.END_TURN)

    def cancel(self) -> None:
        self.log.append("cancel")

    async def close(self) -> None:
        self.log.append("close")


class Core:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.engine_log: list[str] = []

        def make_engine(record: SessionRecord) -> Engine:
            self.engine_log.append(f"made {record.generation}")
            return ScriptedEngine(self.engine_log)

        self.manager = SessionManager(
            ManagerDeps(
                runtime=RuntimeDeps(
                    store=MemorySessionStore(),
                    # The provider is never asked: the scripted engine has no model.
                    make_provider=lambda record: OfflineProvider(),
                    limits=CommandLimits(timeout=20, interrupt_grace=0.2, kill_grace=0.5),
                    make_engine=make_engine,
                ),
                events=EventHub(self.events.append),
                leases=Leases(15.0),
            )
        )

    def bodies(self, session_id: str) -> list[Any]:
        return [e.body for e in self.events if e.session_id == session_id]

    async def entries(self, session_id: str) -> list[Any]:
        page, _ = await self.manager.messages(session_id, 0, 1000)
        return [entry for _, entry in page]


@pytest.fixture
async def core() -> AsyncIterator[Core]:
    made = Core()
    yield made
    await made.manager.shutdown()


async def test_the_runtime_drives_a_scripted_engine_through_the_seam(
    core: Core, tmp_path: Path
) -> None:
    view = await core.manager.create(NewSession(str(tmp_path), approval=Approval.AUTO))
    sid = view.session_id
    outcome = await core.manager.prompt(sid, "hello", Origin.ACP)
    assert (outcome.response, outcome.stop_reason, outcome.turn) == (
        "done",
        StopReason.END_TURN,
        1,
    )
    entries = await core.entries(sid)
    assert [type(e) for e in entries] == [UserEntry, ToolResultEntry, AssistantEntry]
    assert entries[0].text == "hello" and entries[0].turn == 1
    result = entries[1]
    assert result.content.strip() == "from-engine" and result.exit_code == 0
    kinds = [type(b) for b in core.bodies(sid) if not isinstance(b, StateChanged | ToolOutputChunk)]
    assert kinds[kinds.index(UserMessageAdded) :] == [
        UserMessageAdded,
        TitleChanged,  # the host names an untitled session after its first prompt
        AgentThoughtChunk,
        AgentTextChunk,
        ToolCallStarted,
        ToolCallRunning,
        ToolCallFinished,
        TurnEnded,
    ]
    record = (await core.manager.view(sid)).record
    assert record.status is Status.IDLE and record.turns == 1 and record.title == "hello"
    # One engine per generation, closed with it.
    await core.manager.close(sid)
    assert core.engine_log == ["made 1", "started", "turn hello", "allowed True", "close"]
    await core.manager.resume(sid)
    assert core.engine_log[-2:] == ["made 2", "started"]


async def test_cancel_tells_the_engine_and_the_host_records_the_cancelled_turn(
    core: Core, tmp_path: Path
) -> None:
    view = await core.manager.create(NewSession(str(tmp_path), approval=Approval.AUTO))
    sid = view.session_id
    turn = asyncio.ensure_future(core.manager.prompt(sid, "wait", Origin.ACP))
    while "turn wait" not in core.engine_log:
        await asyncio.sleep(0.01)
    assert await core.manager.cancel(sid)
    outcome = await turn
    assert outcome.stop_reason is StopReason.CANCELLED
    assert core.engine_log == ["made 1", "started", "turn wait", "cancel"]
    entries = await core.entries(sid)
    assert isinstance(entries[0], UserEntry) and isinstance(entries[-1], MarkerEntry)
    assert (await core.manager.view(sid)).record.status is Status.IDLE


async def test_an_engine_asks_the_host_for_consent_and_a_refusal_runs_nothing(
    core: Core, tmp_path: Path
) -> None:
    view = await core.manager.create(NewSession(str(tmp_path), approval=Approval.DENY))
    outcome = await core.manager.prompt(view.session_id, "rm", Origin.ACP)
    assert outcome.response == "not run"
    assert core.engine_log == ["made 1", "started", "turn rm", "allowed False"]
    result = (await core.entries(view.session_id))[1]
    assert isinstance(result, ToolResultEntry) and result.ok is False
    assert "approval setting is deny" in result.content
    assert not any(isinstance(b, ToolOutputChunk) for b in core.bodies(view.session_id))


async def test_an_engine_names_the_session_until_the_user_does(core: Core, tmp_path: Path) -> None:
    view = await core.manager.create(NewSession(str(tmp_path), approval=Approval.AUTO))
    sid = view.session_id
    await core.manager.prompt(sid, "title Fix the parser", Origin.ACP)
    record = (await core.manager.view(sid)).record
    assert record.title == "Fix the parser"  # the engine's name beat the prompt's
    assert [b.title for b in core.bodies(sid) if isinstance(b, TitleChanged)][-1] == record.title
    await core.manager.settings.rename(sid, "Mine")
    await core.manager.prompt(sid, "title Something else", Origin.ACP)
    assert (await core.manager.view(sid)).record.title == "Mine"
