"""Wire the sidecar together and run it until stdin closes or a signal arrives.

Start-up is split so a client is answered at once: the light part (config, store,
the stdio server, `initialize`) runs first, while the heavy imports (ACP's schema,
aiohttp, the provider SDKs; together about 0.6 s) load in a worker thread. Every
other method is registered from the start and simply waits until they are loaded
and the store is reconciled, so no request is refused or reordered by the split.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import resource
import signal
import sys
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from protocol.methods import ACP_METHODS, EXTENSION_METHODS, Method
from sidecar.agent.providers.base import Provider
from sidecar.config import Config, open_store
from sidecar.errors import StoreError
from sidecar.initialize import initialize_handler
from sidecar.records import SessionRecord
from sidecar.rpc import RpcServer
from sidecar.stdio import LineWriter, open_reader, reserve_stdout
from sidecar.store.base import SessionStore
from sidecar.store.unavailable import UnavailableStore

log = logging.getLogger("sidecar")

DRAIN_SECONDS = 5.0
HEAVY_MODULES = ("sidecar.handlers", "sidecar.acp_updates", "sidecar.manager")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def raise_open_file_limit() -> int:
    """Every live session holds a listening socket: lift the soft limit on open files
    toward the hard one (1,024 is a common default). Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %s: %s", soft, exc)
    return soft


def _load(config: Config) -> tuple[list[ModuleType], Callable[[SessionRecord], Provider]]:
    """In a worker thread: the heavy modules, and the provider factory (its SDK)."""
    from sidecar.config import provider_factory

    modules = [importlib.import_module(name) for name in HEAVY_MODULES]
    return modules, provider_factory(config)


def _deferred(name: str, ready: asyncio.Future[dict[str, Handler]]) -> Handler:
    async def call(params: dict[str, Any]) -> Any:
        table = await asyncio.shield(ready)
        return await table[name](params)

    call.__name__ = name
    return call


async def run(config: Config) -> int:
    loop = asyncio.get_running_loop()
    loading = loop.run_in_executor(None, _load, config)
    protocol_out = reserve_stdout()
    writer = LineWriter(protocol_out)
    await writer.start()
    server = RpcServer(writer)
    store_problem: list[str | None] = [None]
    try:
        store: SessionStore = open_store(config)
    except StoreError as exc:
        # Stay up and say why on every request: exiting would only make the host restart
        # us in a loop while the client sees a dead pipe.
        store_problem[0] = str(exc)
        log.error("cannot open the session store: %s", exc)
        store = UnavailableStore(str(exc))

    ready: asyncio.Future[dict[str, Handler]] = loop.create_future()
    server.register(Method.INITIALIZE, initialize_handler(lambda: store_problem[0]))
    for name in (*ACP_METHODS, *EXTENSION_METHODS):
        if name != Method.INITIALIZE:
            server.register(name, _deferred(name, ready))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reader = await open_reader()
    serving = asyncio.create_task(server.serve(reader, stop))

    manager: Any = None
    try:
        (handlers_module, updates, manager_module), make_provider = await loading
        from sidecar.config import model_name
        from sidecar.runtime import RuntimeDeps

        def on_event(session_id: str, event: Any) -> None:
            notification = updates.event_notification(session_id, event)
            if notification is not None:
                server.notify(*notification)

        deps = RuntimeDeps(
            store=store,
            make_provider=make_provider,
            limits=config.limits,
            on_event=on_event,
            context_budget=config.context_budget,
        )
        manager = manager_module.SessionManager(deps, lease_ttl=config.lease_ttl)
        manager.model_name = lambda: model_name(config)
        manager.store_problem = store_problem[0]
        try:
            reconciled = manager.reconcile()
        except StoreError as exc:  # e.g. a read-only data dir: reads work, writes do not
            log.error("start-up reconciliation could not write: %s", exc)
            manager.store_problem = store_problem[0] = str(exc)
            reconciled = []
        manager.start_lease_renewal()
        ready.set_result(handlers_module.AcpHandlers(manager, server, stop.set).table())
        log.info(
            "sidecar ready: store=%s data_dir=%s provider=%s reconciled=%d open_files=%s",
            config.store,
            config.data_dir,
            config.provider,
            len(reconciled),
            raise_open_file_limit(),
        )
        await serving
    finally:
        if not ready.done():
            ready.cancel()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        if manager is not None:
            log.info("shutting down: closing %d live session(s)", len(manager.live_ids()))
            await manager.shutdown()
        await server.drain(DRAIN_SECONDS)
        await writer.aclose()
        store.close()
    return 0


def main(config: Config) -> int:
    logging.basicConfig(
        level=config.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(run(config))
