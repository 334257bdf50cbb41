"""The transition table, the event stream, and the wire models' exact shapes."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from protocol.models import NewSessionMeta, SessionSummary
from sidecar.errors import InvalidState
from sidecar.events import EventStream
from sidecar.records import TRANSITIONS, SessionState, check_transition

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


def test_a_turn_starts_only_from_idle():
    assert [s for s in S if S.RUNNING in TRANSITIONS[s]] == [S.IDLE]


async def test_event_ids_increase_and_replay_after_last_id():
    stream = EventStream(capacity=4)
    for n in range(6):
        stream.publish("state", {"n": n})
    assert [e.id for e in stream.since(0)] == [3, 4, 5, 6]  # bounded buffer keeps the newest
    assert [e.data["n"] for e in stream.since(4)] == [4, 5]


async def test_subscription_replays_then_follows_live_and_ends_on_close():
    stream = EventStream()
    stream.publish("a", {})
    stream.publish("b", {})
    subscription = stream.subscribe(last_id=1)
    stream.publish("c", {})
    stream.close()
    seen = [event.type async for event in subscription]
    assert seen == ["b", "c"]


async def test_a_subscriber_that_falls_behind_is_dropped_not_blocking():
    stream = EventStream(capacity=2, subscriber_queue=3)
    subscription = stream.subscribe()
    for n in range(10):
        stream.publish("x", {"n": n})  # never awaits, even with nobody reading
    assert subscription.dropped
    events = [e async for e in subscription]
    assert len(events) <= 3


async def test_a_failing_sink_does_not_break_publishing():
    stream = EventStream()
    received = []

    def broken(event):
        raise RuntimeError("stdout closed")

    stream.add_sink(broken)
    stream.add_sink(received.append)
    stream.publish("x", {})
    assert len(received) == 1
    await asyncio.sleep(0)


def test_summary_wire_shape_is_stable():
    summary = SessionSummary(
        session_id="sess_1",
        cwd="/w",
        title="t",
        status="idle",
        mode="craft",
        backend="pipe",
        effective_backend="pipe",
        generation=1,
        live=True,
        message_count=0,
        last_error=None,
        interrupted=False,
        forked_from=None,
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        http={"url": "http://127.0.0.1:1", "token": "k"},
    )
    assert summary.to_wire() == {
        "sessionId": "sess_1",
        "cwd": "/w",
        "title": "t",
        "status": "idle",
        "mode": "craft",
        "backend": "pipe",
        "effectiveBackend": "pipe",
        "generation": 1,
        "live": True,
        "messageCount": 0,
        "lastError": None,
        "interrupted": False,
        "forkedFrom": None,
        "heldBy": None,
        "createdAt": "2026-01-01T00:00:00.000Z",
        "updatedAt": "2026-01-01T00:00:00.000Z",
        "http": {"url": "http://127.0.0.1:1", "token": "k"},
    }


def test_new_session_meta_defaults_and_strictness():
    assert NewSessionMeta.model_validate({}).model_dump() == {
        "mode": "craft",
        "backend": "pipe",
        "title": "Untitled session",
    }
    with pytest.raises(ValueError):
        NewSessionMeta.model_validate({"mode": 1})


def test_build_summary_has_exactly_the_model_shape():
    from sidecar.records import SessionRecord
    from sidecar.summary import build_summary

    record = SessionRecord(
        session_id="sess_1",
        cwd="/w",
        title="t",
        mode="plan",
        backend="pty",
        status=SessionState.IDLE,
        generation=3,
        created_at=0.0,
        updated_at=1.5,
        message_count=4,
        forked_from="sess_0",
    )
    wire = build_summary(record, live=True, url="http://127.0.0.1:9", token="k", include_token=True)
    assert SessionSummary.model_validate(wire).to_wire() == wire  # same keys, types and values
    hidden = build_summary(
        record, live=True, url="http://127.0.0.1:9", token="k", include_token=False
    )
    assert hidden["http"] == {"url": "http://127.0.0.1:9", "token": None}
    assert (
        build_summary(record, live=False, url=None, token=None, include_token=True)["http"] is None
    )
