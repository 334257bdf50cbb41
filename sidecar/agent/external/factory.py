"""Which engine a session's record asks for: the builtin loop, or an external agent.

Resolved per runtime generation, from the catalog as it is now: an agent installed since
the session was made is found, one removed since fails its start with the command that
installs it. Nothing here raises: a problem (not installed, an env variable unset) is
the engine's start failure, so the session's record says it (lastError) like any other.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from protocol.values import Sandbox
from sidecar.agent.engine import BuiltinEngine, Engine, EngineStart
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
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.records import SessionRecord
from sidecar.domain.redaction import SECRETS

if TYPE_CHECKING:  # the modules that import ACP's SDK, imported once it is loaded
    from sidecar.agent.external.engine import Launch
    from sidecar.agent.external.pool import AgentPool
    from sidecar.agent.external.prewarm import Place, Prewarmer, WarmAgent

Contain = Callable[[Sequence[str], Sequence[str], str, Sandbox], list[str]]
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What the sidecar's command line says about every external agent."""

    start_timeout: float = 60.0  # initialize + session/new (--agent-start-timeout)
    interrupt_grace: float = 2.0  # after session/cancel, before the process is stopped
    homes: Path | None = None  # where isolated homes go (under the data dir)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    prewarm: tuple[str, ...] = ()  # --prewarm: agents kept warm, one process each
    # How a warm process is contained (sandbox.wrap with the sidecar's bwrap and hidden
    # dirs), for a cwd and mode; None: nothing is prewarmed.
    contain: Contain | None = None
    first_cwd: str = field(default_factory=os.getcwd)  # a warm process's place at first
    # Loads ACP's SDK (sidecar/acp/preload.py: once, in one thread, lean) before the
    # modules that use it are imported: an external agent's engine, the warm processes.
    load_acp: Callable[[], None] = lambda: None


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

    @property
    def embeds_files(self) -> bool:
        return False

    async def start(self, host: EngineHost) -> EngineStart:
        raise AgentFailed(self._problem)

    def refuses(self, prompt: UserPrompt) -> str | None:
        return None  # the turn fails with the reason the agent cannot start

    async def run_turn(self, host: TurnHost, prompt: UserPrompt) -> TurnOutcome:
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


def _home(defn: AgentDefinition, session_id: str | None, settings: AgentSettings) -> str:
    """The agent's HOME: the user's, or (isolated_home) one per session in the data dir."""
    if defn.isolated_home and settings.homes is not None and session_id is not None:
        home = settings.homes / session_id
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        return str(home)
    return settings.environ.get("HOME") or os.path.expanduser("~")


def launch_for(
    defn: AgentDefinition, settings: AgentSettings, session_id: str | None
) -> Launch | str:
    """How to start `defn` (for this session, or for a warm process: None), or why not."""
    settings.load_acp()
    from sidecar.agent.external.engine import Launch

    program = find_command(defn, settings.environ.get("PATH"))
    if program is None:
        return not_installed(defn)
    try:
        env = {**base_environment(settings.environ), **expand_env(defn, settings.environ)}
        home = _home(defn, session_id, settings)
    except (AgentConfigError, OSError) as exc:
        return str(exc)
    _mask_secrets(env.keys() - base_environment(settings.environ).keys(), env)
    env["HOME"] = home
    writable = writable_paths(defn, home)
    if defn.isolated_home:
        writable = (home, *writable)
    return Launch(
        (program, *defn.command[1:]),
        env,
        writable,
        settings.start_timeout,
        settings.interrupt_grace,
    )


_SECRET_WORDS: Final = ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH", "CREDENTIAL")
_masked: set[str] = set()


def _mask_secrets(names: Iterable[str], env: Mapping[str, str]) -> None:
    """Values an agent is given under a secret-looking name are masked in every log line
    from now on (an agent may print its own key on stderr, which the log keeps)."""
    for name in names:
        value = env[name]
        if any(word in name.upper() for word in _SECRET_WORDS) and value not in _masked:
            _masked.add(value)
            SECRETS.add(value)


class Engines:
    """The `RuntimeDeps.make_engine` of a sidecar with external agents, the agent
    processes its sessions run on (`AgentPool`: shared where an agent allows it) and the
    warm processes it keeps (`--prewarm`)."""

    def __init__(self, catalog: AgentCatalog, settings: AgentSettings) -> None:
        self._catalog = catalog
        self._settings = settings
        self._pool: AgentPool | None = None  # made with the first external engine
        self.prewarmer: Prewarmer | None = None
        names = frozenset(n for n in settings.prewarm if self._warmable(n))
        if names and settings.contain is not None:
            settings.load_acp()
            from sidecar.agent.external.prewarm import Prewarmer

            self.prewarmer = Prewarmer(names, self._start_warm, settings.first_cwd)

    def _warmable(self, name: str) -> bool:
        if not self._catalog.knows(name) or name == BUILTIN:
            log.warning("--prewarm %s: no such external agent", name)
            return False
        if self._catalog.get(name).isolated_home:
            log.warning("--prewarm %s: it has a home per session; not prewarmed", name)
            return False
        return True

    async def _start_warm(self, place: Place) -> WarmAgent:
        # Imported here, once ACP's SDK is loaded (launch_for loads it): see load_acp.
        from sidecar.agent.external.connection import start_agent
        from sidecar.agent.external.prewarm import WarmAgent
        from sidecar.agent.external.router import SessionRouter

        defn = self._catalog.get(place.agent)
        launch = launch_for(defn, self._settings, None)
        if isinstance(launch, str):
            raise AgentFailed(launch)
        contain = self._settings.contain
        assert contain is not None
        argv = contain(launch.argv, launch.writable, place.cwd, place.sandbox)
        router = SessionRouter(defn.name)
        process, conn, init = await asyncio.wait_for(
            start_agent(defn.name, argv, launch.env, place.cwd, router), launch.start_timeout
        )
        return WarmAgent(place, process, conn, router, init)

    def __call__(self, record: SessionRecord) -> Engine:
        catalog = self._catalog
        if record.agent == BUILTIN:
            return BuiltinEngine()
        if not catalog.knows(record.agent):
            return UnstartableEngine(
                record.agent, f"agent {record.agent!r} is not configured in this sidecar"
            )
        defn = catalog.get(record.agent)
        launch = launch_for(defn, self._settings, record.session_id)
        if isinstance(launch, str):
            return UnstartableEngine(defn.name, launch)
        self._settings.load_acp()
        from sidecar.agent.external.engine import ExternalEngine
        from sidecar.agent.external.pool import AgentPool

        if self._pool is None:
            self._pool = AgentPool()
        return ExternalEngine(
            defn, record, launch, remember=catalog.remember, prewarm=self.prewarmer, pool=self._pool
        )

    async def aclose(self) -> None:
        """At exit, after every session closed: the warm processes, and any agent process
        still running (none should be: the last session on each stopped it)."""
        if self.prewarmer is not None:
            await self.prewarmer.aclose()
        if self._pool is not None:
            await self._pool.aclose()


def engine_factory(catalog: AgentCatalog, settings: AgentSettings) -> Engines:
    return Engines(catalog, settings)
