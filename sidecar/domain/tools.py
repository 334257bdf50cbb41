"""The builtin tools' names and how a call of each is presented (its kind and title verb).

A domain fact, not the tools' code: the loop presents a live call with it, and the wire
presents a stored one again with it (`wire/transcript.py`), so both read one table and the
wire needs nothing of the agent.
"""

from __future__ import annotations

from typing import Final

from sidecar.domain.events import ToolKind

BASH: Final = "bash"
READ_FILE: Final = "read_file"
WRITE_FILE: Final = "write_file"
EDIT_FILE: Final = "edit_file"
LIST_FILES: Final = "list_files"
UPDATE_PLAN: Final = "update_plan"  # the plan tool (`domain/plans.py`): no file, no command

FILE_TOOL_KINDS: Final[dict[str, ToolKind]] = {
    READ_FILE: ToolKind.READ,
    WRITE_FILE: ToolKind.EDIT,
    EDIT_FILE: ToolKind.EDIT,
    LIST_FILES: ToolKind.SEARCH,
}
FILE_TOOL_TITLES: Final[dict[str, str]] = {
    READ_FILE: "Read",
    WRITE_FILE: "Write",
    EDIT_FILE: "Edit",
    LIST_FILES: "List",
}


def kind_of(name: str) -> ToolKind:
    """How a builtin call is presented (MCP tools' kinds are not stored: other)."""
    if name == BASH:
        return ToolKind.EXECUTE
    if name == UPDATE_PLAN:
        return ToolKind.THINK
    return FILE_TOOL_KINDS.get(name, ToolKind.OTHER)
