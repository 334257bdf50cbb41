"""The window's page as one document: index.html with its scripts and style sheets inlined.

Why: WebEngine fetches a page's files one after another from pywebview's HTTP server (a
single-threaded Python server, HTTP/1.0: ~30 requests of ~4 ms each) after a first
request that itself waits ~0.1 s for the network service, which is most of what a bare
window does not pay. One document given whole (`html=`) needs no request at all. The
Content-Security-Policy stays as strict: instead of `'self'`, it names each inlined script
and style sheet by its SHA-256, so nothing but these exact files runs or applies.
Built once per process (the files do not change while the app runs).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from pathlib import Path
from typing import Final

UI: Final = Path(__file__).resolve().parent / "ui"
_SCRIPT: Final = re.compile(r'<script src="([\w.-]+\.js)"></script>')
_STYLE: Final = re.compile(r'<link rel="stylesheet" href="([\w.-]+\.css)">')
_CSP: Final = re.compile(r'(<meta http-equiv="Content-Security-Policy"\s+content=")([^"]*)(")')


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _inline(name: str, tag: str) -> tuple[str, str]:
    """(the element, its CSP source) for one of the page's files."""
    text = (UI / name).read_text(encoding="utf-8")
    if f"</{tag}" in text.lower():
        raise ValueError(f"desktop/ui/{name} holds '</{tag}' and cannot be inlined")
    return f"<{tag}>{text}</{tag}>", _digest(text)


@functools.cache
def page() -> str:
    """index.html whole, for `webview.create_window(html=...)`."""
    html = (UI / "index.html").read_text(encoding="utf-8")
    scripts: list[str] = []
    styles: list[str] = []

    def script(match: re.Match[str]) -> str:
        element, source = _inline(match.group(1), "script")
        scripts.append(source)
        return element

    def style(match: re.Match[str]) -> str:
        element, source = _inline(match.group(1), "style")
        styles.append(source)
        return element

    html = _STYLE.sub(style, _SCRIPT.sub(script, html))
    policy = (
        "default-src 'none'; "
        f"script-src {' '.join(scripts)} 'unsafe-eval'; "
        f"style-src {' '.join(styles)}; "
        "img-src data:"
    )
    html, found = _CSP.subn(lambda m: m.group(1) + policy + m.group(3), html)
    if found != 1:
        raise ValueError("desktop/ui/index.html has no Content-Security-Policy meta to fill")
    return html
