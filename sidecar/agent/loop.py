"""One turn of the agent: ask the provider, run the tools it calls, repeat.

The loop is transport-free and store-free: it talks to its runtime through
`TurnHost` (fenced transcript writes, event publishing, the provider context).
Cancellation is plain asyncio cancellation: it abandons an in-flight provider
request and stops a running command's process group (see backends/pipe.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from sidecar import events
from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.providers.base import Provider, ToolCall
from sidecar.agent.tools import parse_bash_arguments, tools_for_mode
from sidecar.agent.turn import TurnOutcome
from sidecar.records import iso, now

MAX_MODEL_CALLS = 25


class TurnHost(Protocol):
    cwd: str
    mode: str
    limits: CommandLimits

    @property
    def provider(self) -> Provider: ...

    def record_message(self, message: dict[str, Any]) -> None:
        """Append to the transcript (fenced) and to the provider context."""

    def provider_context(self) -> list[dict[str, Any]]:
        """System prompt plus the transcript, in Chat Completions form."""

    def publish(self, type_: str, data: dict[str, Any]) -> None: ...

    async def before_model_call(self) -> None:
        """A hook before each model call (automatic compaction)."""

    async def execute(self, command: str, on_output: Callable[[str], None]) -> CommandResult:
        """Run one command on the session's backend (pipe or pty)."""


def format_tool_result(result: CommandResult, limits: CommandLimits) -> str:
    if result.timed_out:
        head = f"Killed after the {limits.timeout:g} s timeout."
    else:
        head = f"Exited with status {result.exit_code}."
    body = result.output
    if result.truncated:
        body += f"\n[output truncated at {limits.output_cap} bytes]"
    return f"{head}\n{body}" if body else head


def user_message(text: str) -> dict[str, Any]:
    """A turn's first transcript row; the runtime stores it with the `running` state."""
    return {"role": "user", "content": text, "createdAt": iso(now())}


async def run_turn(host: TurnHost) -> TurnOutcome:
    """The model/tool loop of a turn whose user message is already recorded."""
    tools = tools_for_mode(host.mode)
    final_text = ""
    for _ in range(MAX_MODEL_CALLS):
        await host.before_model_call()
        reply = await host.provider.complete(
            host.provider_context(),
            tools,
            lambda delta: host.publish(events.AGENT_MESSAGE_CHUNK, {"text": delta}),
        )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in reply.tool_calls
            ]
        message["createdAt"] = iso(now())
        host.record_message(message)
        if reply.text:
            final_text = reply.text
        if not reply.tool_calls:
            return TurnOutcome(final_text, "end_turn")
        for call in reply.tool_calls:
            await _run_tool_call(host, call)
    return TurnOutcome(final_text, "max_turn_requests")


async def _run_tool_call(host: TurnHost, call: ToolCall) -> None:
    base = {"toolCallId": call.id}
    if call.name != "bash":
        _finish_tool(host, call, f"Unknown tool {call.name!r}; the only tool is bash.", None)
        return
    try:
        command = parse_bash_arguments(call.arguments)
    except ValueError as exc:
        _finish_tool(host, call, f"Invalid bash call: {exc}.", None)
        return
    host.publish(
        events.TOOL_CALL,
        {**base, "title": command, "kind": "execute", "status": "pending", "command": command},
    )
    host.publish(events.TOOL_CALL_UPDATE, {**base, "status": "in_progress"})
    try:
        result = await host.execute(
            command,
            lambda chunk: host.publish(events.TOOL_CALL_UPDATE, {**base, "output": chunk}),
        )
    except asyncio.CancelledError:
        # Keep the transcript well-formed for the next turn: every call gets a result.
        _finish_tool(host, call, "Cancelled: the command was stopped.", None, cancelled=True)
        raise
    _finish_tool(host, call, format_tool_result(result, host.limits), result)


def _finish_tool(
    host: TurnHost,
    call: ToolCall,
    content: str,
    result: CommandResult | None,
    *,
    cancelled: bool = False,
) -> None:
    ok = result is not None and result.exit_code == 0
    host.record_message(
        {
            "role": "tool",
            "tool_call_id": call.id,
            "name": call.name,
            "content": content,
            "exitCode": None if result is None else result.exit_code,
            "truncated": bool(result and result.truncated),
            "createdAt": iso(now()),
        }
    )
    host.publish(
        events.TOOL_CALL_UPDATE,
        {
            "toolCallId": call.id,
            "status": "completed" if ok else "failed",
            "exitCode": None if result is None else result.exit_code,
            "cancelled": cancelled,
            "content": content,
        },
    )
