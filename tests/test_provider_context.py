"""The provider context kept incrementally: always acceptable to a provider, and equal to
a full re-check for the transcripts turns really produce."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.agent.context import ProviderContext, _well_formed
from sidecar.domain.transcript import from_row

CALL_IDS = st.sampled_from(["a", "b", "c", "d"])


def call(ids: list[str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            for i in ids
        ],
    }


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "out"}


ANY_MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=5)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=5)),
    st.builds(call, st.lists(CALL_IDS, min_size=1, max_size=2, unique=True)),
    st.builds(result, CALL_IDS),
    st.just({"role": "system", "kind": "interrupted", "content": "marker"}),
)


@st.composite
def turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """What turns write: a user message, rounds of calls each answered, a final reply."""
    transcript: list[dict[str, Any]] = []
    for number in range(draw(st.integers(0, 5))):
        transcript.append({"role": "user", "content": f"turn {number}"})
        for round_ in range(draw(st.integers(0, 2))):
            ids = [f"t{number}r{round_}c{k}" for k in range(draw(st.integers(1, 2)))]
            transcript.append(call(ids))
            transcript += [result(i) for i in ids]
        transcript.append({"role": "assistant", "content": "done"})
    return transcript


def acceptable(messages: list[dict[str, Any]]) -> bool:
    """Every result follows a call of its id, and every call gets a result."""
    asked: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        for c in message.get("tool_calls") or []:
            asked.add(c["id"])
        if message.get("role") == "tool":
            if message["tool_call_id"] not in asked:
                return False
            answered.add(message["tool_call_id"])
    return asked <= answered


@settings(max_examples=300, deadline=None)
@given(st.lists(ANY_MESSAGE, max_size=30))
def test_whatever_was_stored_the_context_is_acceptable(messages):
    context = ProviderContext()
    for index, message in enumerate(messages):
        context.append(index, from_row(message))
        assert context.messages("sys")[0] == {"role": "system", "content": "sys"}
        sent = context.messages("sys")[1:]
        # Mid-turn (calls awaiting results) the model is not called; check at turn ends.
        if message.get("role") in ("user", "assistant") and not message.get("tool_calls"):
            assert acceptable(sent), sent


@settings(max_examples=200, deadline=None)
@given(turns())
def test_incremental_context_equals_a_full_recheck_for_real_turns(transcript):
    context = ProviderContext()
    for index, message in enumerate(transcript):
        context.append(index, from_row(message))
        assert context.messages("sys")[1:] == _well_formed(transcript[: index + 1])
