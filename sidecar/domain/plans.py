"""A plan as the builtin engine's `update_plan` tool gives it: parsed, checked, bounded;
and an external agent's plan, bounded the same way.

A domain fact, not the tool's code: the loop reads a live call with it and the ACP edge
reads a stored call again with it (session/load replays the plan), so a stored call is
shown exactly as it was when it ran. The entries are ACP's plan entry fields.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from sidecar.domain.events import PlanItem
from sidecar.domain.tools import UPDATE_PLAN

__all__ = [
    "MAX_CONTENT",
    "MAX_ENTRIES",
    "UPDATE_PLAN",
    "ParsedPlan",
    "PlanError",
    "parse_plan",
    "relayed_plan",
]

MAX_ENTRIES: Final = 1000  # a plan is a short checklist: a model that sends more is told
MAX_CONTENT: Final = 2000  # characters of one entry


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    content: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"] = "medium"


class _Plan(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    entries: list[_Entry]


@dataclass(frozen=True, slots=True)
class ParsedPlan:
    items: tuple[PlanItem, ...]
    given: int  # entries the call held (more than `items` when cut)
    cut_contents: int  # entries whose content was cut at MAX_CONTENT

    @property
    def cut(self) -> bool:
        return self.given > len(self.items) or self.cut_contents > 0


class PlanError(ValueError):
    """An `update_plan` call the tool cannot take: the text says what is wrong (the model
    reads it and tries again)."""


def parse_plan(arguments: str) -> ParsedPlan:
    """An `update_plan` call's JSON arguments as a bounded plan; PlanError naming the
    field otherwise. Only the first MAX_ENTRIES entries are read (and checked)."""
    try:
        raw = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise PlanError(f"arguments are not JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise PlanError('arguments must be an object: {"entries": [...]}')
    entries = raw.get("entries")
    if not isinstance(entries, list):
        raise PlanError("'entries' must be a list of {content, status, priority}")
    given = len(entries)
    try:
        plan = _Plan.model_validate({"entries": entries[:MAX_ENTRIES]})
    except ValidationError as exc:
        raise PlanError(_reason(exc)) from None
    items: list[PlanItem] = []
    cut_contents = 0
    for entry in plan.entries:
        content = _cut(entry.content)
        cut_contents += content != entry.content
        items.append(PlanItem(content, entry.priority, entry.status))
    return ParsedPlan(tuple(items), given, cut_contents)


def relayed_plan(entries: Sequence[tuple[str, str, str]]) -> tuple[PlanItem, ...]:
    """An external agent's plan (`(content, priority, status)` per entry) bounded as the
    builtin's is: at most MAX_ENTRIES entries, each at most MAX_CONTENT characters. The
    cut is marked for the user (no model to tell here): past the bound, the last entry
    says how many more there were."""
    shown = entries if len(entries) <= MAX_ENTRIES else entries[: MAX_ENTRIES - 1]
    items = [PlanItem(_cut(content), priority, status) for content, priority, status in shown]
    if len(entries) > MAX_ENTRIES:
        more = len(entries) - len(shown)
        note = f"… and {more:,} more entries the agent sent (a plan shows at most {MAX_ENTRIES:,})"
        items.append(PlanItem(note, "low", "pending"))
    return tuple(items)


def _cut(content: str) -> str:
    return content if len(content) <= MAX_CONTENT else content[: MAX_CONTENT - 1] + "…"


def _reason(exc: ValidationError) -> str:
    """The first problem, named by its place: entries[3].status: Input should be ..."""
    error = exc.errors(include_url=False)[0]
    where = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    ).lstrip(".")
    more = exc.error_count() - 1
    tail = f" (and {more} more problem(s))" if more > 0 else ""
    return f"{where or 'arguments'}: {error['msg']}{tail}"


def result_text(plan: ParsedPlan) -> str:
    """What the model is told: the plan is in place, and what of it was cut."""
    counts = {status: 0 for status in ("completed", "in_progress", "pending")}
    for item in plan.items:
        counts[item.status] += 1
    text = (
        f"Plan updated: {len(plan.items)} entries ({counts['completed']} completed, "
        f"{counts['in_progress']} in progress, {counts['pending']} pending)."
    )
    if plan.given > len(plan.items):
        text += (
            f" Cut: {plan.given} entries were given, only the first {MAX_ENTRIES} are kept; "
            "keep the plan a short checklist."
        )
    if plan.cut_contents:
        text += (
            f" {plan.cut_contents} entries' content was cut at {MAX_CONTENT} characters; "
            "keep each entry one short line."
        )
    return text
