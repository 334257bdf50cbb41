"""The session manager and its runtimes in process: memory store, offline provider, no
listener, no subprocess (the way Jupyter Server tests its session manager). Fast, and
close enough to the code to pin the rules the end-to-end tests reach only by luck."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from protocol.values import Approval, Backend, Mode, Status, StopReason
from sidecar.agent.backends.groups import CommandLimits
from sidecar.agent.providers.base import ProviderReply, TextCallback
from sidecar.agent.providers.offline import OfflineProvider
from sidecar.core.events import Event, EventHub
from sidecar.core.leases import Leases
from sidecar.core.manager import ManagerDeps, NewSession, SessionManager
from sidecar.core.ports import ProviderFactory
from sidecar.core.runtime import RuntimeDeps
from sidecar.domain.errors import (
    InvalidInput,
    InvalidState,
    RuntimeLive,
    SessionBusy,
    SessionNotFound,
    SessionNotLive,
)
from sidecar.domain.events import Origin, StateChanged, ToolCallStarted
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import (
    AssistantEntry,
    MarkerEntry,
    ToolResultEntry,
    UserEntry,
)
from sidecar.store.memory import MemorySessionStore
from sidecar.store.sqlite import SqliteSessionStore


class Core:
    """A manager wired as the sidecar wires it, minus stdio and HTTP."""

    def __init__(
        self,
        store: Any = None,
        make_provider: ProviderFactory | None = None,
        budget: int = 0,
    ) -> None:
        self.events: list[Event] = []
        self.store = store or MemorySessionStore()
        self.manager = SessionManager(
            ManagerDeps(
                runtime=RuntimeDeps(
                    store=self.store,
                    make_provider=make_provider or (lambda record: OfflineProvider()),
                    limits=CommandLimits(timeout=20, interrupt_grace=0.2, kill_grace=0.5),
                    open_listener=None,
                    context_budget=budget,
                ),
                events=EventHub(self.events.append),
                leases=Leases(15.0),
                model_name="offline-echo",
            )
        )

    def states(self, session_id: str) -> list[Status]:
        return [
            e.body.record.status
            for e in self.events
            if e.session_id == session_id and isinstance(e.body, StateChanged)
        ]

    async def new(self, cwd: Path, **spec: Any) -> str:
        # Nobody is there to ask for consent in process: commands run unasked (the
        # approval paths are tested end to end, with a client that answers).
        spec.setdefault("approval", Approval.AUTO)
        return (await self.manager.create(NewSession(str(cwd), **spec))).session_id

    async def entries(self, session_id: str) -> list[Any]:
        page, _ = await self.manager.messages(session_id, 0, 1000)
        return [entry for _, entry in page]


@pytest.fixture
async def core() -> AsyncIterator[Core]:
    made = Core()
    yield made
    await made.manager.shutdown()


async def test_create_prompt_close_resume_keeps_the_record_and_numbers_every_event(
    core: Core, tmp_path: Path
) -> None:
    sid = await core.new(tmp_path, title="in process")
    outcome = await core.manager.prompt(sid, "hello", Origin.ACP)
    assert (outcome.response, outcome.stop_reason) == ("Echo: hello", StopReason.END_TURN)
    closed = await core.manager.close(sid)
    assert closed.record.status is Status.CLOSED and not closed.live
    resumed = await core.manager.resume(sid)
    assert resumed.record.generation == 2 and resumed.live
    assert core.states(sid) == [
        Status.CREATING, Status.IDLE, Status.RUNNING, Status.IDLE, Status.CLOSING,
        Status.CLOSED, Status.CREATING, Status.IDLE,
    ]  # fmt: skip
    ids = [e.id for e in core.events if e.session_id == sid]
    assert ids == list(range(1, len(ids) + 1)), "one numbered stream, no unnumbered events"
    entries = await core.entries(sid)
    assert [type(e) for e in entries] == [UserEntry, AssistantEntry]


async def test_unknown_and_not_live_are_told_apart(core: Core, tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound):
        await core.manager.prompt("sess_nope", "x", Origin.ACP)
    with pytest.raises(SessionNotFound):
        await core.manager.cancel("sess_nope")
    sid = await core.new(tmp_path)
    await core.manager.close(sid)
    with pytest.raises(SessionNotLive):
        await core.manager.prompt(sid, "x", Origin.ACP)
    assert await core.manager.cancel(sid) is False
    with pytest.raises(InvalidInput):
        await core.manager.create(NewSession(str(tmp_path / "missing")))


async def test_busy_is_refused_and_cancel_ends_the_turn(core: Core, tmp_path: Path) -> None:
    sid = await core.new(tmp_path)
    turn = asyncio.create_task(core.manager.prompt(sid, "/sleep 30", Origin.ACP))
    await asyncio.sleep(0.05)
    with pytest.raises(SessionBusy):
        await core.manager.prompt(sid, "second", Origin.ACP)
    with pytest.raises(InvalidState):
        await core.manager.settings.set_mode(sid, Mode.PLAN)
    assert await core.manager.cancel(sid) is True
    assert (await turn).stop_reason is StopReason.CANCELLED
    assert (await core.manager.view(sid)).record.status is Status.IDLE


async def test_cancel_before_the_turn_took_a_step_still_answers_cancelled(
    core: Core, tmp_path: Path
) -> None:
    """The cancel lands between creating the prompt's task and its first step."""
    sid = await core.new(tmp_path)
    for _ in range(20):
        turn = asyncio.create_task(core.manager.prompt(sid, "/sleep 30", Origin.ACP))
        cancel = asyncio.create_task(core.manager.cancel(sid))
        outcome = await asyncio.wait_for(turn, 10)
        await cancel
        assert outcome.stop_reason in (StopReason.CANCELLED, StopReason.END_TURN)
        view = await core.manager.view(sid)
        assert view.record.status is Status.IDLE, "a cancelled turn must leave the session idle"
    assert (await core.manager.prompt(sid, "after", Origin.ACP)).response == "Echo: after"


