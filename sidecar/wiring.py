"""The typed wiring of the sidecar's heavy half: the manager, its runtimes' listeners and
providers, and the ACP handlers, built in one place with every dependency passed in.

The heavy modules (the core, the edges' handlers, our wire models) are
imported by `load_assembly()` in a worker thread while the light half already answers
`initialize`; `Assembly.build` then constructs everything on the event loop. mypy
checks every constructor call here, as in any other module.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.values import Sandbox
from sidecar.acp import preload
from sidecar.acp.extensions import ExtensionHandlers
from sidecar.acp.handlers import AcpHandlers
from sidecar.acp.initialize import ClientOptions
from sidecar.acp.notifier import AcpNotifier
from sidecar.acp.permissions import make_asker
from sidecar.acp.server import Handler, RpcServer
from sidecar.agent import sandbox
from sidecar.agent.external.catalog import AgentCatalog
from sidecar.agent.external.definitions import AgentConfigError
from sidecar.agent.external.factory import AgentSettings, Engines, engine_factory
from sidecar.agent.providers.catalog import ModelCatalog
from sidecar.config import (
    Config,
    checkpoint_store,
    hidden_dirs,
    model_lister,
    model_name,
    output_spools,
    provider_factory,
)
from sidecar.core.events import EventHub
from sidecar.core.leases import Leases, this_process
from sidecar.core.manager import ManagerDeps, SessionManager
from sidecar.core.mcp_tools import McpSettings
from sidecar.core.runtime import RuntimeDeps
from sidecar.core.views import SessionView
from sidecar.domain.records import SessionRecord
from sidecar.http.deferred import open_listener
from sidecar.store.base import SessionStore
from sidecar.store.images import ImageStore

log = logging.getLogger(__name__)


def agent_catalog(config: Config) -> AgentCatalog:
    """Presets, agents.toml, --agent. A broken agents.toml is logged and left out (the
    sidecar still serves every other session)."""
    try:
        return AgentCatalog.load(config.agents_file, config.agents)
    except AgentConfigError as exc:
        log.error("agents: %s (the file's agents are left out)", exc)
        return AgentCatalog.load(None, config.agents)


def agent_settings(config: Config, probed: sandbox.SandboxStatus) -> AgentSettings:
    hide = hidden_dirs(config)

    def contain(argv: Sequence[str], writable: Sequence[str], cwd: str, mode: Sandbox) -> list[str]:
        """A warm agent process in the sandbox a session at `cwd` under `mode` gets."""
        bwrap = sandbox.require(probed)
        return sandbox.wrap(
            argv,
            mode=mode,
            cwd=cwd,
            bwrap=bwrap,
            hide=hide,
            writable=writable,
            network=True,
            readable=sandbox.program_roots(argv),
        )

    return AgentSettings(
        start_timeout=config.agent_start_timeout,
        interrupt_grace=config.limits.interrupt_grace,
        homes=config.data_dir / "agent-homes",
        prewarm=config.prewarm,
        contain=contain,
        load_acp=preload.ACP.ensure,
    )


@dataclass(frozen=True, slots=True)
class Assembly:
    manager: SessionManager
    handlers: dict[str, Handler]
    leases: Leases
    engines: Engines | None = None

    def start_agents(self) -> None:
        """Warm processes (--prewarm) start once the store is open and the loop runs."""
        if self.engines is not None and self.engines.prewarmer is not None:
            self.engines.prewarmer.begin()

    async def stop_agents(self) -> None:
        """At exit, after every session closed: the warm processes stop too."""
        if self.engines is not None:
            await self.engines.aclose()

    @classmethod
    def build(
        cls,
        config: Config,
        store: SessionStore,
        server: RpcServer,
        client: ClientOptions,
        request_shutdown: Callable[[], None],
    ) -> Assembly:
        manager: SessionManager | None = None
        leases = Leases(config.lease_ttl, this_process(config.host_id or None))

        def view_of(record: SessionRecord) -> SessionView:
            assert manager is not None
            return manager.view_of(record)

        notify = AcpNotifier(server.notify, client, view_of, config.limits.stream_cap)
        agents = agent_catalog(config)
        probed = sandbox.probe()
        engines = engine_factory(agents, agent_settings(config, probed))

        manager = SessionManager(
            ManagerDeps(
                runtime=RuntimeDeps(
                    store=store,
                    make_provider=provider_factory(config),
                    limits=config.limits,
                    open_listener=open_listener,
                    context_budget=config.context_budget,
                    sandbox=probed,
                    asker=make_asker(server),
                    mcp=McpSettings(config.mcp_start_timeout, config.mcp_call_timeout),
                    checkpoints=checkpoint_store(config),
                    spools=output_spools(config),
                    images=ImageStore(config.data_dir / "images"),
                    hide=hidden_dirs(config),
                    make_engine=engines,
                    knows_agent=agents.knows,
                ),
                events=EventHub(notify),
                leases=leases,
                model_name=model_name(config),
                worktree_repos=config.data_dir / "worktree-repos.txt",
            )
        )
        catalog = ModelCatalog(model_lister(config), model_name(config))
        extensions = ExtensionHandlers(manager, server, request_shutdown, agents)
        handlers = {
            **AcpHandlers(manager, server, catalog, extensions, agents).table(),
            **extensions.table(),
        }
        return cls(manager, handlers, leases, engines)


def load_assembly() -> type[Assembly]:
    """Runs in a worker thread: importing this module is what loads the heavy half; the
    sandbox self-test (bwrap, ~10 ms, cached) runs off the event loop too (sidecar/app.py
    has it run first, so `initialize` can say it: this is then the cached verdict)."""
    sandbox.probe()
    return Assembly
