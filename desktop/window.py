"""Windows inside one `webview.start()`: open, rebuild, close, and push events into pages.

pywebview can run its GUI loop once per process (a second `webview.start()` crashes),
so "rebuild the UI" never restarts anything: it loads the page again in the same window
(a fresh document and script state, its js_api injected again by pywebview once it has
loaded), which rebuilds itself from the sidecar. The window -- its WebEngine view, size
and place -- stays: a new one cost ~0.3 s more and changed nothing the user sees.

Sidecar notifications reach a page through a `PagePusher`: a queue and a thread per
page that batches whatever arrived and hands it to `window.app.onPush([...])`. The
host's event loop only ever enqueues (never blocks on the GUI thread), and a page
that is being destroyed can stall only its own pusher, never the next page's.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import webview
from qtpy import QtCore
from qtpy.QtWidgets import QApplication

from desktop import page as ui_page

log = logging.getLogger(__name__)

PAGE_LOAD_TIMEOUT = 30.0
PUSH_BATCH = 200
T = TypeVar("T")


class GuiInvoker(QtCore.QObject):
    """Runs a callable on the Qt main thread (Qt objects must only be touched there).

    Created on the main thread before `webview.start()`; a signal emitted from any
    other thread is queued to the main thread's event loop once it runs.
    """

    requested = QtCore.Signal(object)  # type: ignore[attr-defined]  # qtpy alias, set at runtime

    def __init__(self) -> None:
        super().__init__()
        self.requested.connect(self._run)

    def _run(self, fn: Callable[[], None]) -> None:
        fn()

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `fn` on the GUI thread and return its result (raises what it raised)."""
        if threading.current_thread() is threading.main_thread():
            return fn()
        done = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["value"] = fn()
            except Exception as exc:  # noqa: BLE001 (handed back to the calling thread)
                outcome["error"] = exc
            finally:
                done.set()

        self.requested.emit(run)
        if not done.wait(timeout):
            raise TimeoutError("the GUI thread did not run the call in time")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]  # type: ignore[no-any-return]


class PagePusher:
    """Delivers pushed events to one page, in order, in batches, off the host's loop."""

    def __init__(self, window: webview.Window, page_id: str) -> None:
        self.window = window
        self.page_id = page_id
        self._queue: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._attached = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"push-{page_id}", daemon=True)
        self._thread.start()

    def attach(self) -> None:
        """The page is listening; from now on events are queued for it."""
        self._attached.set()

    def push(self, event: dict[str, Any]) -> bool:
        """Queue `event` if the page listens; False if it does not (yet, or any more)."""
        # Before the page attached, it has not fetched its state yet: nothing to miss.
        if self._attached.is_set() and not self._stopped.is_set():
            self._queue.put(event)
            return True
        return False

    def detach(self) -> None:
        """The page is being loaded again: nothing is queued for it until the new document
        attaches (`page_ready`), and what was queued is dropped (the new document fetches
        everything after attaching, so it misses nothing)."""
        self._attached.clear()
        with contextlib.suppress(queue.Empty):
            while True:
                if self._queue.get_nowait() is None:  # stopped meanwhile: keep it stopped
                    self._queue.put(None)
                    return

    def stop(self) -> None:
        self._stopped.set()
        self._queue.put(None)

    def _run(self) -> None:
        while not self._stopped.is_set():
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            with contextlib.suppress(queue.Empty):
                while len(batch) < PUSH_BATCH:
                    item = self._queue.get_nowait()
                    if item is None:
                        return
                    batch.append(item)
            # json.dumps is a safe JS literal: ensure_ascii escapes U+2028/2029 too.
            script = f"window.app && window.app.onPush({json.dumps(batch, default=str)})"
            try:
                self.window.run_js(script)
            except Exception:  # noqa: BLE001 (a page going away must not kill the pusher)
                log.debug("push to page %s failed", self.page_id, exc_info=True)


@dataclass
class Page:
    page_id: str
    window: webview.Window
    pusher: PagePusher


ApiFactory = Callable[[str], Any]