async def test_resume_close_resume_in_one_breath_leaves_one_tracked_runtime(
    core: Core, tmp_path: Path
) -> None:
    sid = await core.new(tmp_path)
    await core.manager.close(sid)
    results = await asyncio.gather(
        core.manager.resume(sid), core.manager.close(sid), core.manager.resume(sid),
        return_exceptions=True,
    )  # fmt: skip
    assert not [r for r in results if isinstance(r, BaseException)], results
    runtime = core.manager.runtime(sid)
    assert runtime is not None and runtime.generation == 3
    view = await core.manager.view(sid)
    assert view.live and view.record.status is Status.IDLE and view.record.generation == 3
    with pytest.raises(RuntimeLive):
        await core.manager.resume(sid)
    await core.manager.close(sid)
    assert core.manager.runtime(sid) is None


async def test_tool_call_ids_are_unique_across_generations(core: Core, tmp_path: Path) -> None:
    sid = await core.new(tmp_path)
    first = await core.manager.prompt(sid, "$ echo first", Origin.ACP)
    await core.manager.close(sid)
    await core.manager.resume(sid)
    second = await core.manager.prompt(sid, "$ echo second", Origin.ACP)
    calls = [e.body.call_id for e in core.events if isinstance(e.body, ToolCallStarted)]
    assert len(calls) == 2 and calls[0] != calls[1]
    assert first.response.startswith("`echo first` exited with status 0")
    assert second.response.startswith("`echo second` exited with status 0"), second.response


class ScriptedProvider:
    """A provider boundary double: replies with one scripted finish reason."""

    model = "scripted"
    context_window = None
    commands = ()

    def __init__(self, finish_reason: str, tool_call: bool = False) -> None:
        self.finish_reason = finish_reason
        self.tool_call = tool_call

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
        on_thought: TextCallback | None = None,
    ) -> ProviderReply:
        from sidecar.agent.providers.base import ToolCall

        on_text("partial")
        calls = [ToolCall("c1", "bash", '{"command": "touch ran"}')] if self.tool_call else []
        return ProviderReply("partial", calls, self.finish_reason)

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", StopReason.END_TURN),
        ("length", StopReason.MAX_TOKENS),
        ("content_filter", StopReason.REFUSAL),
    ],
)
async def test_finish_reasons_become_stop_reasons(
    tmp_path: Path, finish: str, stop: StopReason
) -> None:
    core = Core(make_provider=lambda record: ScriptedProvider(finish))
    try:
        sid = await core.new(tmp_path)
        assert (await core.manager.prompt(sid, "go", Origin.ACP)).stop_reason is stop
    finally:
        await core.manager.shutdown()


async def test_a_reply_cut_at_max_tokens_runs_none_of_its_tool_calls(tmp_path: Path) -> None:
    core = Core(make_provider=lambda record: ScriptedProvider("length", tool_call=True))
    try:
        sid = await core.new(tmp_path)
        outcome = await core.manager.prompt(sid, "go", Origin.ACP)
        assert outcome.stop_reason is StopReason.MAX_TOKENS
        assert not (tmp_path / "ran").exists()
        entries = await core.entries(sid)
        assert not any(isinstance(e, ToolResultEntry) for e in entries)
        assert all(not e.tool_calls for e in entries if isinstance(e, AssistantEntry))
    finally:
        await core.manager.shutdown()


