"""The `update_plan` tool: the model keeps a short checklist the user sees (ACP `plan`).

It changes no file and runs nothing, so it is offered in every mode and asks nobody. The
arguments are read by `sidecar.domain.plans` (bounded: the model is told what was cut).
"""

from __future__ import annotations

from typing import Any, Final

from sidecar.domain.plans import MAX_CONTENT, MAX_ENTRIES, UPDATE_PLAN

NAME: Final = UPDATE_PLAN
TITLE: Final = "Update plan"  # as wire/transcript.py titles a stored call

SPEC: Final[dict[str, Any]] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": (
            "Replace your plan for the user's task: a short checklist the user sees. "
            "Send the whole list each time, with each step's status; mark a step "
            "in_progress when you start it and completed when it is done. "
            f"At most {MAX_ENTRIES} entries of up to {MAX_CONTENT} characters."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "entries": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "The step, one line."},
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                            },
                            "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                        },
                        "required": ["content", "status", "priority"],
                    },
                }
            },
            "required": ["entries"],
        },
    },
}

PROMPT_LINE: Final = (
    "For work of several steps, keep a short checklist with update_plan and update it as "
    "steps start and finish."
)