class WindowManager:
    """Owns the app's window(s): the first one, rebuilds, pushes, and quitting."""

    def __init__(self, api_factory: ApiFactory, title: str, size: tuple[int, int]) -> None:
        self._api_factory = api_factory
        self._title = title
        self._size = size
        self._ids = itertools.count(1)
        self._pages: dict[str, Page] = {}
        self._current: Page | None = None
        self._early_attach: set[str] = set()
        self._lock = threading.Lock()
        self._rebuild_lock = threading.Lock()
        self.gui = GuiInvoker()
        self.rebuilds = 0

    # ---- windows ------------------------------------------------------------------------

    @property
    def current(self) -> webview.Window:
        with self._lock:
            if self._current is None:
                raise RuntimeError("no window is open")
            return self._current.window

    def open_first(self) -> webview.Window:
        """The window `webview.start()` will show (call on the main thread, before start)."""
        return self._open().window

    def _open(self) -> Page:
        page_id = f"page{next(self._ids)}"
        width, height = self._size
        window = webview.create_window(
            self._title,
            html=ui_page.page(),  # one document: no request to pywebview's server
            js_api=self._api_factory(page_id),
            width=width,
            height=height,
            min_size=(760, 480),
            background_color="#F6F7F9",
            text_select=True,
        )
        if window is None:
            raise RuntimeError("pywebview refused to create the window")
        page = Page(page_id, window, PagePusher(window, page_id))
        window.events.closed += lambda: self._forget(page)
        with self._lock:
            self._pages[page_id] = page
            self._current = page
            early = page_id in self._early_attach
        if early:
            page.pusher.attach()
        return page

    def _forget(self, page: Page) -> None:
        page.pusher.stop()
        with self._lock:
            self._pages.pop(page.page_id, None)
            if self._current is page:
                self._current = next(iter(self._pages.values()), None)

    def rebuild(self) -> None:
        """Load the page again in the same window; sessions are untouched.

        Runs on a worker thread (it waits for the load). What the old document was sent
        and had not handled is dropped with it: the new one asks the sidecar for
        everything once it is ready for pushes.
        """
        with self._rebuild_lock:
            with self._lock:
                page = self._current
            if page is None:
                return
            started = time.monotonic()
            page.pusher.detach()
            page.window.load_html(ui_page.page())
            if not page.window.events.loaded.wait(PAGE_LOAD_TIMEOUT):
                log.error("the page did not load again in %.0f s", PAGE_LOAD_TIMEOUT)
                return
            self.rebuilds += 1
            log.info("UI rebuilt: %s in %.2f s", page.page_id, time.monotonic() - started)

    def close_all(self) -> None:
        """Close every window, as a user closing the last one would: the app quits."""
        with self._lock:
            pages = list(self._pages.values())
        for page in pages:
            page.window.destroy()

    def release(self) -> None:
        """After the GUI loop (main thread): run the deletions the closed windows asked for,
        so each page goes before its profile. pywebview deletes a page with `deleteLater`
        and leaves the loop at once; left to interpreter exit, the profile went first and
        Qt warned "Release of profile requested but WebEnginePage still not deleted"."""
        if QApplication.instance() is None:
            return
        QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
        with self._lock:
            pages = list(self._pages.values())
        for page in pages:  # a window still open (quit by signal): its page goes first too
            native = page.window.native
            view = getattr(native, "webview", None)
            web_page = view.page() if view is not None else None
            if web_page is not None:
                web_page.deleteLater()
        QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
        _delete_pages_then_profiles()

    def request_quit(self) -> bool:
        """Leave the GUI loop (from a signal handler, on the main thread); False if no loop.

        Posted rather than called: `quit()` before `exec()` runs would be a no-op.
        """
        app = QApplication.instance()
        if app is None:
            return False
        QtCore.QTimer.singleShot(0, app.quit)
        return True

    def focus(self) -> None:
        """Bring the window to the front (a notification was clicked); never waits."""

        def run() -> None:
            with self._lock:
                page = self._current
            native = page.window.native if page is not None else None
            if native is None:
                return
            if native.isMinimized():
                native.showNormal()
            native.show()
            native.raise_()
            native.activateWindow()

        self.gui.requested.emit(run)

    def set_title(self, waiting: int) -> None:
        """The window's title, with how many sessions wait for the user."""
        title = f"({waiting}) {self._title}" if waiting > 0 else self._title
        with self._lock:
            pages = list(self._pages.values())
        for page in pages:
            try:
                page.window.set_title(title)
            except Exception:  # noqa: BLE001 (a window mid-teardown keeps its title)
                log.debug("could not set the title of page %s", page.page_id, exc_info=True)

    # ---- pushes -------------------------------------------------------------------------

    def attach(self, page_id: str) -> None:
        """The page called `page_ready`: start pushing to it."""
        with self._lock:
            page = self._pages.get(page_id)
            if page is None:  # it loaded before `_open` had registered it
                self._early_attach.add(page_id)
        if page is not None:
            page.pusher.attach()
        log.info("page %s ready", page_id)

    def push(self, event: dict[str, Any]) -> bool:
        """Queue an event for every open page (thread-safe, never blocks); whether any
        page that listens got it."""
        with self._lock:
            pages = list(self._pages.values())
        delivered = [page.pusher.push(event) for page in pages]
        return any(delivered)

    def stop_pushing(self) -> None:
        with self._lock:
            pages = list(self._pages.values())
        for page in pages:
            page.pusher.stop()


def _delete_pages_then_profiles() -> None:
    """Any page still alive (a deferred delete Qt did not run: seen now and then with 30
    sessions) is deleted now, then the profiles, so no profile outlives one of its pages
    when the interpreter tears the rest down in whatever order."""
    import gc

    from qtpy import sip
    from qtpy.QtWebEngineCore import QWebEnginePage, QWebEngineProfile

    alive = [o for o in gc.get_objects() if isinstance(o, QWebEnginePage | QWebEngineProfile)]
    pages = [o for o in alive if isinstance(o, QWebEnginePage) and not sip.isdeleted(o)]
    for web_page in pages:
        sip.delete(web_page)
    default = QWebEngineProfile.defaultProfile()
    for profile in alive:
        if isinstance(profile, QWebEngineProfile) and profile is not default:
            if not sip.isdeleted(profile):
                sip.delete(profile)
