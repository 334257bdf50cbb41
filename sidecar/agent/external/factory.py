"""Which engine a session's record asks for: the builtin loop, or an external agent.

Resolved per runtime generation, from the catalog as it is now: an agent installed since
the session was made is found, one removed since fails its start with the command that
installs it. Nothing here raises: a problem (not installed, an env variable unset) is
the engine's start failure, so the session's record says it (lastError) like any other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.agent.engine import BuiltinEngine, Engine, EngineFactory, EngineStart
from sidecar.agent.external.catalog import AgentCatalog
from sidecar.agent.external.definitions import (
    BUILTIN,
    AgentConfigError,
    AgentDefinition,
    base_environment,
    expand_env,
    find_command,
    writable_paths,
)
from sidecar.agent.host import EngineHost, TurnHost
from sidecar.agent.outcome import TurnOutcome
from sidecar.domain.agent_options import AgentOption
from sidecar.domain.errors import AgentFailed
from sidecar.domain.records import SessionRecord


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What the sidecar's command line says about every external agent."""

    start_timeout: float = 60.0  # initialize + session/new (--agent-start-timeout)
    interrupt_grace: float = 2.0  # after session/cancel, before the process is stopped
    homes: Path | None = None  # where isolated homes go (under the data dir)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


class UnstartableEngine:
    """An agent that cannot be started (not installed, its environment incomplete): its
    start fails with the reason, so the record says it."""

    def __init__(self, name: str, problem: str) -> None:
        self._name = name
        self._problem = problem

    @property
    def name(self) -> str:
        return self._name

    @property
    def uses_provider(self) -> bool:
        return False

    async def start(self, host: EngineHost) -> EngineStart:
        raise AgentFailed(self._problem)

    async def run_turn(self, host: TurnHost, prompt: str) -> TurnOutcome:
        raise AgentFailed(self._problem)

    def options(self) -> tuple[AgentOption, ...]:
        return ()

    async def set_option(self, option_id: str, value: str) -> None:
        raise AgentFailed(self._problem)

    def cancel(self) -> None:
        """Nothing runs."""

    async def close(self) -> None:
        """Nothing held."""


def not_installed(defn: AgentDefinition) -> str:
    how = f"; install it with: {defn.install}" if defn.install else ""
    return f"agent {defn.name!r} is not installed: {defn.command[0]!r} was not found{how}"


def _home(defn: AgentDefinition, record: SessionRecord, settings: AgentSettings) -> str:
    """The agent's HOME: the user's, or (isolated_home) one per session in the data dir."""
    if defn.isolated_home and settings.homes is not None:
        home = settings.homes / record.session_id
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        return str(home)
    return settings.environ.get("HOME") or os.path.expanduser("~")


def engine_factory(catalog: AgentCatalog, settings: AgentSettings) -> EngineFactory:
    """The `RuntimeDeps.make_engine` of a sidecar with external agents."""

    def make(record: SessionRecord) -> Engine:
        if record.agent == BUILTIN:
            return BuiltinEngine()
        if not catalog.knows(record.agent):
            return UnstartableEngine(
                record.agent, f"agent {record.agent!r} is not configured in this sidecar"
            )
        defn = catalog.get(record.agent)
        program = find_command(defn, settings.environ.get("PATH"))
        if program is None:
            return UnstartableEngine(defn.name, not_installed(defn))
        try:
            env = {**base_environment(settings.environ), **expand_env(defn, settings.environ)}
            home = _home(defn, record, settings)
        except (AgentConfigError, OSError) as exc:
            return UnstartableEngine(defn.name, str(exc))
        env["HOME"] = home
        writable = writable_paths(defn, home)
        if defn.isolated_home:
            writable = (home, *writable)
        from sidecar.agent.external.engine import ExternalEngine, Launch

        launch = Launch(
            (program, *defn.command[1:]),
            env,
            writable,
            settings.start_timeout,
            settings.interrupt_grace,
        )
        return ExternalEngine(defn, record, launch, remember=catalog.remember)

    return make
