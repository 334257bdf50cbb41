"""A prompt's ACP content blocks as the JSON objects the sidecar keeps (a queued message
stores them as sent), checked against ACP's own `ContentBlock` union: a block ACP would
refuse is refused here too (-32602 naming it), whichever method brought it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidecar.acp import preload
from sidecar.agent.outcome import TurnOutcome

if TYPE_CHECKING:
    from acp.schema import PromptRequest


def blocks_of(request: PromptRequest) -> list[dict[str, Any]]:
    return [
        block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in request.prompt
    ]


def checked_blocks(raw: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`raw` read as ACP content blocks (pydantic's error names `prompt.N...`)."""
    preload.ACP.ensure()
    from acp.schema import PromptRequest

    return blocks_of(PromptRequest.model_validate({"sessionId": "sess_0", "prompt": list(raw)}))


def prompt_response(outcome: TurnOutcome) -> dict[str, Any]:
    """A turn's outcome as ACP's answer to `session/prompt` (ours in `_meta`), built
    directly as `PromptResponse` dumps (no model per turn: tests/test_acp_interop.py has
    the SDK's client read it, tests/test_protocol_methods.py checks it against the model)."""
    used = outcome.usage
    tokens = {
        "inputTokens": used.input_tokens,
        "outputTokens": used.output_tokens,
        "totalTokens": used.input_tokens + used.output_tokens,
    }
    return {
        "stopReason": outcome.stop_reason.value,
        "usage": tokens,
        "_meta": {"response": outcome.response, "usage": dict(tokens), "turn": outcome.turn},
    }
