"""Permission rules: what a session allows or refuses without asking.

A rule is plain data: a decision (allow or deny), the tool it is about, and how it
matches that tool's subject (a command line, a file path, an MCP tool's arguments are
not matched: only its name): `exact` (the whole subject) or `prefix` (the subject
starts with the value, followed by the end or a space). Deny wins over allow. Nothing
the model writes is ever a pattern: rules come from the user (an "always" answer, or
`_session/permissions/set`).

For the file tools that write (`write_file`, `edit_file`), whose subject is the path as
shown (relative to the cwd when inside it, absolute otherwise), `prefix` is by directory:
the value names a directory (`src/`, the trailing slash optional) and covers it and every
path below it, compared whole component by component after normalizing both sides
(`./src//` is `src`), so `src/` covers `src/a.py` and `src/lib/b.py` but not `srcs/c.py`.
A relative directory never reaches out of the cwd: a value that climbs with `..` is
refused when the rule is made, and a relative rule never covers an absolute path.

A command prefix rule never matches a command line that chains or redirects
(`;`, `&`, `|`, `` ` ``, `$(`, `>`, `<`, newline): "allow `git log`" must not allow
`git log; rm -rf ~`.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sidecar.domain.errors import InvalidInput

MAX_RULES: Final = 500
MAX_VALUE: Final = 4096
SHELL_CONTROL: Final = (";", "&", "|", "`", "$(", ">", "<", "\n", "\r")
# The tools whose subject is a path (agent/tools/files.py: WRITES; a test holds them equal).
PATH_TOOLS: Final = frozenset({"write_file", "edit_file"})


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class Match(StrEnum):
    EXACT = "exact"
    PREFIX = "prefix"


@dataclass(frozen=True, slots=True)
class Rule:
    decision: Decision
    tool: str  # "bash", "write_file", an MCP tool's public name, ...
    match: Match
    value: str

    def matches(self, tool: str, subject: str) -> bool:
        if tool != self.tool:
            return False
        if self.match is Match.EXACT:
            return subject == self.value
        if tool in PATH_TOOLS:
            return _below(subject, self.value)
        if tool == "bash" and any(mark in subject for mark in SHELL_CONTROL):
            return False
        return subject == self.value or subject.startswith(self.value + " ")

    def to_wire(self) -> dict[str, str]:
        return {
            "decision": self.decision.value,
            "tool": self.tool,
            "match": self.match.value,
            "value": self.value,
        }


def _normal(path: str) -> str:
    """`./src//a.py` -> `src/a.py`; `''` and `./` -> `.`; an absolute path stays absolute."""
    return posixpath.normpath(path) if path else "."


def _climbs(normal: str) -> bool:
    return normal == ".." or normal.startswith("../")


def _below(subject: str, directory: str) -> bool:
    """Whether the path `subject` is `directory` or below it (see the module docstring)."""
    base, path = _normal(directory), _normal(subject)
    if _climbs(base) or _climbs(path) or posixpath.isabs(base) != posixpath.isabs(path):
        return False
    if base in (".", "/"):
        return True
    return path == base or path.startswith(base + "/")


def decide(rules: Iterable[Rule], tool: str, subject: str) -> Decision | None:
    """The rules' verdict on one call, or None (then the approval setting decides)."""
    verdict: Decision | None = None
    for rule in rules:
        if rule.matches(tool, subject):
            if rule.decision is Decision.DENY:
                return Decision.DENY
            verdict = Decision.ALLOW
    return verdict


def _field(raw: dict[str, Any], index: int, name: str, allowed: Sequence[str] | None) -> str:
    value = raw.get(name)
    where = f"rules.{index}.{name}"
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(where, "required, a non-empty string")
    if len(value) > MAX_VALUE:
        raise InvalidInput(where, f"at most {MAX_VALUE} characters")
    if allowed is not None and value not in allowed:
        raise InvalidInput(where, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def parse_rules(raw: Any) -> tuple[Rule, ...]:
    """Wire rules (`[{decision, tool, match, value}]`) -> rules; InvalidInput names the field."""
    if not isinstance(raw, list):
        raise InvalidInput("rules", "must be a list of rules")
    if len(raw) > MAX_RULES:
        raise InvalidInput("rules", f"at most {MAX_RULES} rules")
    parsed: list[Rule] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidInput(f"rules.{index}", "must be an object")
        unknown = set(item) - {"decision", "tool", "match", "value"}
        if unknown:
            raise InvalidInput(f"rules.{index}", f"unknown keys: {', '.join(sorted(unknown))}")
        rule = Rule(
            Decision(_field(item, index, "decision", [d.value for d in Decision])),
            _field(item, index, "tool", None),
            Match(_field(item, index, "match", [m.value for m in Match])),
            _field(item, index, "value", None),
        )
        if rule.tool in PATH_TOOLS and rule.match is Match.PREFIX and _climbs(_normal(rule.value)):
            raise InvalidInput(
                f"rules.{index}.value",
                f"a directory rule must stay inside the cwd, got {rule.value!r} (it climbs with ..)",
            )
        if rule not in parsed:
            parsed.append(rule)
    return tuple(parsed)


def rules_from_json(text: str) -> tuple[Rule, ...]:
    """The record's stored rules (written by `rules_to_json`)."""
    try:
        return parse_rules(json.loads(text or "[]"))
    except (ValueError, InvalidInput):
        return ()  # never written by us: treat as none rather than fail every call


def rules_to_json(rules: Iterable[Rule]) -> str:
    return json.dumps([rule.to_wire() for rule in rules], separators=(",", ":"))
