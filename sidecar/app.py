"""Run the sidecar until stdin closes or a signal arrives.

Start-up is split so a client is answered at once: the light part (config, store,
the stdio server, `initialize`) runs first, while the heavy half (`sidecar.wiring`)
is imported in a worker thread; aiohttp (`http/deferred.py`) and ACP's schema, which the
first requests (`session/new`, `session/list`, `_session/status`) do not wait for, follow
`PRELOAD_AFTER` later (or sooner, by whatever needs them first). Every other method is
registered from the start and simply waits until the heavy half is built and the store
is reconciled, so no request is refused or reordered by the split; once it is, the real
handlers replace the waiting ones. The sandbox self-test (`sidecar/early_probe.py`)
runs first, and the heavy half's imports start when it is done: `initialize` waits for
its verdict (~10 ms, at most `SANDBOX_WAIT`) to say in its `_meta` that no command could
run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent import futures
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NoReturn

from protocol.methods import ACP_METHODS, EXTENSION_METHODS, Method
from sidecar import early_probe, log_redact
from sidecar.acp import preload
from sidecar.acp.initialize import ClientOptions, initialize_handler
from sidecar.acp.server import RpcServer
from sidecar.acp.stdio import LineWriter, open_reader, reserve_stdout
from sidecar.config import Config, open_store, provider_problem, takes_images
from sidecar.domain.errors import StoreError
from sidecar.http import deferred
from sidecar.store.base import ChangeFeed, SessionStore
from sidecar.store.unavailable import UnavailableStore

if TYPE_CHECKING:
    from sidecar.agent.sandbox import SandboxStatus
    from sidecar.wiring import Assembly

log = logging.getLogger("sidecar")

DRAIN_SECONDS = 5.0
# Seconds after the heavy half is ready before aiohttp and ACP's schema are loaded ahead.
PRELOAD_AFTER = 1.5

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


def _load_heavy() -> type[Assembly]:
    """In a worker thread: import the heavy half (the manager, aiohttp, the handlers),
    what `session/new`, `session/list` and `_session/status` need."""
    from sidecar.wiring import load_assembly

    return load_assembly()


def _settle(future: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _sandbox_verdict(loop: asyncio.AbstractEventLoop) -> asyncio.Future[str | None]:
    """The sandbox self-test's problem (None: commands can be sandboxed), as a future of
    the loop, for `initialize`; the self-test starts now."""
    verdict: asyncio.Future[str | None] = loop.create_future()

    def done(probe: Future[SandboxStatus]) -> None:
        error = probe.exception()
        problem = None if error is not None else early_probe.problem(probe.result())
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(_settle, verdict, problem, error)

    early_probe.start().add_done_callback(done)
    return verdict


def _start_loading(loop: asyncio.AbstractEventLoop) -> asyncio.Future[type[Assembly]]:
    """`_load_heavy` in a daemon thread (not the default executor, which an exit joins),
    once the early sandbox self-test is done (its verdict is then cached: no second run)."""
    future: asyncio.Future[type[Assembly]] = loop.create_future()

    def work() -> None:
        futures.wait([early_probe.start()])
        try:
            result, error = _load_heavy(), None
        except BaseException as exc:  # noqa: BLE001 (handed to the loop, raised there)
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(_settle, future, result, error)
        if error is None:
            # Then, a moment later, what the sessions' listeners serve with (aiohttp) and
            # what the other methods and ACP updates need: not at once, so a window that
            # starts beside us (its WebEngine shares the cores) is not slowed by imports
            # nothing has asked for yet. Code that needs them sooner loads them itself.
            time.sleep(PRELOAD_AFTER)
            deferred.LISTENER.ensure()
            preload.ACP.ensure()

    threading.Thread(target=work, name="heavy-half", daemon=True).start()
    return future


def _deferred(name: str, ready: asyncio.Future[dict[str, Handler]]) -> Handler:
    async def call(params: dict[str, Any]) -> Any:
        table = await asyncio.shield(ready)
        return await table[name](params)

    call.__name__ = name
    return call


async def run(config: Config) -> int:
    loop = asyncio.get_running_loop()
    probing = _sandbox_verdict(loop)
    loading = _start_loading(loop)
    protocol_out = reserve_stdout()
    writer = LineWriter(protocol_out)
    await writer.start()
    server = RpcServer(writer)
    store_problem: str | None = None
    try:
        store: SessionStore = await open_store(config)
    except StoreError as exc:
        # Stay up and say why on every request: exiting would only make the host restart
        # us in a loop while the client sees a dead pipe.
        store_problem = str(exc)
        log.error("cannot open the session store: %s", exc)
        store = UnavailableStore(str(exc))

    ready: asyncio.Future[dict[str, Handler]] = loop.create_future()
    client = ClientOptions()
    provider = provider_problem(config)
    if provider is not None:
        log.warning("the %s provider cannot work: %s", config.provider, provider)
    server.register(
        Method.INITIALIZE,
        initialize_handler(lambda: store_problem, client, provider, probing, takes_images(config)),
    )
    for name in (*ACP_METHODS, *EXTENSION_METHODS):
        if name != Method.INITIALIZE:
            server.register(name, _deferred(name, ready))

    stop = asyncio.Event()
    _signals.stop = lambda: loop.call_soon_threadsafe(stop.set)
    if _signals.received:  # a signal came while we were starting: honour it now
        stop.set()
    reader = await open_reader()
    serving = asyncio.create_task(server.serve(reader, stop))

    assembly: Assembly | None = None
    changes: asyncio.Task[None] | None = None
    try:
        first: set[asyncio.Future[Any]] = {loading, serving}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if not loading.done():
            await asyncio.sleep(0)  # let the last lines read reach their handlers
            if not server.in_flight():
                # The client left (or a signal came) before the heavy half loaded, and no
                # request waits for it: nothing to build, nothing to close. The loader is a
                # daemon thread, so the exit does not wait for its imports either.
                return 0
        assembly_type = await loading
        assembly = assembly_type.build(config, store, server, client, stop.set)
        try:
            await assembly.leases.sync(store)  # leases are judged on the store's clock
            reconciled = await assembly.manager.reconcile()
        except StoreError as exc:  # e.g. a read-only data dir: reads work, writes do not
            log.error("start-up reconciliation could not write: %s", exc)
            store_problem = str(exc)
            reconciled = []
        assembly.manager.start_lease_renewal()
        assembly.start_agents()
        if isinstance(store, ChangeFeed):  # other sidecars' changes, told to our clients
            changes = asyncio.create_task(
                store.watch_changes(assembly.manager.changed_elsewhere), name="store-changes"
            )
        ready.set_result(assembly.handlers)
        for name, handler in assembly.handlers.items():
            if name != Method.INITIALIZE:
                server.register(name, handler)  # from now on, no hop through `_deferred`
        open_files = raise_open_file_limit()
        log.info(
            "sidecar ready: store=%s data_dir=%s provider=%s reconciled=%d open_files=%s",
            config.store,
            config.data_dir,
            config.provider,
            len(reconciled),
            open_files,
        )
        await serving
    finally:
        if not ready.done():
            ready.cancel()
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        if assembly is not None:
            log.info("shutting down: closing %d live session(s)", len(assembly.manager.live_ids()))
            await assembly.manager.shutdown()
            await assembly.stop_agents()
        await server.drain(DRAIN_SECONDS)
        await writer.aclose()
        if changes is not None:
            changes.cancel()
            await asyncio.gather(changes, return_exceptions=True)
        await store.close()
        _signals.stop = None
    return 0


class _Signals:
    """SIGTERM and SIGINT mean "close every session and exit 0", from the first moment to
    the last. Installed with `signal.signal` before the event loop runs and never removed
    (the loop's own handlers are reset to the default when it closes, and a SIGTERM in the
    interpreter's teardown would then kill the process: exit -15 after a clean shutdown)."""

    def __init__(self) -> None:
        self.stop: Callable[[], object] | None = None
        self.received = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.received = True
        stop = self.stop
        if stop is None:
            return  # not serving yet, or already shutting down: the exit is on its way
        try:
            stop()
        except RuntimeError:  # the loop just closed: nothing left to stop
            self.stop = None


_signals = _Signals()


def main(config: Config) -> int:
    logging.basicConfig(
        level=config.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log_redact.register_configured(config.database_url, config.base_url)
    log_redact.install()  # every library's records too: their messages quote what they got
    _signals.install()
    return asyncio.run(run(config))


def exit_now(code: int) -> NoReturn:
    """Leave without the interpreter's teardown: every session is already closed and
    every write flushed, and finalisation resets signal handlers to the default, so a
    SIGTERM in its ~100 ms (a client that closes stdin and then signals) would turn a
    clean shutdown into exit -15."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
