"""One desktop start, timed from inside: `python -m bench.desktop_probe ...` (scenario 6).

Runs under a display the caller provides (its Xvfb). `--mode app` runs the real
`DesktopApp` over a sidecar on `--data-dir`, as `python -m desktop` does; `--mode bare`
is the floor: a pywebview window whose static page draws as many list items as the
app's sidebar draws at first (its first page) from inline data, with no sidecar and no
bridge. An in-page MutationObserver
stamps (epoch ms, first animation frame after the change) when the list shows
`--expect` items and when the page says it is ready; the caller's spawn time is `--t0`.
Then `--rebuilds` times the app's Rebuild UI the same way. Prints `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
import traceback
from typing import Any

WAIT = 120.0
SIDEBAR_PAGE = 100  # items the app's sidebar draws at first (desktop/ui/store.js SIDEBAR_PAGE)
OBSERVE = """(() => {
  const n = %d, st = window.__bench = {};
  const now = () => performance.timeOrigin + performance.now();
  const count = () => document.querySelectorAll('[data-testid=session-item]').length;
  const ready = () => !!document.body && document.body.dataset.ready === 'true';
  // The app's sidebar draws the sidecar's first page (%d items) at once, the rest behind
  // it; the floor draws as many items.
  const listed = () => (n === 0 ? ready() : count() >= Math.min(n, %d));
  const check = () => {
    if (st.listDom === undefined && listed()) {
      st.listDom = now(); requestAnimationFrame(() => { st.list = now(); });
    }
    if (st.readyDom === undefined && listed() && ready()) {
      st.readyDom = now(); requestAnimationFrame(() => { st.ready = now(); });
    }
  };
  st.installed = now();
  st.origin = performance.timeOrigin;
  check();
  st.raced = st.listDom !== undefined;
  new MutationObserver(check).observe(document.documentElement,
    {subtree: true, childList: true, attributes: true, attributeFilter: ['data-ready']});
  return true;
})()"""
BARE_PAGE = """<!doctype html><html><body><ul id="l"></ul><script>
const items = %s; const ul = document.getElementById('l');
for (const title of items) { const li = document.createElement('li');
  li.setAttribute('data-testid', 'session-item'); li.textContent = title; ul.append(li); }
document.body.dataset.ready = 'true';
requestAnimationFrame(() => { window.__painted = performance.timeOrigin + performance.now(); });
</script></body></html>"""


def _stamps(window: Any, expect: int) -> dict[str, Any]:
    """Install the observer on `window`'s page and wait for both stamps."""
    window.evaluate_js(OBSERVE % (expect, SIDEBAR_PAGE, SIDEBAR_PAGE))
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        stamps = window.evaluate_js("window.__bench") or {}
        if "list" in stamps and "ready" in stamps:
            return dict(stamps)
        time.sleep(0.02)
    raise TimeoutError(f"the page never showed {expect} sessions: {stamps}")


def _navigation(window: Any, page_ms: float) -> dict[str, float]:
    """When the page's document had arrived and its scripts had run (navigation timing,
    ms since spawn): at start the window's first navigation shares the cores with
    everything else starting."""
    script = "JSON.stringify(performance.getEntriesByType('navigation')[0] || {})"
    entry = json.loads(window.evaluate_js(script) or "{}")
    marks = {"received_ms": "responseEnd", "interactive_ms": "domInteractive"}
    found = {key: page_ms + entry[name] for key, name in marks.items() if name in entry}
    if "responseEnd" in entry:
        found["fetch_ms"] = entry["responseEnd"]  # navigation start -> document received
    return found


def _rebuild(app: Any, expect: int) -> dict[str, float]:
    window = app.windows.current
    window.evaluate_js("window.__before_rebuild = true")
    clicked = time.time() * 1000.0
    window.evaluate_js("document.querySelector('[data-testid=rebuild-ui]').click()")
    deadline = time.monotonic() + WAIT
    while True:  # the page is loaded again in the same window
        with contextlib.suppress(Exception):  # mid-load: no document to ask
            if window.evaluate_js("window.__before_rebuild === undefined"):
                break
        if time.monotonic() > deadline:
            raise TimeoutError("the UI was not rebuilt")
        time.sleep(0.005)
    stamps = _stamps(window, expect)
    fetched = _navigation(window, 0.0).get("fetch_ms", float("nan"))
    return {"list_ms": stamps["list"] - clicked, "ready_ms": stamps["ready"] - clicked,
            "raced": bool(stamps.get("raced")), "fetch_ms": fetched}  # fmt: skip


