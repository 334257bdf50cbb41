"""A prompt's ACP content blocks as the JSON objects the sidecar keeps (a queued message
stores them as sent), checked against ACP's own `ContentBlock` union: a block ACP would
refuse is refused here too (-32602 naming it), whichever method brought it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidecar.acp import preload
from sidecar.agent.outcome import TurnOutcome

if TYPE_CHECKING:
    from acp.schema import PromptRequest, PromptResponse


def blocks_of(request: PromptRequest) -> list[dict[str, Any]]:
    return [
        block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in request.prompt
    ]


def checked_blocks(raw: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`raw` read as ACP content blocks (pydantic's error names `prompt.N...`)."""
    preload.ACP.ensure()
    from acp.schema import PromptRequest

    return blocks_of(PromptRequest.model_validate({"sessionId": "sess_0", "prompt": list(raw)}))


def prompt_response(outcome: TurnOutcome) -> PromptResponse:
    """A turn's outcome as ACP's answer to `session/prompt` (ours in `_meta`)."""
    from acp.schema import PromptResponse, Usage  # loaded: the request's model is ACP's

    used = outcome.usage
    total = used.input_tokens + used.output_tokens
    usage = Usage(
        input_tokens=used.input_tokens, output_tokens=used.output_tokens, total_tokens=total
    )
    tokens = {"inputTokens": used.input_tokens, "outputTokens": used.output_tokens}
    return PromptResponse(
        stop_reason=outcome.stop_reason.value,
        usage=usage,
        field_meta={
            "response": outcome.response,
            "usage": {**tokens, "totalTokens": total},
            "turn": outcome.turn,
        },
    )
