"""`python -m desktop`: the desktop window over a sidecar, or the terminal client.

    python -m desktop [--data-dir DIR] [--provider NAME] [--model M]
                      [--base-url URL] [--no-auto-resume] [--tui] [other sidecar options...]
    python -m desktop repl [same options]

Sidecar options are passed through to the `python -m sidecar` child unchanged, so the
window and the terminal client see the same sessions as any other client of that data
dir. `--tui`/`repl` never imports Qt, so it works on machines without a display.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The desktop's options, and the argument list for the sidecar child."""
    parser = argparse.ArgumentParser(
        prog="python -m desktop",
        description="Desktop host for ACP agent sessions (a window over the sidecar).",
        epilog="Other options (e.g. --store, --tool-timeout, --log-level) go to the sidecar.",
    )
    parser.add_argument("--data-dir", help="where the sidecar keeps sessions.db")
    # No `choices`: the sidecar validates (and knows every provider it has).
    parser.add_argument("--provider", help="model provider: offline, openai, ...")
    parser.add_argument("--model", help="model name stored in new sessions")
    parser.add_argument(
        "--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1"
    )
    parser.add_argument("--tui", action="store_true", help="terminal client instead of the window")
    parser.add_argument(
        "--no-auto-resume",
        action="store_true",
        help="do not resume the sessions that were live when the app last quit or the sidecar died",
    )
    args, extra = parser.parse_known_args(list(argv))
    sidecar_args: list[str] = []
    for option in ("data_dir", "provider", "model", "base_url"):
        value = getattr(args, option)
        if value is not None:
            sidecar_args += ["--" + option.replace("_", "-"), value]
    return args, sidecar_args + extra


def _run_tui(sidecar_args: list[str]) -> int:
    try:
        from desktop import tui
    except ImportError as exc:
        print(f"the terminal client is not available: {exc}", file=sys.stderr)
        return 2
    return tui.main(sidecar_args)


def _has_display() -> bool:
    if sys.platform != "linux":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    repl = bool(argv) and argv[0] == "repl"
    args, sidecar_args = parse_args(argv[1:] if repl else argv)
    if repl or args.tui:
        return _run_tui(sidecar_args)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not _has_display():
        # Qt would abort the process; say why instead, and point at what works.
        print(
            "no display found (DISPLAY is not set); try `python -m desktop --tui`", file=sys.stderr
        )
        return 2
    try:
        from desktop.app import AppOptions, DesktopApp, exit_when_threads_finish

        app = DesktopApp(AppOptions(sidecar_args=sidecar_args, auto_resume=not args.no_auto_resume))
    except ImportError as exc:
        print(
            f"the desktop window needs the `desktop` extra (pip install -e '.[desktop]'): {exc}",
            file=sys.stderr,
        )
        return 2
    try:
        code = app.run()
    except KeyboardInterrupt:  # Ctrl-C before the GUI loop took over SIGINT
        app.shutdown()
        code = 130
    return exit_when_threads_finish(code)


if __name__ == "__main__":
    raise SystemExit(main())
