"""One turn of the agent: ask the provider, run the tools it calls, repeat.

The loop talks to its runtime only through `TurnHost` (fenced transcript writes,
events, commands). Cancellation is plain asyncio cancellation: it abandons an
in-flight provider request and stops a running command's processes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Final

from protocol.values import Sandbox, StopReason
from sidecar.agent.backends.groups import CommandResult
from sidecar.agent.host import TurnHost
from sidecar.agent.mcp import ToolSpec
from sidecar.agent.outcome import TurnOutcome
from sidecar.agent.providers.base import ToolCall
from sidecar.agent.sandbox import SandboxUnavailable
from sidecar.agent.tools import BUILT_IN, bash, files, plan
from sidecar.domain.events import (
    AgentTextChunk,
    AgentThoughtChunk,
    PlanUpdated,
    ToolCallFinished,
    ToolCallRunning,
    ToolCallStarted,
    ToolKind,
    ToolOutputChunk,
)
from sidecar.domain.files import FileDiff, Location
from sidecar.domain.permissions import PermissionRequest
from sidecar.domain.plans import PlanError, parse_plan, result_text
from sidecar.domain.transcript import AssistantEntry, ToolCallRequest, ToolResultEntry

log = logging.getLogger(__name__)

MAX_MODEL_CALLS: Final = 25
RAW_TEXT_SHOWN: Final = 4096  # characters of a file tool's text argument shown as raw input
NOT_RUN_CANCELLED: Final = "Not run: the turn was cancelled while waiting for approval."
# Chat Completions finish reasons that end the turn before any tool runs.
_STOPPING: Final[dict[str, StopReason]] = {
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
    "refusal": StopReason.REFUSAL,
}


async def run_turn(host: TurnHost) -> TurnOutcome:
    """The model/tool loop of a turn whose user message is already recorded."""
    final_text = ""
    for _ in range(MAX_MODEL_CALLS):
        await host.before_model_call()
        tools = host.tool_specs()  # per call: an MCP server's tool list may have changed
        provider = host.provider
        reply = await provider.complete(
            host.provider_context(),
            tools,
            lambda delta: host.publish(AgentTextChunk(delta)),
            lambda delta: host.publish(AgentThoughtChunk(delta)),
        )
        host.add_usage(reply.usage, provider.context_window)
        stopped = _STOPPING.get(reply.finish_reason)
        # A reply cut short (max tokens, refusal) may carry half-written tool calls: none run.
        calls = [] if stopped is not None else reply.tool_calls
        requests = tuple(ToolCallRequest(c.id, c.name, c.arguments) for c in calls)
        entry = AssistantEntry(
            reply.text, requests, thought=reply.thought, thought_signature=reply.thought_signature
        )
        if reply.text:
            final_text = reply.text
        if stopped is not None or not calls:
            # The turn's last row: the host writes it with the end of the turn (one write).
            host.record_last(entry)
            return TurnOutcome(final_text, StopReason.END_TURN if stopped is None else stopped)
        await host.record(entry)
        for call in calls:
            await _run_tool_call(host, call)
    return TurnOutcome(final_text, StopReason.MAX_TURN_REQUESTS)


async def _run_tool_call(host: TurnHost, call: ToolCall) -> None:
    built_in = BUILT_IN[host.mode]
    if call.name == bash.NAME and call.name in built_in:
        await _run_command(host, call)
        return
    if call.name == plan.NAME and call.name in built_in:
        await _run_plan(host, call)
        return
    if call.name in files.NAMES and call.name in built_in:
        if call.name in files.WRITES:
            await _run_write(host, call)
        else:
            await _run_read(host, call)
        return
    spec = host.mcp_tool(call.name)
    if spec is not None:
        await _run_mcp_call(host, call, spec)
        return
    names = ", ".join(t["function"]["name"] for t in host.tool_specs()) or "none"
    await _finish(host, call, f"Unknown tool {call.name!r}; the tools are: {names}.", None)


async def _run_command(host: TurnHost, call: ToolCall) -> None:
    try:
        command = bash.parse_arguments(call.arguments)
    except ValueError as exc:
        await _finish(host, call, f"Invalid bash call: {exc}.", None)
        return
    raw_input = {"command": command}
    host.publish(ToolCallStarted(call.id, call.name, command, ToolKind.EXECUTE, raw_input))
    sandbox = host.sandbox
    if sandbox is not Sandbox.READ_ONLY:
        # A command the OS lets write (or reach the network) may change things: the
        # session's rules, its approval setting, and if need be the user, decide first.
        request = PermissionRequest(
            call.id,
            call.name,
            command,
            ToolKind.EXECUTE,
            command,
            raw_input,
            host.cwd,
            sandbox,
            locations=(Location(host.cwd),),  # where it runs: what a client shows and opens
        )
        if not await _consent(host, call, request):
            return
    await host.before_tool_call()
    host.publish(ToolCallRunning(call.id))
    output = host.command_output(
        call.id, lambda chunk: host.publish(ToolOutputChunk(call.id, chunk))
    )
    try:
        result = await host.execute(command, output)
    except asyncio.CancelledError:
        # Keep the transcript well formed for the next turn: every call gets a result, with
        # what the command printed before it was stopped.
        stopped = bash.format_stopped(output, host.limits)
        await asyncio.shield(_finish(host, call, stopped, None, cancelled=True))
        raise
    except OSError as exc:
        # Could not even start (cwd gone, no descriptors or processes left): say why; the
        # turn goes on, and the call still gets its result.
        log.warning("command could not start: %s", exc)
        await _finish(host, call, f"The command could not start: {exc.strerror or exc}.", None)
        return
    except SandboxUnavailable as exc:
        await _finish(host, call, str(exc), None)
        return
    finally:
        output.close()
    await _finish(host, call, bash.format_result(result, output, host.limits), result)


async def _run_plan(host: TurnHost, call: ToolCall) -> None:
    """update_plan: clients get the plan (ACP `plan`), the model what was kept. It changes
    nothing, so nobody is asked and no checkpoint is taken."""
    try:
        parsed = parse_plan(call.arguments)
    except PlanError as exc:
        await _finish(host, call, f"Invalid {call.name} call: {exc}. The plan is unchanged.", None)
        return
    # The entries go to clients as the plan itself, not as the call's (possibly huge) input.
    shown = {"entries": len(parsed.items)}
    host.publish(ToolCallStarted(call.id, call.name, plan.TITLE, ToolKind.THINK, shown))
    host.publish(PlanUpdated(parsed.items))
    await _finish(host, call, result_text(parsed), None, ok=True)


def _display_input(arguments: dict[str, Any]) -> dict[str, Any]:
    """A file tool's arguments as shown: long texts cut (the diff shows them whole)."""
    return {
        key: value[:RAW_TEXT_SHOWN] + "…"
        if isinstance(value, str) and len(value) > RAW_TEXT_SHOWN
        else value
        for key, value in arguments.items()
    }


