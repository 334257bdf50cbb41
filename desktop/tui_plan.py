"""The agent's plan (ACP `plan` updates) as terminal lines: one entry a line with its
status mark, printed when the plan changes (each update replaces the one before)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

MARKS: Final = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
SHOWN: Final = 50  # entries printed of a long plan; the rest are counted


def plan_lines(entries: list[dict[str, Any]], clean: Callable[[str], str]) -> list[str]:
    """`clean`: the agent's text made safe for this terminal (one line per entry)."""
    done = sum(1 for entry in entries if entry.get("status") == "completed")
    lines = [f"plan ({done}/{len(entries)} done):"]
    for entry in entries[:SHOWN]:
        mark = MARKS.get(str(entry.get("status")), "[?]")
        text = " ".join(clean(str(entry.get("content") or "")).split())
        priority = " (high)" if entry.get("priority") == "high" else ""
        lines.append(f"  {mark} {text}{priority}")
    if len(entries) > SHOWN:
        lines.append(f"  ... and {len(entries) - SHOWN} more")
    return lines


class PlanView:
    """The last plan printed per session: an update that changes nothing prints nothing."""

    def __init__(self) -> None:
        self.shown: dict[str, list[dict[str, Any]]] = {}

    def changed(self, sid: str, entries: list[dict[str, Any]]) -> bool:
        if self.shown.get(sid) == entries:
            return False
        self.shown[sid] = entries
        return True
