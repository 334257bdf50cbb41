"""The `bash` tool: its schema for the model, its arguments, and how its result reads."""

from __future__ import annotations

import json
from typing import Any, Final

from sidecar.agent.backends.groups import CommandLimits, CommandResult
from sidecar.agent.backends.output import CommandOutput

NAME: Final = "bash"

SPEC: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": (
            "Run a shell command with bash in the session's working directory. "
            "Returns the exit status and the combined stdout/stderr (capped)."
        ),
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line."}},
            "required": ["command"],
        },
    },
}


def parse_arguments(arguments: str) -> str:
    """The `command` argument of a bash call; ValueError with a reason if malformed."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not JSON: {exc.msg}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("command"), str):
        raise ValueError('arguments must be {"command": string}')
    command: str = parsed["command"]
    if not command.strip():
        raise ValueError("command is empty")
    return command


def _cut_note(output: CommandOutput, limits: CommandLimits) -> str:
    kept = "kept whole for the user" if output.spool_complete else "not all kept"
    where = " (cut at a line end)" if output.cut_at_line else ""
    return f"[output truncated at {limits.output_cap} bytes{where}; {output.total} bytes in all, {kept}]"


def _with_body(head: str, body: str, output: CommandOutput, limits: CommandLimits) -> str:
    if output.truncated:
        body = (body if body.endswith("\n") or not body else body + "\n") + _cut_note(
            output, limits
        )
    return f"{head}\n{body}" if body else head


def format_result(result: CommandResult, output: CommandOutput, limits: CommandLimits) -> str:
    """What the model is told about a finished command."""
    if result.timed_out:
        head = f"Killed after the {limits.timeout:g} s timeout."
    else:
        head = f"Exited with status {result.exit_code}."
    return _with_body(head, result.output, output, limits)


def format_stopped(output: CommandOutput, limits: CommandLimits) -> str:
    """A command the user stopped: said so, with what it printed until then."""
    return _with_body("Cancelled: the command was stopped.", output.text(), output, limits)
