"""ACP's session configuration and commands as we offer them: the config options
(`mode`, `model`), and the slash commands a session understands.

`configOptions` ride in `session/new`, `load`, `resume` and `fork` results and in
`config_option_update`; `session/set_config_option` changes one. The legacy `modes` /
`session/set_mode` pair keeps working and stays in sync with the `mode` option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from protocol.values import MODE_DESCRIPTIONS, Approval, Mode, Sandbox
from sidecar.agent.providers.base import ProviderCommand
from sidecar.core.views import SessionView
from sidecar.domain.agent_options import BUILTIN, PREFIX

MODE: Final = "mode"
MODEL: Final = "model"
APPROVAL: Final = "approval"
SANDBOX: Final = "sandbox"

APPROVALS: Final = {
    Approval.ASK: ("Ask", "Ask before every call that could change something"),
    Approval.AUTO: ("Auto", "Never ask"),
    Approval.DENY: ("Deny", "Never ask; refuse what would be asked"),
}
SANDBOXES: Final = {
    Sandbox.READ_ONLY: ("Read-only", "Commands cannot write anywhere; no network"),
    Sandbox.WORKSPACE: ("Workspace", "Commands can write only in the session directory"),
    Sandbox.OFF: ("Off", "Commands run with your own rights"),
}


def agent_config_options(view: SessionView) -> list[dict[str, Any]]:
    """An external agent's own settings, each as `agent.<its id>`."""
    return [
        {
            "type": "select",
            "id": PREFIX + option.option_id,
            "name": option.name,
            "description": option.description or f"{view.record.agent}'s own setting",
            "currentValue": option.current,
            "options": [{"value": value, "name": name} for value, name in option.choices],
        }
        for option in view.agent_options
    ]


def config_options(view: SessionView, models: Sequence[str]) -> list[dict[str, Any]]:
    """Ours (mode, model, approval, sandbox), then an external agent's own; a session run
    by an external agent has no model of ours (the agent's own model option is its)."""
    ours = _our_options(view, models)
    if view.record.agent != BUILTIN:
        return [o for o in ours if o["id"] != MODEL] + agent_config_options(view)
    return ours


def _our_options(view: SessionView, models: Sequence[str]) -> list[dict[str, Any]]:
    record = view.record
    model = record.model or (models[0] if models else "")
    offered = list(models) if model in models else [model, *models]
    return [
        {
            "type": "select",
            "id": MODE,
            "name": "Mode",
            "description": "What the agent may do",
            "category": "mode",
            "currentValue": record.mode.value,
            "options": [
                {"value": mode.value, "name": name, "description": text}
                for mode, (name, text) in MODE_DESCRIPTIONS.items()
            ],
        },
        {
            "type": "select",
            "id": MODEL,
            "name": "Model",
            "description": "The model the session's provider uses",
            "category": "model",
            "currentValue": model,
            "options": [{"value": name, "name": name} for name in offered],
        },
        {
            "type": "select",
            "id": APPROVAL,
            "name": "Approval",
            "description": "When you are asked before a tool call",
            "currentValue": record.approval.value,
            "options": [
                {"value": value.value, "name": name, "description": text}
                for value, (name, text) in APPROVALS.items()
            ],
        },
        {
            "type": "select",
            "id": SANDBOX,
            "name": "Sandbox",
            "description": "What commands may touch (plan mode is always read-only)",
            "currentValue": (record.sandbox or Sandbox.WORKSPACE).value,
            "options": [
                {"value": value.value, "name": name, "description": text}
                for value, (name, text) in SANDBOXES.items()
            ],
        },
    ]


def parse_mode(value: str) -> Mode | None:
    try:
        return Mode(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class SidecarCommand:
    """A slash command the sidecar runs itself (never sent to the model)."""

    name: str
    description: str
    hint: str | None


SIDECAR_COMMANDS: Final = (
    SidecarCommand(
        "compact", "summarize older turns to free the context (keeps the last N)", "keep turns"
    ),
    SidecarCommand("rename", "give the session a title", "new title"),
)


def available_commands(provider: Sequence[ProviderCommand]) -> list[dict[str, Any]]:
    """`available_commands_update` entries: ours, then the provider's own."""
    entries: list[dict[str, Any]] = []
    commands: list[SidecarCommand | ProviderCommand] = [*SIDECAR_COMMANDS, *provider]
    for command in commands:
        entry: dict[str, Any] = {"name": command.name, "description": command.description}
        if command.hint:
            entry["input"] = {"hint": command.hint}
        entries.append(entry)
    return entries


def sidecar_command(text: str) -> tuple[SidecarCommand, str] | None:
    """`/name rest` of one of our commands, else None (an unknown `/word` is the model's)."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    word, _, rest = stripped[1:].partition(" ")
    for command in SIDECAR_COMMANDS:
        if word == command.name:
            return command, rest.strip()
    return None
