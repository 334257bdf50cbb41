"""Message models for what ACP does not define: the session summary, our `_meta`
keys on `session/new`, and the extension methods' params and results.

Wire names are camelCase (ACP's convention); Python names are snake_case.
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

Mode = Literal["craft", "plan", "ask"]
Backend = Literal["pipe", "pty"]
Status = Literal["creating", "idle", "running", "closing", "closed", "error"]

MODES: Final[tuple[str, ...]] = get_args(Mode)
BACKENDS: Final[tuple[str, ...]] = get_args(Backend)
STATUSES: Final[tuple[str, ...]] = get_args(Status)

MODE_DESCRIPTIONS: Final[dict[str, tuple[str, str]]] = {
    "craft": ("Craft", "Change the workspace: the agent may run shell commands to build things."),
    "plan": ("Plan", "Investigate and propose a plan; shell commands allowed for reading."),
    "ask": ("Ask", "Answer questions only; no tools."),
}


def available_modes() -> list[dict[str, str]]:
    """ACP `availableModes` entries, in a fixed order."""
    return [
        {"id": mode, "name": name, "description": text}
        for mode, (name, text) in MODE_DESCRIPTIONS.items()
    ]


class WireModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


class HttpEndpoint(WireModel):
    url: str
    token: str | None = None


class SessionSummary(WireModel):
    """The one shape of a session everywhere: stdio, `session/list` `_meta`, HTTP."""

    session_id: str
    cwd: str
    title: str
    status: Status
    mode: Mode
    backend: Backend
    # What actually executes commands (until the PTY backend lands, pty runs as pipe).
    effective_backend: Backend
    generation: int
    live: bool
    message_count: int
    last_error: str | None
    interrupted: bool
    forked_from: str | None = None
    # Set when another live sidecar process runs this session (it holds the lease).
    held_by: str | None = None
    created_at: str
    updated_at: str
    http: HttpEndpoint | None


class StrictParams(WireModel):
    # Unknown keys are tolerated (ACP lets clients add `_meta` and future fields);
    # wrong types on known keys are not.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, strict=True
    )


class NewSessionMeta(StrictParams):
    """Our keys inside `session/new` `params._meta`."""

    mode: Mode = "craft"
    backend: Backend = "pipe"
    title: str = Field(default="Untitled session", min_length=1, max_length=200)


class StatusParams(StrictParams):
    session_id: str = Field(min_length=1, max_length=200)


class MessagesParams(StrictParams):
    session_id: str = Field(min_length=1, max_length=200)
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=1000)


class ResizeParams(StrictParams):
    session_id: str = Field(min_length=1, max_length=200)
    rows: int = Field(ge=1, le=1000)
    cols: int = Field(ge=1, le=1000)


class CompactParams(StrictParams):
    session_id: str = Field(min_length=1, max_length=200)
    keep_turns: int = Field(default=2, ge=0, le=1000)


class MessagesResult(WireModel):
    messages: list[dict[str, Any]]
    total: int


class SessionStateNotification(WireModel):
    session_id: str
    status: Status
    generation: int
    last_error: str | None
