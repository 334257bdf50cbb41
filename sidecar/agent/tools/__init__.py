"""The tools a mode offers (Chat Completions function schemas) and the system prompts.

A new tool is a module here with its `NAME`, `SPEC`, argument parser and result text,
listed in `tools_for_mode`, and run by `sidecar/agent/loop.py`.
"""

from __future__ import annotations

from typing import Any, Final

from protocol.values import Mode
from sidecar.agent.mcp import ToolSpec
from sidecar.agent.tools import bash, files, plan

SYSTEM_PROMPTS: Final[dict[Mode, str]] = {
    Mode.CRAFT: (
        "You are a coding agent working in {cwd}. Read files with read_file and list_files, "
        "change them with edit_file and write_file (the user sees each change as a diff), "
        "and run commands with bash to get the user's task done. Keep answers short."
    ),
    Mode.PLAN: (
        "You are a coding agent in planning mode in {cwd}. Read with read_file, list_files "
        "and bash; do not modify anything. Answer with a concrete plan."
    ),
    Mode.ASK: (
        "You are a helpful coding assistant. Answer questions about {cwd}. You have no "
        "tools to read or change anything."
    ),
}


_CRAFT: Final = [
    bash.SPEC,
    *(
        files.SPECS[n]
        for n in (files.READ_FILE, files.LIST_FILES, files.EDIT_FILE, files.WRITE_FILE)
    ),
    plan.SPEC,
]
_PLAN: Final = [bash.SPEC, *(files.SPECS[n] for n in files.READS), plan.SPEC]
# update_plan changes nothing and asks nobody: every mode has it.
_BY_MODE: Final[dict[Mode, list[dict[str, Any]]]] = {
    Mode.CRAFT: _CRAFT,
    Mode.PLAN: _PLAN,
    Mode.ASK: [plan.SPEC],
}
BUILT_IN: Final[dict[Mode, frozenset[str]]] = {
    mode: frozenset(spec["function"]["name"] for spec in specs) for mode, specs in _BY_MODE.items()
}


def tools_for_mode(mode: Mode) -> list[dict[str, Any]]:
    """The built-in tools of a mode: `plan` reads only (its commands run read-only), `ask`
    only keeps a plan."""
    return list(_BY_MODE[mode])


def system_prompt(mode: Mode, cwd: str, instructions: str = "") -> str:
    """The mode's prompt, the plan tool's line, then the project's instruction files
    (`agent/instructions.py`: AGENTS.md and the like), if any."""
    prompt = f"{SYSTEM_PROMPTS[mode].format(cwd=cwd)} {plan.PROMPT_LINE}"
    return f"{prompt}\n\n{instructions}" if instructions else prompt


def function_spec(tool: ToolSpec) -> dict[str, Any]:
    """An MCP tool as a Chat Completions function (every provider adapter starts from it)."""
    description = tool.description or tool.title or tool.tool
    return {
        "type": "function",
        "function": {"name": tool.name, "description": description, "parameters": tool.parameters},
    }
