"""An external agent's own settings (its config options and modes), as a session offers them.

Why apart: the agent says them in three places (the answer that opened its session, its
`config_option_update` / `current_mode_update` notifications, the answer to a change) and
the session offers them as `agent.<id>` options beside ours; this keeps the latest word and
checks a change before the agent is asked. A mode the agent offers only as a mode (not as a
config option) is the `mode` option, changed with `session/set_mode`.
"""

from __future__ import annotations

from typing import Any

from acp import schema

from sidecar.domain.agent_options import MODE_ID, AgentOption
from sidecar.domain.errors import InvalidInput


def _choices(option: schema.SessionConfigOptionSelect) -> tuple[tuple[str, str], ...]:
    flat: list[tuple[str, str]] = []
    for item in option.options:
        if isinstance(item, schema.SessionConfigSelectGroup):
            flat += [(choice.value, choice.name) for choice in item.options]
        else:
            flat.append((item.value, item.name))
    return tuple(flat)


def agent_options(config: Any, modes: schema.SessionModeState | None) -> tuple[AgentOption, ...]:
    """The agent's select options and its modes, as the session offers them."""
    found = [
        AgentOption(o.id, o.name, o.current_value, _choices(o), o.description)
        for o in config or ()
        if isinstance(o, schema.SessionConfigOptionSelect)
    ]
    if modes is not None and not any(o.option_id == MODE_ID for o in found):
        choices = tuple((m.id, m.name) for m in modes.available_modes)
        found.append(AgentOption(MODE_ID, "Agent mode", modes.current_mode_id, choices))
    return tuple(found)


class AgentOptions:
    """The agent's settings for one session, as it last said them."""

    def __init__(self, agent: str) -> None:
        self._agent = agent
        self._config: Any = None
        self._modes: schema.SessionModeState | None = None

    def offered(self) -> tuple[AgentOption, ...]:
        return agent_options(self._config, self._modes)

    def take(self, answer: Any) -> None:
        """An answer that carries them (session/new, load, resume, fork, a change)."""
        if answer is None:
            return
        if getattr(answer, "config_options", None) is not None:
            self._config = answer.config_options
        if getattr(answer, "modes", None) is not None:
            self._modes = answer.modes

    def told(self, update: Any) -> bool:
        """A settings update from the agent: kept. True when the options changed."""
        if isinstance(update, schema.ConfigOptionUpdate):
            self._config = update.config_options
            return True
        if isinstance(update, schema.CurrentModeUpdate) and self._modes is not None:
            self.mode_set(update.current_mode_id)
            return True
        return False

    def mode_set(self, mode_id: str) -> None:
        if self._modes is not None:
            self._modes = self._modes.model_copy(update={"current_mode_id": mode_id})

    def check(self, option_id: str, value: str) -> bool:
        """InvalidInput for an option the agent lacks or a value it does not offer; True
        when the change is a mode the agent offers only as a mode (`session/set_mode`)."""
        options = self.offered()
        option = next((o for o in options if o.option_id == option_id), None)
        if option is None:
            known = ", ".join(o.option_id for o in options) or "none"
            raise InvalidInput(
                "configId", f"agent {self._agent!r} has no option {option_id!r} ({known})"
            )
        if value not in {choice for choice, _ in option.choices}:
            allowed = ", ".join(choice for choice, _ in option.choices)
            raise InvalidInput("value", f"{option.name} must be one of {allowed}, got {value!r}")
        return option_id == MODE_ID and not any(
            isinstance(o, schema.SessionConfigOptionSelect) and o.id == MODE_ID
            for o in self._config or ()
        )
