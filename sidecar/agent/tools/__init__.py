"""The tools a mode offers (Chat Completions function schemas) and the system prompts.

A new tool is a module here with its `NAME`, `SPEC`, argument parser and result text,
listed in `tools_for_mode`, and run by `sidecar/agent/loop.py`.
"""

from __future__ import annotations

from typing import Any, Final

from protocol.values import Mode
from sidecar.agent.mcp import ToolSpec
from sidecar.agent.tools import bash

SYSTEM_PROMPTS: Final[dict[Mode, str]] = {
    Mode.CRAFT: (
        "You are a coding agent working in {cwd}. You may change files and run commands "
        "with the bash tool to get the user's task done. Keep answers short."
    ),
    Mode.PLAN: (
        "You are a coding agent in planning mode in {cwd}. Use the bash tool only to read "
        "and inspect; do not modify anything. Answer with a concrete plan."
    ),
    Mode.ASK: "You are a helpful coding assistant. Answer questions about {cwd}. You have no tools.",
}


def tools_for_mode(mode: Mode) -> list[dict[str, Any]]:
    return [] if mode is Mode.ASK else [bash.SPEC]


def system_prompt(mode: Mode, cwd: str) -> str:
    return SYSTEM_PROMPTS[mode].format(cwd=cwd)


def function_spec(tool: ToolSpec) -> dict[str, Any]:
    """An MCP tool as a Chat Completions function (every provider adapter starts from it)."""
    description = tool.description or tool.title or tool.tool
    return {
        "type": "function",
        "function": {"name": tool.name, "description": description, "parameters": tool.parameters},
    }