def _time_first_list(result: dict[str, Any], t0: float) -> None:
    """Stamp when the page first asks for the list's first page and when the sidecar's
    answer is back in the bridge (the bridge looks `sessions.list_page` up per call)."""
    from desktop import sessions

    ask = sessions.list_page

    async def timed(host: Any, cursor: str | None = None) -> dict[str, Any]:
        first = "list_asked_ms" not in result
        if first:
            result["list_asked_ms"] = time.time() * 1000.0 - t0
        page = await ask(host, cursor)
        if first:
            result["list_answered_ms"] = time.time() * 1000.0 - t0
        return page

    sessions.list_page = timed  # type: ignore[assignment]


def run_app(args: argparse.Namespace, result: dict[str, Any]) -> None:
    from desktop.app import AppOptions, DesktopApp

    result["imported_ms"] = time.time() * 1000.0 - args.t0
    _time_first_list(result, args.t0)
    app = DesktopApp(AppOptions(sidecar_args=["--data-dir", args.data_dir, "--log-level", "WARNING"], default_cwd=args.workspace))  # fmt: skip

    def host_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "sidecar_started":
            result.setdefault("sidecar_ms", time.time() * 1000.0 - args.t0)

    app.host.on_host_event(host_event)

    def scenario(app: DesktopApp) -> None:
        try:
            stamps = _stamps(app.windows.current, args.expect)
            result.update(list_ms=stamps["list"] - args.t0, ready_ms=stamps["ready"] - args.t0,
                          raced=bool(stamps.get("raced")), page_ms=stamps["origin"] - args.t0)  # fmt: skip
            result.update(_navigation(app.windows.current, stamps["origin"] - args.t0))
            result["rebuilds"] = [_rebuild(app, args.expect) for _ in range(args.rebuilds)]
        except Exception:  # noqa: BLE001 (reported to the caller, which says what failed)
            result["error"] = traceback.format_exc()
        app.windows.close_all()

    result["exit_code"] = app.run(scenario)


def run_bare(args: argparse.Namespace, result: dict[str, Any]) -> None:
    import webview

    if os.geteuid() == 0:
        os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
    # As many items as the app's sidebar draws at first: its first page.
    items = json.dumps([f"Stored session {i}" for i in range(min(args.expect, SIDEBAR_PAGE))])
    window = webview.create_window("bench floor", html=BARE_PAGE % items, width=1200, height=780)
    if window is None:
        raise RuntimeError("pywebview refused to create the window")

    def scenario() -> None:
        try:
            window.events.shown.wait(30)
            deadline = time.monotonic() + WAIT
            while not (painted := window.evaluate_js("window.__painted")):
                if time.monotonic() > deadline:
                    raise TimeoutError("the floor page never painted")
                time.sleep(0.02)
            # The page stamps itself: it draws before any observer could be installed.
            result.update(list_ms=painted - args.t0, ready_ms=painted - args.t0, raced=False)
            # Its load alone: navigation start to that paint (what a Rebuild UI is set by).
            result["page_ms"] = window.evaluate_js("performance.timeOrigin") - args.t0
            result.update(_navigation(window, result["page_ms"]))
        except Exception:  # noqa: BLE001 (reported to the caller)
            result["error"] = traceback.format_exc()
        window.destroy()

    webview.start(scenario, gui="qt", private_mode=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("app", "bare"), required=True)
    parser.add_argument("--t0", type=float, required=True, help="spawn time, epoch ms")
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--data-dir", default="")
    parser.add_argument("--workspace", default=os.getcwd())
    parser.add_argument("--rebuilds", type=int, default=0)
    args = parser.parse_args()
    result: dict[str, Any] = {"mode": args.mode, "error": None}
    (run_app if args.mode == "app" else run_bare)(args, result)
    print("RESULT " + json.dumps(result), flush=True)
    if args.mode == "app":
        from desktop.app import exit_when_threads_finish

        return exit_when_threads_finish(0)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    raise SystemExit(main())
