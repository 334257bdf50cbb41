"""What a permission request is and what its answer says: values shared by the agent
loop (which asks), the core (which decides and waits) and the edges (which show it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from protocol.values import Sandbox
from sidecar.domain.events import ToolKind
from sidecar.domain.files import FileDiff, Location
from sidecar.domain.rules import Rule


class Choice(StrEnum):
    """ACP's permission option kinds; our option ids are the same words."""

    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    call_id: str
    tool: str
    title: str
    kind: ToolKind
    subject: str  # what rules match: the command line, the file path, the tool name
    raw_input: Mapping[str, Any] = field(default_factory=dict)
    cwd: str = ""
    sandbox: Sandbox = Sandbox.WORKSPACE
    diffs: tuple[FileDiff, ...] = ()  # a write: exactly what will be written
    locations: tuple[Location, ...] = ()
    # Ask under `ask` even when an allow rule matches (an MCP tool marked destructive).
    always_ask: bool = False


@dataclass(frozen=True, slots=True)
class PermissionAnswer:
    choice: Choice | None  # None: the client cancelled the request
    rule: Rule | None = None  # for an "always" answer, the rule the client chose
    note: str | None = None  # why an answer counts as a refusal (error, malformed)


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    reason: str = ""  # for the model, when refused
    cancelled: bool = False  # the turn ends (cancelled while waiting)
