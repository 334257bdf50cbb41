"""Our method constants are ACP's own (protocol/methods.py writes them out to keep the
sidecar's start-up free of the acp package), and so are the params of the first requests
we read with our own models."""

from typing import Any

from acp.meta import AGENT_METHODS, CLIENT_METHODS
from acp.meta import PROTOCOL_VERSION as ACP_PROTOCOL_VERSION
from pydantic import BaseModel, ValidationError

from protocol.methods import ACP_METHODS, PROTOCOL_VERSION, Method
from protocol.models import ListSessionsParams, NewSessionParams


def test_acp_method_names_match_the_sdk():
    assert PROTOCOL_VERSION == ACP_PROTOCOL_VERSION
    assert set(ACP_METHODS) <= set(AGENT_METHODS.values())
    assert Method.SESSION_UPDATE == CLIENT_METHODS["session_update"]
    for name in ACP_METHODS:
        key = name.replace("/", "_")
        assert AGENT_METHODS[key] == name


NEW_SESSION_CASES = [
    ({"cwd": "/w", "mcpServers": []}, True),
    ({"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/x"], "_meta": {"a": 1}}, True),
    ({"cwd": "/w", "mcpServers": [], "later": "a future field"}, True),
    ({"mcpServers": []}, False),
    ({"cwd": 3, "mcpServers": []}, False),
    ({"cwd": None, "mcpServers": []}, False),
    ({"cwd": "/w", "mcpServers": {}}, False),
    ({"cwd": "/w", "mcpServers": [], "additionalDirectories": "/x"}, False),
    ({"cwd": "/w", "mcpServers": [], "additionalDirectories": [1]}, True),  # item dropped
]
LIST_CASES = [
    ({}, True),
    ({"cwd": "/w", "cursor": "c1_2.0", "_meta": {"query": "x"}}, True),
    ({"cwd": None, "cursor": None}, True),
    ({"cwd": 1}, False),
    ({"cursor": 5}, False),
    ({"cursor": ["c"]}, False),
]


def _accepts(model: type[BaseModel], params: dict[str, Any]) -> bool:
    try:
        model.model_validate(params)
    except ValidationError:
        return False
    return True


def test_our_first_request_models_read_what_acps_do():
    """`session/new` and `session/list` are read with our models (so they need not wait
    for ACP's schema at start): the same fields, and the same verdict on valid and broken
    params as the SDK's own models."""
    from acp.schema import ListSessionsRequest, NewSessionRequest

    for ours, acps, cases in (
        (NewSessionParams, NewSessionRequest, NEW_SESSION_CASES),
        (ListSessionsParams, ListSessionsRequest, LIST_CASES),
    ):
        acp_fields = {f.alias or name for name, f in acps.model_fields.items()} - {"_meta"}
        assert {f.alias or name for name, f in ours.model_fields.items()} == acp_fields
        for params, valid in cases:
            assert _accepts(acps, params) is valid, (acps.__name__, params)
            assert _accepts(ours, params) is valid, (ours.__name__, params)


def test_a_prompts_answer_is_what_acps_model_dumps():
    """`session/prompt`'s answer is built directly (no model per turn): it must be exactly
    what ACP's `PromptResponse` reads and dumps back, for every stop reason."""
    from acp.schema import PromptResponse

    from protocol.values import StopReason
    from sidecar.acp.prompts import prompt_response
    from sidecar.agent.outcome import TurnOutcome
    from sidecar.agent.providers.base import Usage

    for stop in StopReason:
        outcome = TurnOutcome("Echo: hi", stop, Usage(91, 2), 3)
        answer = prompt_response(outcome)
        model = PromptResponse.model_validate(answer)
        assert model.model_dump(by_alias=True, exclude_none=True, mode="json") == answer
        assert answer["stopReason"] == stop.value and answer["_meta"]["turn"] == 3
        assert answer["usage"]["totalTokens"] == 93 == answer["_meta"]["usage"]["totalTokens"]
