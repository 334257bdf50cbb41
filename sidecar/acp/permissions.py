"""Consent over ACP: `session/request_permission` to the client, and its answer read back.

The request carries what the user approves: the tool call (title, kind, raw input,
locations), a content block saying what runs where (command, directory, sandbox) or
the exact diff a file tool will write, and the four options (`allow_once`,
`allow_always`, `reject_once`, `reject_always`; option ids are the same words). An
error response or an answer we cannot read counts as a refusal, and says why.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from protocol.methods import Method
from sidecar.acp import preload
from sidecar.acp.server import ClientError, RpcServer
from sidecar.core.approvals import Asker
from sidecar.domain.errors import InvalidInput
from sidecar.domain.permissions import Choice, PermissionAnswer, PermissionRequest
from sidecar.domain.rules import Decision, parse_rules

log = logging.getLogger(__name__)

OPTION_NAMES = {
    Choice.ALLOW_ONCE: "Allow once",
    Choice.ALLOW_ALWAYS: "Always allow",
    Choice.REJECT_ONCE: "Reject",
    Choice.REJECT_ALWAYS: "Always reject",
}


def request_params(session_id: str, request: PermissionRequest) -> dict[str, Any]:
    if request.diffs:
        content: list[dict[str, Any]] = [
            {"type": "diff", "path": d.path, "oldText": d.old_text, "newText": d.new_text}
            for d in request.diffs
        ]
    else:
        where = f"in {request.cwd}, sandbox: {request.sandbox.value}"
        content = [
            {"type": "content", "content": {"type": "text", "text": f"{request.title}\n({where})"}}
        ]
    tool_call: dict[str, Any] = {
        "toolCallId": request.call_id,
        "title": request.title,
        "kind": request.kind.value,
        "status": "pending",
        "rawInput": dict(request.raw_input),
        "content": content,
    }
    if request.locations:
        tool_call["locations"] = [
            {"path": where.path, **({"line": where.line} if where.line is not None else {})}
            for where in request.locations
        ]
    return {
        "sessionId": session_id,
        "toolCall": tool_call,
        "options": [
            {"optionId": choice.value, "name": OPTION_NAMES[choice], "kind": choice.value}
            for choice in Choice
        ],
    }


def read_answer(result: Any, request: PermissionRequest) -> PermissionAnswer:
    """The client's result as an answer; anything unreadable is a refusal, with the reason."""
    preload.ACP.ensure()
    from acp.schema import RequestPermissionResponse

    try:
        response = RequestPermissionResponse.model_validate(result)
    except ValidationError as exc:
        return PermissionAnswer(
            Choice.REJECT_ONCE, note=f"malformed answer: {exc.errors()[0]['msg']}"
        )
    outcome = response.outcome
    if outcome.outcome == "cancelled":
        return PermissionAnswer(None)
    try:
        choice = Choice(outcome.option_id)
    except ValueError:
        return PermissionAnswer(Choice.REJECT_ONCE, note=f"unknown option id {outcome.option_id!r}")
    rule = None
    hint = (response.field_meta or {}).get("rule")
    if choice in (Choice.ALLOW_ALWAYS, Choice.REJECT_ALWAYS) and isinstance(hint, dict):
        decision = Decision.ALLOW if choice is Choice.ALLOW_ALWAYS else Decision.DENY
        try:
            (rule,) = parse_rules([{"decision": decision.value, "tool": request.tool, **hint}])
        except (InvalidInput, ValueError) as exc:
            log.warning("ignoring the rule the client chose (%s); remembering the exact call", exc)
    return PermissionAnswer(choice, rule)


def make_asker(server: RpcServer) -> Asker:
    async def ask(session_id: str, request: PermissionRequest) -> PermissionAnswer:
        try:
            result = await server.request(
                Method.REQUEST_PERMISSION, request_params(session_id, request)
            )
        except ClientError as exc:
            return PermissionAnswer(Choice.REJECT_ONCE, note=f"the client answered an error: {exc}")
        return read_answer(result, request)

    return ask