async def test_a_command_that_cannot_start_is_a_tool_result_and_the_turn_goes_on(
    core: Core, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    sid = await core.new(gone)
    gone.rmdir()
    outcome = await core.manager.prompt(sid, "$ echo hi", Origin.ACP)
    assert outcome.stop_reason is StopReason.END_TURN
    assert (await core.manager.view(sid)).record.status is Status.IDLE
    results = [e for e in await core.entries(sid) if isinstance(e, ToolResultEntry)]
    assert len(results) == 1 and "could not start" in results[0].content
    assert (await core.manager.prompt(sid, "again", Origin.ACP)).response == "Echo: again"


async def test_compaction_marker_and_pointer_land_in_one_transaction(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    core = Core(store=store)
    try:
        sid = await core.new(tmp_path)
        for n in range(3):
            await core.manager.prompt(sid, f"turn {n}", Origin.ACP)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        result = await core.manager.compact(sid, keep_turns=1)
        store._conn.set_trace_callback(None)
        assert result.compacted
        record: SessionRecord = await store.get(sid)
        assert record.summary_index == result.summary_index
        entries = await core.entries(sid)
        marker = entries[record.summary_index]
        assert isinstance(marker, MarkerEntry) and marker.context_from == record.context_from
        insert = next(i for i, s in enumerate(statements) if "INSERT INTO messages" in s)
        pointer = next(i for i, s in enumerate(statements) if i > insert and "summary_index" in s)
        between = [s for s in statements[insert:pointer] if s.strip().upper() == "COMMIT"]
        assert not between, "marker and pointer were committed separately"
    finally:
        await core.manager.shutdown()
        await store.close()


async def test_fork_copies_up_to_the_last_completed_turn(core: Core, tmp_path: Path) -> None:
    sid = await core.new(tmp_path, mode=Mode.PLAN, backend=Backend.PTY, title="source")
    await core.manager.prompt(sid, "one", Origin.ACP)
    running = asyncio.create_task(core.manager.prompt(sid, "/sleep 30", Origin.ACP))
    await asyncio.sleep(0.05)
    fork = await core.manager.fork(sid, str(tmp_path))
    assert fork.record.forked_from == sid and fork.record.mode is Mode.PLAN
    assert fork.record.title == "source (fork)" and fork.record.message_count == 2
    await core.manager.cancel(sid)
    await running


async def test_a_provider_failure_is_recovered_by_the_next_prompt(
    core: Core, tmp_path: Path
) -> None:
    from sidecar.domain.errors import ProviderError

    sid = await core.new(tmp_path)
    with pytest.raises(ProviderError):
        await core.manager.prompt(sid, "/fail boom", Origin.ACP)
    failed = await core.manager.view(sid)
    assert failed.record.status is Status.ERROR and "boom" in (failed.record.last_error or "")
    outcome = await core.manager.prompt(sid, "after", Origin.ACP)
    assert outcome.response == "Echo: after"
    view = await core.manager.view(sid)
    assert view.record.generation == 2 and view.record.last_error is None and view.live
    entries = await core.entries(sid)
    assert [e.text for e in entries if isinstance(e, UserEntry)] == ["/fail boom", "after"]
    # resume and load of a session in error recover in one step as well
    with pytest.raises(ProviderError):
        await core.manager.prompt(sid, "/fail again", Origin.ACP)
    assert (await core.manager.resume(sid)).record.generation == 3
    with pytest.raises(ProviderError):
        await core.manager.prompt(sid, "/fail thrice", Origin.ACP)
    loaded = await core.manager.load(sid)
    assert loaded.record.generation == 4 and loaded.record.status is Status.IDLE


async def test_usage_titles_and_turn_numbers(core: Core, tmp_path: Path) -> None:
    from sidecar.domain.events import TitleChanged, UsageUpdated

    sid = await core.new(tmp_path)
    long = "Refactor the store layer so that every multi-row change is one transaction please"
    first = await core.manager.prompt(sid, long + "\nand more detail", Origin.ACP)
    second = await core.manager.prompt(sid, "again", Origin.ACP)
    assert (first.turn, second.turn) == (1, 2)
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    record = (await core.manager.view(sid)).record
    assert record.usage_input == first.usage.input_tokens + second.usage.input_tokens
    assert record.usage_output == first.usage.output_tokens + second.usage.output_tokens
    assert record.title.startswith("Refactor the store layer") and record.title.endswith("…")
    assert len(record.title) <= 61 and record.turns == 2
    titles = [e.body.title for e in core.events if isinstance(e.body, TitleChanged)]
    assert titles == [record.title], "named once, after the first prompt only"
    assert any(isinstance(e.body, UsageUpdated) for e in core.events)
    users = [e for e in await core.entries(sid) if isinstance(e, UserEntry)]
    assert [u.turn for u in users] == [1, 2]


class BrokenProvider(ScriptedProvider):
    """A provider with a bug: its exception text holds what no client may see."""

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
        on_thought: TextCallback | None = None,
    ) -> ProviderReply:
        raise RuntimeError("token=hunter2-secret at /srv/private/state.json")


async def test_an_internal_failure_tells_clients_nothing_of_the_exception(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    core = Core(make_provider=lambda record: BrokenProvider("stop"))
    try:
        sid = await core.new(tmp_path)
        with pytest.raises(RuntimeError):
            await core.manager.prompt(sid, "go", Origin.ACP)
        record = await core.store.get(sid)
        assert record.status is Status.ERROR
        assert record.last_error is not None and "internal error" in record.last_error
        assert "hunter2" not in record.last_error and "/srv/private" not in record.last_error
        assert "hunter2" in caplog.text  # the log keeps it, for whoever runs the sidecar
    finally:
        await core.manager.shutdown()
