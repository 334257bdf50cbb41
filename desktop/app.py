"""The desktop main process: a host loop thread that owns the sidecar, and the window.

Qt must own the main thread, so the asyncio loop that owns `SidecarHost` runs on a
background thread (`HostThread`). The page reaches it only through the js_api bridge,
which submits coroutines to that loop; the loop reaches the page only by queueing
pushes (`WindowManager.push`). Quitting -- the user closing the last window, or
SIGTERM/SIGINT -- leaves the GUI loop, then `SidecarHost.shutdown()` closes every live
session (records kept) and waits for the sidecar to exit, so no child is left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from desktop.attention import Attention, Happened
from desktop.host import SidecarHost
from desktop.live import LiveOutputs
from desktop.notify import Notifier
from desktop.settings import Settings
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")
HOST_START_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 25.0
LINGER_GRACE = 3.0


@dataclass(frozen=True)
class AppOptions:
    sidecar_args: list[str] = field(default_factory=list)
    default_cwd: str = field(default_factory=os.getcwd)
    title: str = "ACP Session Host"
    size: tuple[int, int] = (1200, 780)
    config_dir: Path | None = None  # the window's preferences (default: the user config dir)
    auto_resume: bool = True  # resume the sessions that were live when the app last ran


class HostThread:
    """An asyncio loop on a background thread, owning one `SidecarHost`."""

    def __init__(self, sidecar_args: list[str]) -> None:
        self.host = SidecarHost(sidecar_args)
        self.loop = asyncio.new_event_loop()
        self.sidecar_state = "starting"  # running | restarting | failed | stopped
        self.host.on_host_event(self._track)
        self._thread = threading.Thread(target=self._run, name="sidecar-host", daemon=True)

    def _track(self, kind: str, data: dict[str, Any]) -> None:
        self.sidecar_state = {
            "sidecar_started": "running",
            "sidecar_restarted": "running",
            "sidecar_exited": "restarting",
            "sidecar_failed": "failed",
        }.get(kind, self.sidecar_state)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def start(self) -> concurrent.futures.Future[None]:
        """Start the loop, and the sidecar on it; the future settles once the sidecar has
        answered `initialize` (or could not start). Requests wait for it meanwhile."""
        self._thread.start()
        return self.submit(self.host.start())

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coro` on the host loop and wait (bounded) for its result."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:.0f} s") from None

    def stop(self) -> None:
        """Close every live session and the sidecar, then stop the loop."""
        if not self._thread.is_alive():
            return
        try:
            self.call(self.host.shutdown(), SHUTDOWN_TIMEOUT)
        except (TimeoutError, OSError, RuntimeError) as exc:
            log.error("sidecar shutdown did not finish cleanly: %s", exc)
            client = self.host.client
            if client is not None:
                client.kill()
        self.sidecar_state = "stopped"
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


class DesktopApp:
    """Wires the host thread, the bridge and the windows; `run()` is the whole app."""

    def __init__(self, options: AppOptions) -> None:
        # Imported here so `python -m desktop --tui` never needs Qt.
        from desktop.bridge import Bridge
        from desktop.window import WindowManager

        self.options = options
        self.host_thread = HostThread(options.sidecar_args)
        self.windows = WindowManager(
            lambda page_id: Bridge(self, page_id), options.title, options.size
        )
        self._quit_requested = threading.Event()
        self._start_failed = False
        self.live = LiveOutputs()
        self.settings = Settings(options.config_dir)
        # Live sessions, from `_session/state`: kept in the settings as they change, so
        # the next start (or a restarted sidecar) can resume them.
        self._store = _data_dir(options.sidecar_args)
        self._live: set[str] = set(self.settings.last_live(self._store))
        self._live_lock = threading.Lock()
        self._quitting = False
        self._resume_after_restart: set[str] = set()
        # The last auto-resume's outcome while no page listened (it may finish before the
        # first page does): given to the next page that attaches, once.
        self._auto_resumed: dict[str, Any] | None = None
        # What a page would lose on Rebuild UI: per-session drafts, the selected session,
        # scroll positions, the focused control, the unseen sessions (set by the page
        # through the bridge).
        self.memory: dict[str, Any] = {
            "drafts": {},
            "selected": None,
            "scroll": {},
            "focus": None,
            "unseen": [],  # sessions with a turn the user has not seen (the waiting count)
        }
        # Notifications: sent while no page of ours has the focus (the page says when it
        # gains and loses it), unless the preference is off; a click selects the session.
        self.focused = True
        self.attention = Attention()
        self.notifier = Notifier(self._notification_clicked)
        self._sends: set[asyncio.Task[bool]] = set()
        self.plans: dict[str, list[dict[str, Any]]] = {}  # sessionId -> its latest plan
        self.host_thread.host.on_notification(self._push_notification)
        self.host_thread.host.on_host_event(self._push_host_event)

    @property
    def host(self) -> SidecarHost:
        return self.host_thread.host

    def _push_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "_session/state" and isinstance(params.get("sessionId"), str):
            self._track_live(params["sessionId"], bool(params.get("live")))
            happened = self.attention.observe(params)
            if happened is not None:
                self._tell(happened)
        elif method == "session/update":
            self._keep_plan(params)
        params = self.live.observe(method, params)
        self.windows.push({"type": "notification", "method": method, "params": params})

    def _push_host_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind in ("sidecar_restarted", "sidecar_failed"):
            log.warning("%s: %s", kind, {k: v for k, v in data.items() if k != "stderr"})
        if kind == "sidecar_exited":
            with self._live_lock:  # what the dead sidecar had live; resumed by the next one
                self._resume_after_restart |= self._live
        self.windows.push({"type": "host", "event": kind, "data": data})
        if kind == "sidecar_restarted" and self.options.auto_resume and not self._quitting:
            with self._live_lock:
                ids, self._resume_after_restart = sorted(self._resume_after_restart), set()
            if ids:
                self.host_thread.submit(self._auto_resume(ids, "sidecar"))

    # ---- notifications and plans -------------------------------------------------------

    def _tell(self, happened: Happened) -> None:
        """A system notification, if the user is looking elsewhere and wants them (runs on
        the host loop: the notifier's bus lives there)."""
        if self.focused or not self.settings.notifications:
            return
        send = self.notifier.send(happened.title, happened.body, happened.session_id)
        task = self.host_thread.loop.create_task(send)
        self._sends.add(task)  # kept until done (the loop holds tasks weakly)
        task.add_done_callback(self._sends.discard)

    def _notification_clicked(self, session_id: str) -> None:
        self.windows.focus()
        self.push_bridge_event("select_session", {"sessionId": session_id})

    def _keep_plan(self, params: dict[str, Any]) -> None:
        """The latest `plan` update per session (the page asks for it after a rebuild)."""
        update = params.get("update")
        session_id = params.get("sessionId")
        if (
            isinstance(update, dict)
            and update.get("sessionUpdate") == "plan"
            and isinstance(session_id, str)
            and isinstance(update.get("entries"), list)
        ):
            self.plans[session_id] = update["entries"]

    # ---- coming back as you left -------------------------------------------------------

    def _track_live(self, session_id: str, live: bool) -> None:
        with self._live_lock:
            if self._quitting:
                return  # quitting closes them all; they stay listed to come back next time
            if live:
                self._live.add(session_id)
            else:
                self._live.discard(session_id)
            ids = sorted(self._live)
        self.settings.set_last_live(self._store, ids)

    async def _auto_resume(self, ids: list[str], why: str) -> None:
        """Resume the sessions that were live before (the app quit, or the sidecar died);
        the page gets one `auto_resumed` event saying which, and which were interrupted."""
        from desktop import sessions
        from desktop.client import RpcError, SidecarGone

        resumed: list[str] = []
        interrupted: list[str] = []
        failed: list[dict[str, str]] = []
        for session_id in ids:
            try:
                summary = await sessions.resume(self.host, session_id)
            except RpcError as exc:
                if exc.code != ErrorCode.SESSION_NOT_FOUND:
                    failed.append({"sessionId": session_id, "error": exc.message})
                with self._live_lock:
                    self._live.discard(session_id)
                continue
            except (SidecarGone, ConnectionError, OSError) as exc:
                log.warning("auto-resume stopped: %s", exc)
                return
            resumed.append(session_id)
            if summary.get("interrupted"):
                interrupted.append(session_id)
        log.info(
            "auto-resumed %d session(s) after %s (%d interrupted, %d failed)",
            len(resumed),
            why,
            len(interrupted),
            len(failed),
        )
        outcome = {"why": why, "resumed": resumed, "interrupted": interrupted, "failed": failed}
        with self._live_lock:  # said once: to the listening page, else to the next one
            if not self.push_bridge_event("auto_resumed", outcome):
                self._auto_resumed = outcome

    def attach_page(self, page_id: str) -> dict[str, Any] | None:
        """A page listens from now on; the last auto-resume's outcome if no page has been
        told yet (a rebuilt page is not told again)."""
        with self._live_lock:
            self.windows.attach(page_id)
            outcome, self._auto_resumed = self._auto_resumed, None
        return outcome

    def push_bridge_event(self, event: str, data: dict[str, Any]) -> bool:
        """Push to the pages; whether a listening page got it."""
        return self.windows.push({"type": "bridge", "event": event, "data": data})

    def run(self, on_started: Callable[[DesktopApp], None] | None = None) -> int:
        """Start the sidecar, show the window, block until the app quits; exit code.

        `on_started` runs on pywebview's worker thread once the GUI loop runs (the test
        driver's scenarios use it).
        """
        import webview

        if os.geteuid() == 0:
            # Chromium refuses to run its sandbox as root; without this WebEngine aborts.
            os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
        # The sidecar starts while Qt and the page load (the page's first requests wait
        # for it): neither start is on the other's critical path.
        starting = self.host_thread.start()
        self.windows.open_first()
        previous = signal.signal(signal.SIGTERM, self._on_signal)
        try:
            webview.start(self._started, (starting, on_started), gui="qt", private_mode=True)
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.windows.release()
            self.shutdown()
        return 1 if self._start_failed else 0

    def _sidecar_started(self, starting: concurrent.futures.Future[None]) -> bool:
        """Wait for the sidecar's start; False (said in the log) if it could not start."""
        from desktop.client import RpcError

        try:
            starting.result(HOST_START_TIMEOUT)
        except (OSError, TimeoutError, ConnectionError, RpcError) as exc:
            client = self.host.client
            tail = "\n".join(list(client.stderr_tail)[-15:]) if client else ""
            log.error("the sidecar could not start: %s\n%s", exc, tail)
            self._start_failed = True
            return False
        log.info("sidecar running (pid %s)", self.host.pid)
        if self.options.auto_resume:
            with self._live_lock:
                ids = sorted(self._live)
            if ids:
                self.host_thread.submit(self._auto_resume(ids, "start"))
        return True

    def _started(
        self,
        starting: concurrent.futures.Future[None],
        on_started: Callable[[DesktopApp], None] | None,
    ) -> None:
        if not self._sidecar_started(starting):
            self.windows.close_all()
            return
        self.windows.current.events.shown.wait(30)
        if self._quit_requested.is_set():  # a signal came before Qt could take it
            self.windows.close_all()
            return
        if on_started is not None:
            on_started(self)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: quitting", signal.Signals(signum).name)
        self._quit_requested.set()
        self.windows.request_quit()

    def shutdown(self) -> None:
        """Stop pushing to pages, then close every session and the sidecar."""
        with self._live_lock:
            self._quitting = True  # the live list is kept as it is now, for the next start
        self.windows.stop_pushing()
        if self.host_thread.loop.is_running():
            self.host_thread.loop.call_soon_threadsafe(self.notifier.close)
        started = time.monotonic()
        self.host_thread.stop()
        log.info("sidecar stopped in %.2f s; quitting", time.monotonic() - started)


def _data_dir(sidecar_args: list[str]) -> str:
    """Which sessions database the sidecar uses (the key of the remembered live sessions)."""
    for i, arg in enumerate(sidecar_args):
        if arg == "--data-dir" and i + 1 < len(sidecar_args):
            return os.path.abspath(sidecar_args[i + 1])
        if arg.startswith("--data-dir="):
            return os.path.abspath(arg.split("=", 1)[1])
    return (
        os.path.abspath(os.environ["SIDECAR_DATA_DIR"])
        if os.environ.get("SIDECAR_DATA_DIR")
        else ""
    )


def exit_when_threads_finish(code: int) -> int:
    """Return `code`, or leave at once if GUI helper threads would keep a quit app alive.

    pywebview answers every js_api call from a non-daemon thread that waits for the
    GUI thread; one caught by a window's destruction would block interpreter exit
    forever. Everything that matters (the sidecar, its sessions) is already closed.
    """
    deadline = time.monotonic() + LINGER_GRACE
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    lingering = [t.name for t in threading.enumerate() if t.is_alive() and not t.daemon]
    lingering = [name for name in lingering if name != threading.main_thread().name]
    if lingering:
        log.warning("threads still waiting on the closed GUI: %s; exiting anyway", lingering)
        logging.shutdown()
        os._exit(code)
    return code
