"""The tools a mode offers, in Chat Completions form, and the system prompts."""

from __future__ import annotations

import json
from typing import Any, Final

BASH_TOOL: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": "bash",
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

SYSTEM_PROMPTS: Final[dict[str, str]] = {
    "craft": (
        "You are a coding agent working in {cwd}. You may change files and run commands "
        "with the bash tool to get the user's task done. Keep answers short."
    ),
    "plan": (
        "You are a coding agent in planning mode in {cwd}. Use the bash tool only to read "
        "and inspect; do not modify anything. Answer with a concrete plan."
    ),
    "ask": "You are a helpful coding assistant. Answer questions about {cwd}. You have no tools.",
}


def tools_for_mode(mode: str) -> list[dict[str, Any]]:
    return [] if mode == "ask" else [BASH_TOOL]


def system_prompt(mode: str, cwd: str) -> str:
    return SYSTEM_PROMPTS[mode].format(cwd=cwd)


def parse_bash_arguments(arguments: str) -> str:
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
