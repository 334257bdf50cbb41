"""The sandbox self-test, started before the light half is imported.

`initialize` says in its `_meta` when no command could run (bwrap missing, or unable to
create its namespaces). The self-test is a bwrap run of ~10 ms, 20-30 ms on a busy
machine; started from `run()` it finished after `initialize` had arrived about half of
the time, and `initialize` waited for it. Started here, from `python -m sidecar` before
the ~150 ms of the light half's imports, it is done before the first request is read.

The thread imports nothing: `sidecar.agent.sandbox` is imported here first, on the
main thread (two threads never import one package at once; see sidecar/acp/preload.py).
The verdict is cached by `sandbox.probe` per bwrap path, so the heavy half's own probe
is then a cache hit (`started().result()` first, so a slow self-test never runs twice).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from sidecar.agent import sandbox

_lock = threading.Lock()
_probing: Future[sandbox.SandboxStatus] | None = None


def start() -> Future[sandbox.SandboxStatus]:
    """The self-test's future, started on the first call (in a daemon thread: an exit
    never waits for it)."""
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
