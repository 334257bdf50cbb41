"""Wire the sidecar together and run it until stdin closes or a signal arrives."""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import sys

from sidecar.acp_updates import event_notification
from sidecar.config import Config, model_name, open_store, provider_factory
from sidecar.errors import StoreError
from sidecar.events import Event
from sidecar.handlers import AcpHandlers
from sidecar.manager import SessionManager
from sidecar.rpc import RpcServer
from sidecar.runtime import RuntimeDeps
from sidecar.stdio import LineWriter, open_reader, reserve_stdout
from sidecar.store.base import SessionStore
from sidecar.store.unavailable import UnavailableStore

log = logging.getLogger("sidecar")

DRAIN_SECONDS = 5.0


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


async def run(config: Config) -> int:
    protocol_out = reserve_stdout()
    writer = LineWriter(protocol_out)
    await writer.start()
    server = RpcServer(writer)
    store_problem: str | None = None
    try:
        store: SessionStore = open_store(config)
    except StoreError as exc:
        # Stay up and say why on every request: exiting would only make the host restart
        # us in a loop while the client sees a dead pipe.
        store_problem = str(exc)
        log.error("cannot open the session store: %s", exc)
        store = UnavailableStore(store_problem)

    def on_event(session_id: str, event: Event) -> None:
        notification = event_notification(session_id, event)
        if notification is not None:
            server.notify(*notification)

    deps = RuntimeDeps(
        store=store,
        make_provider=provider_factory(config),
        limits=config.limits,
        on_event=on_event,
        context_budget=config.context_budget,
    )
    manager = SessionManager(deps, lease_ttl=config.lease_ttl)
    manager.model_name = lambda: model_name(config)
    manager.store_problem = store_problem
    stop = asyncio.Event()
    AcpHandlers(manager, server, stop.set).register_all()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    try:
        reconciled = manager.reconcile()
    except StoreError as exc:  # e.g. a read-only data dir: reads work, writes do not
        log.error("start-up reconciliation could not write: %s", exc)
        manager.store_problem = str(exc)
        reconciled = []
    manager.start_lease_renewal()
    log.info(
        "sidecar ready: store=%s data_dir=%s provider=%s reconciled=%d open_files=%s",
        config.store,
        config.data_dir,
        config.provider,
        len(reconciled),
        raise_open_file_limit(),
    )
    try:
        reader = await open_reader()
        await server.serve(reader, stop)
    finally:
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