def _path_title(name: str, arguments: dict[str, Any]) -> str:
    path = arguments.get("path")
    return f"{files.TITLES[name]} {path if isinstance(path, str) and path else '.'}"


async def _run_read(host: TurnHost, call: ToolCall) -> None:
    """read_file, list_files: nothing changes, nobody is asked (bash may read as much)."""
    try:
        arguments = files.arguments(call.arguments)
    except files.ToolError as exc:
        await _finish(host, call, f"Invalid {call.name} call: {exc}.", None)
        return
    kind = files.KINDS[call.name]
    title = _path_title(call.name, arguments)
    try:
        target = files.resolve(host.cwd, str(arguments.get("path") or "."))
        where: tuple[Location, ...] = (Location(str(target), 1 if kind is ToolKind.READ else None),)
    except (files.ToolError, ValueError):  # no location: the tool itself says what is wrong
        where = ()
    host.publish(ToolCallStarted(call.id, call.name, title, kind, _display_input(arguments), where))
    host.publish(ToolCallRunning(call.id))
    run = files.read_file if call.name == files.READ_FILE else files.list_files
    try:
        text, _target = await asyncio.to_thread(run, host.cwd, arguments, host.hidden)
        ok = True
    except files.ToolError as exc:
        text, ok = str(exc), False
    except Exception as exc:  # noqa: BLE001 - a tool's failure is its result, never the turn's
        text, ok = f"Not done: {_tool_failed(call, exc)}.", False
    await _finish(host, call, text, None, ok=ok)


def _tool_failed(call: ToolCall, exc: Exception) -> str:
    """An unexpected failure of a file tool as its result: the type only (its text may
    hold anything), the traceback in the log."""
    log.exception("%s failed unexpectedly (call %s)", call.name, call.id)
    return f"the tool failed unexpectedly ({type(exc).__name__})"


