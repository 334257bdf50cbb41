"""The transition table, the event stream, and the wire models' exact shapes."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools

import pytest

from protocol.models import NewSessionMeta, SessionSummary
from protocol.values import Approval, Backend, Mode
from sidecar.core.events import EventHub, EventStream
from sidecar.core.views import SessionView
from sidecar.domain.errors import InvalidState
from sidecar.domain.events import AgentTextChunk
from sidecar.domain.records import TRANSITIONS, SessionRecord, SessionState, check_transition

S = SessionState
ALLOWED = {
    (S.CREATING, S.IDLE),
    (S.CREATING, S.ERROR),
    (S.CREATING, S.CLOSING),
    (S.IDLE, S.RUNNING),
    (S.IDLE, S.CLOSING),
    (S.IDLE, S.ERROR),
    (S.RUNNING, S.IDLE),
    (S.RUNNING, S.CLOSING),
    (S.RUNNING, S.ERROR),
    (S.CLOSING, S.CLOSED),
    (S.CLOSING, S.ERROR),
    (S.CLOSED, S.CREATING),
    (S.ERROR, S.CLOSING),
}


@pytest.mark.parametrize(("current", "new"), list(itertools.product(S, S)))
def test_transition_table_is_exactly_the_documented_one(current, new):
    if (current, new) in ALLOWED:
        check_transition("s", current, new)
    else:
        with pytest.raises(InvalidState, match=f"from {current.value} to {new.value}"):
            check_transition("s", current, new)


def test_record_replace_changes_exactly_the_named_fields_and_refuses_unknown_ones():
    record = SessionRecord(
        "sess_1", "/tmp", "t", Mode.CRAFT, Backend.PIPE, SessionState.IDLE, 1, 1.0, 2.0
    )
    changes = {"title": "u", "version": 7, "approval": Approval.AUTO, "queue": "[]"}
    assert record.replace(**changes) == dataclasses.replace(record, **changes)
    assert record.replace() == record and record.replace() is not record
    with pytest.raises(TypeError, match="no field"):
        record.replace(nope=1)


def test_a_turn_starts_only_from_idle():
    assert [s for s in S if S.RUNNING in TRANSITIONS[s]] == [S.IDLE]


def chunk(n: int) -> AgentTextChunk:
    return AgentTextChunk(str(n))


async def test_event_ids_increase_and_replay_after_last_id():
    stream = EventStream("s", capacity=4)
    for n in range(6):
        stream.publish(chunk(n))
    assert [e.id for e in stream.since(0)] == [3, 4, 5, 6]  # bounded buffer keeps the newest
    assert [e.body.text for e in stream.since(4)] == ["4", "5"]


async def test_subscription_replays_then_follows_live_and_ends_on_close():
    stream = EventStream("s")
    stream.publish(chunk(1))
    stream.publish(chunk(2))
    subscription = stream.subscribe(last_id=1)
    stream.publish(chunk(3))
    stream.end_subscriptions()
    seen = [event.body.text async for event in subscription]
    assert seen == ["2", "3"]


async def test_a_subscriber_that_falls_behind_is_dropped_not_blocking():
    stream = EventStream("s", capacity=2, subscriber_queue=3)
    subscription = stream.subscribe()
    for n in range(10):
        stream.publish(chunk(n))  # never awaits, even with nobody reading
    assert subscription.dropped
    events = [e async for e in subscription]
    assert len(events) <= 3


async def test_a_failing_sink_does_not_break_publishing():
    def broken(event):
        raise RuntimeError("stdout closed")

    hub = EventHub(broken)
    subscription = hub.stream("s").subscribe()
    event = hub.publish("s", chunk(1))
    assert event.id == 1 and subscription.drain_nowait() == [event]
    assert hub.publish("s", chunk(2)).id == 2  # still numbering
    await asyncio.sleep(0)


async def test_streams_are_per_session_and_numbered_across_generations():
    seen = []
    hub = EventHub(seen.append)
    hub.publish("a", chunk(1))
    hub.publish("b", chunk(1))
    hub.stream("a").end_subscriptions()  # a runtime of "a" went away
    hub.publish("a", chunk(2))
    assert [(e.session_id, e.id) for e in seen] == [("a", 1), ("b", 1), ("a", 2)]


def test_summary_wire_shape_is_stable():
    summary = SessionSummary(
        session_id="sess_1",
        cwd="/w",
        title="t",
        status="idle",
        mode="craft",
        backend="pipe",
        generation=1,
        version=3,
        live=True,
        message_count=0,
        last_error=None,
        interrupted=False,
        forked_from=None,
        model="m",
        usage={"input_tokens": 3, "output_tokens": 4},
        turns=2,
        approval="ask",
        sandbox="workspace",
        effective_sandbox="read-only",
        sandbox_problem=None,
        checkpoint_problem=None,
        awaiting_permission=None,
        mcp_servers=[],
        instructions=[{"path": "/w/AGENTS.md", "bytes": 40000, "cut": True}],
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        http={"url": "http://127.0.0.1:1"},
    )
    assert summary.to_wire() == {
        "sessionId": "sess_1",
        "cwd": "/w",
        "title": "t",
        "status": "idle",
        "mode": "craft",
        "backend": "pipe",
        "generation": 1,
        "version": 3,
        "live": True,
        "messageCount": 0,
        "lastError": None,
        "interrupted": False,
        "forkedFrom": None,
        "archived": False,
        "importedFrom": None,
        "agent": "builtin",
        "worktree": None,
        "heldBy": None,
        "model": "m",
        "usage": {"inputTokens": 3, "outputTokens": 4},
        "turns": 2,
        "approval": "ask",
        "sandbox": "workspace",
        "effectiveSandbox": "read-only",
        "sandboxProblem": None,
        "checkpointProblem": None,
        "awaitingPermission": None,
        "mcpServers": [],
        "instructions": [{"path": "/w/AGENTS.md", "bytes": 40000, "cut": True, "skipped": None}],
        "createdAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
        "http": {"url": "http://127.0.0.1:1"},
    }


def test_new_session_meta_defaults_and_strictness():
    assert NewSessionMeta.model_validate({}).model_dump() == {
        "mode": "craft",
        "backend": "pipe",
        "title": "Untitled session",
        "approval": "ask",
        "sandbox": None,
        "agent": "builtin",
        "worktree": None,
    }
    with pytest.raises(ValueError):
        NewSessionMeta.model_validate({"mode": 1})
    with pytest.raises(ValueError):
        NewSessionMeta.model_validate({"agent": ""})


def test_build_summary_has_exactly_the_model_shape():
    from protocol.values import Backend, Mode
    from sidecar.domain.records import SessionRecord
    from sidecar.wire.summary import summary

    def build_summary(record, *, live, url, token):
        return summary(SessionView(record, live, url, token, None))

    record = SessionRecord(
        session_id="sess_1",
        cwd="/w",
        title="t",
        mode=Mode.PLAN,
        backend=Backend.PTY,
        status=SessionState.IDLE,
        generation=3,
        created_at=0.0,
        updated_at=1.5,
        message_count=4,
        forked_from="sess_0",
    )
    wire = build_summary(record, live=True, url="http://127.0.0.1:9", token="k")
    assert SessionSummary.model_validate(wire).to_wire() == wire  # same keys, types and values
    # The token never rides in a summary: _session/http hands it out on request.
    assert wire["http"] == {"url": "http://127.0.0.1:9"}
    assert build_summary(record, live=False, url=None, token=None)["http"] is None
