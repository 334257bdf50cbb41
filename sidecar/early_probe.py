"""The sandbox self-test, once per process, before the heavy half is imported.

`initialize` says in its `_meta` when no command could run (bwrap missing, or unable to
create its namespaces), so it waits for this verdict. The self-test is one bwrap run
(~10 ms; 13 ms wall, 3 ms CPU here; 20-30 ms on a busy machine). `run()` starts it in
its own thread as it begins, and the start-up thread imports the heavy half only once
it is done, so the bwrap run and its cached verdict are shared.

Where it starts was measured (spawn to `initialize` answered, 150-200 interleaved spawns
of each variant on a shared, busy 2-core machine): before, with no verdict, a median of
264 and 302 ms in two runs; started from `python -m sidecar`, before the light half's
imports (done by the first request every time, but competing with those imports), 279
ms against 264; started here, from `run()`, 218 and 234 ms although `initialize` then
waits for it about half the time: probably because the heavy half's imports no longer
compete for the GIL with the answer meanwhile.

The thread imports nothing: `sidecar.agent.sandbox` is imported with this module, on the
main thread (two threads never import one package at once; see sidecar/acp/preload.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from sidecar.agent import sandbox

_lock = threading.Lock()
_probing: Future[sandbox.SandboxStatus] | None = None


def start() -> Future[sandbox.SandboxStatus]:
    """The self-test's future, started on the first call (in a daemon thread: an exit
    never waits for it). `sandbox.probe` caches the verdict per bwrap path, so the heavy
    half's own probe is a cache hit once this is done."""
    global _probing
    with _lock:
        if _probing is not None:
            return _probing
        probing: Future[sandbox.SandboxStatus] = Future()
        _probing = probing

    def work() -> None:
        try:
            probing.set_result(sandbox.probe())
        except BaseException as exc:  # noqa: BLE001 (handed to whoever waits)
            probing.set_exception(exc)

    threading.Thread(target=work, name="sandbox-probe", daemon=True).start()
    return probing


def problem(status: sandbox.SandboxStatus) -> str | None:
    """What `initialize` says: None when commands can be sandboxed."""
    return None if status.available else status.reason or "bwrap did not pass its self-test"