async def _run_write(host: TurnHost, call: ToolCall) -> None:
    """write_file, edit_file: the exact change is planned, shown, approved, then written —
    and refused if the file changed in between."""
    try:
        arguments = files.arguments(call.arguments)
    except files.ToolError as exc:
        await _finish(host, call, f"Invalid {call.name} call: {exc}.", None)
        return
    title = _path_title(call.name, arguments)
    shown = _display_input(arguments)
    sandbox = host.sandbox
    try:
        if sandbox is Sandbox.READ_ONLY:
            raise files.ToolError("refused: the session's sandbox is read-only")
        plan = await asyncio.to_thread(
            files.plan_write,
            host.cwd,
            call.name,
            arguments,
            sandbox is Sandbox.OFF,
            host.hidden,
        )
    except Exception as exc:  # noqa: BLE001 - a tool's failure is its result, never the turn's
        why = str(exc) if isinstance(exc, files.ToolError) else _tool_failed(call, exc)
        host.publish(ToolCallStarted(call.id, call.name, title, ToolKind.EDIT, shown))
        await _finish(host, call, f"Not written: {why}.", None, ok=False)
        return
    title = f"{files.TITLES[call.name]} {plan.display}"
    diff = FileDiff(str(plan.target), plan.old_text, plan.new_text)
    where = (Location(str(plan.target), plan.line),)
    host.publish(ToolCallStarted(call.id, call.name, title, ToolKind.EDIT, shown, where, (diff,)))
    request = PermissionRequest(
        call.id,
        call.name,
        title,
        ToolKind.EDIT,
        plan.display,
        shown,
        host.cwd,
        sandbox,
        diffs=(diff,),
        locations=where,
    )
    if not await _consent(host, call, request):
        return
    await host.before_tool_call()
    host.publish(ToolCallRunning(call.id))
    try:
        text, ok = await asyncio.to_thread(files.apply_write, plan), True
    except files.ToolError as exc:
        text, ok = f"Not written: {exc}.", False
    except Exception as exc:  # noqa: BLE001 - a tool's failure is its result, never the turn's
        text, ok = f"Not written: {_tool_failed(call, exc)}.", False
    await _finish(host, call, text, None, ok=ok, diffs=(diff,) if ok else ())


async def _consent(host: TurnHost, call: ToolCall, request: PermissionRequest) -> bool:
    """Ask (rules, setting, user); False when the call must not run (its result recorded).
    Raises CancelledError when the turn ends while, or because, the user was asked."""
    try:
        verdict = await host.authorize(request)
    except asyncio.CancelledError:  # a cancel or a close while the user was asked
        await asyncio.shield(_finish(host, call, NOT_RUN_CANCELLED, None, cancelled=True))
        raise
    if verdict.cancelled:
        await _finish(host, call, f"Not run: {verdict.reason}.", None, cancelled=True)
        raise asyncio.CancelledError()  # the turn ends, cancelled
    if not verdict.allowed:
        await _finish(host, call, f"Not run: {verdict.reason}.", None)
        return False
    return True


def _tool_kind(kind: str) -> ToolKind:
    try:
        return ToolKind(kind)
    except ValueError:
        return ToolKind.OTHER


async def _run_mcp_call(host: TurnHost, call: ToolCall, spec: ToolSpec) -> None:
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError as exc:
        await _finish(host, call, f"Invalid arguments for {call.name}: not JSON ({exc}).", None)
        return
    if not isinstance(arguments, dict):
        await _finish(host, call, f"Invalid arguments for {call.name}: not an object.", None)
        return
    title = spec.title or f"{spec.server}: {spec.tool}"
    kind = _tool_kind(spec.kind)
    host.publish(ToolCallStarted(call.id, call.name, title, kind, arguments))
    if not spec.read_only:
        request = PermissionRequest(
            call.id,
            call.name,
            title,
            kind,
            call.name,
            arguments,
            host.cwd,
            host.sandbox,
            always_ask=spec.destructive,
        )
        if not await _consent(host, call, request):
            return
    await host.before_tool_call()
    host.publish(ToolCallRunning(call.id))
    try:
        result = await host.call_mcp(call.name, arguments)
    except asyncio.CancelledError:
        await asyncio.shield(
            _finish(host, call, "Cancelled: the MCP call was stopped.", None, cancelled=True)
        )
        raise
    text = result.text
    if result.images:
        text += f"\n[{len(result.images)} image(s) returned]"
    await host.record(
        ToolResultEntry(call.id, call.name, text, None, False, ok=not result.is_error)
    )
    host.publish(
        ToolCallFinished(call.id, not result.is_error, text, None, False, tuple(result.images))
    )


async def _finish(
    host: TurnHost,
    call: ToolCall,
    content: str,
    result: CommandResult | None,
    *,
    cancelled: bool = False,
    ok: bool | None = None,
    diffs: tuple[FileDiff, ...] = (),
) -> None:
    """Record the call's result (every call gets one) and tell clients. `ok` defaults to
    the command's exit status (no command: failed)."""
    exit_code = None if result is None else result.exit_code
    succeeded = exit_code == 0 if ok is None else ok
    await host.record(
        ToolResultEntry(
            call.id,
            call.name,
            content,
            exit_code,
            bool(result and result.truncated),
            ok=succeeded,
        )
    )
    host.publish(ToolCallFinished(call.id, succeeded, content, exit_code, cancelled, diffs=diffs))
