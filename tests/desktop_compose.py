"""Window scenarios for the composer's attachments (registered into tests/desktop_driver.py's
SCENARIOS): the `@` popup fed by `_session/files`, a picked mention sent as a
`resource_link` (the offline model echoes the file it was given), and an image pasted as a
chip and sent as an `image` block, which the offline provider refuses.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import urllib.request
import zlib
from pathlib import Path
from typing import Any

ITEMS = "[...document.querySelectorAll('[data-testid=mention-item]')].map(m => m.textContent)"
CHIPS = "document.querySelectorAll('[data-testid=attach-chip]').length"


def _key(page: Any, key: str) -> None:
    page.js(
        f"{page.el('prompt-input')}.dispatchEvent(new KeyboardEvent('keydown', {{key: '{key}',"
        " bubbles: true, cancelable: true}))"
    )


def _type(page: Any, text: str) -> None:
    """`text` in the composer, the cursor at its end, as typing it would (an input event)."""
    el = page.el("prompt-input")
    page.js(
        f"{el}.focus(); {el}.value = {json.dumps(text)};"
        f" {el}.setSelectionRange({len(text)}, {len(text)});"
        f" {el}.dispatchEvent(new Event('input', {{bubbles: true}}))"
    )


def _api(page: Any, call: str) -> Any:
    """The answer of a bridge call made from the page (`call`: after `window.pywebview.api.`)."""
    page.js(f"window.__answer = null; window.pywebview.api.{call}.then(a => window.__answer = a)")
    page.wait("window.__answer !== null", f"the answer to {call}")
    return page.js("window.__answer")


def png(width: int = 2, height: int = 2) -> bytes:
    """A small valid PNG (RGB, every pixel red)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def mention_popup(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """`@` + a fuzzy part opens the popup with the nested file; Enter picks it, Enter
    sends; the offline model's echo holds the file's text (the resource_link reached the
    builtin agent, which inlined it)."""
    workspace = Path(args.workspace)
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / "deep" / "notes_file.txt").write_text("NOTE-BODY-42\n")
    (workspace / "other.md").write_text("other\n")
    page.ready()
    sid = page.create_session(str(workspace), "Mentions")
    _type(page, "explain @ntsfl")
    page.wait(f"{ITEMS}.includes('src/deep/notes_file.txt')", "the popup's match")
    seen: dict[str, Any] = {
        "items": page.js(ITEMS),
        "popup_shown": page.visible("mention-popup"),
        "expanded": page.js(f"{page.el('prompt-input')}.getAttribute('aria-expanded')"),
    }
    _key(page, "ArrowDown")
    _key(page, "ArrowUp")  # back to the first
    _key(page, "Enter")  # picks, does not send
    seen["after_pick"] = page.js(f"{page.el('prompt-input')}.value")
    seen["popup_after_pick"] = page.visible("mention-popup")
    seen["sent_on_pick"] = bool(page.js("!!document.querySelector('.msg.user')"))
    # Esc closes a popup without picking.
    _type(page, seen["after_pick"] + "and @oth")
    page.wait(f"{ITEMS}.includes('other.md')", "the second popup")
    _key(page, "Escape")
    seen["after_escape"] = {
        "shown": page.visible("mention-popup"),
        "text": page.js(f"{page.el('prompt-input')}.value"),
    }
    _type(page, seen["after_pick"].rstrip())
    _key(page, "Enter")
    page.wait_item(sid, "idle", 1)
    page.wait(
        "(document.querySelector('[data-testid=transcript]').innerText || '')"
        ".includes('NOTE-BODY-42')",
        "the echoed file",
    )
    seen["transcript"] = page.js("document.querySelector('[data-testid=transcript]').innerText")
    seen["bad_limit"] = _api(page, f"files({json.dumps(sid)}, 'x', 0)")
    return seen


def _paste_png(page: Any) -> None:
    """A synthetic paste of a 2x2 PNG into the composer (a DataTransfer holding a File)."""
    data = base64.b64encode(png()).decode()
    page.js(
        f"(() => {{ const bytes = Uint8Array.from(atob('{data}'), c => c.charCodeAt(0));"
        " const dt = new DataTransfer();"
        " dt.items.add(new File([bytes], 'red.png', {type: 'image/png'}));"
        f" {page.el('prompt-input')}.dispatchEvent(new ClipboardEvent('paste',"
        " {clipboardData: dt, bubbles: true, cancelable: true})); })()"
    )
    page.wait(f"{CHIPS} === 1", "the image chip")


def _drop(page: Any, name: str, mime: str, data: bytes) -> None:
    """A synthetic drop of a file onto the composer (dragover, then drop, as a file
    dragged from a file manager brings them)."""
    encoded = base64.b64encode(data).decode()
    page.js(
        f"(() => {{ const bytes = Uint8Array.from(atob('{encoded}'), c => c.charCodeAt(0));"
        " const dt = new DataTransfer();"
        f" dt.items.add(new File([bytes], {json.dumps(name)}, {{type: {json.dumps(mime)}}}));"
        f" const input = {page.el('prompt-input')};"
        " for (const kind of ['dragover', 'drop'])"
        "   input.dispatchEvent(new DragEvent(kind,"
        "     {dataTransfer: dt, bubbles: true, cancelable: true})); })()"
    )


def image_stored(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """With a provider that takes images, a pasted PNG is sent, the chip goes, and the
    stored user entry shows it as a thumbnail fetched with `_session/image`; a PNG dropped
    onto the composer is sent alone with Enter (no text), a dropped text file refused."""
    page.ready()
    sid = page.create_session(args.workspace, "Stored image")
    _paste_png(page)
    page.send("look at this")
    page.wait_text("transcript", "echo: look at this")
    page.wait_item(sid, "idle")
    thumb = "document.querySelector('.stored [data-testid=msg-image] img')"
    page.wait(f"{thumb} && {thumb}.complete && {thumb}.naturalWidth === 2", "the thumbnail")
    with urllib.request.urlopen(f"{args.provider_url}/_requests", timeout=5) as response:
        body = json.loads(response.read())["requests"][-1]["body"]
    users = [m for m in body["messages"] if m["role"] == "user"]
    seen: dict[str, Any] = {
        "model_got": [p["type"] for p in users[-1]["content"]],
        "chips_after": page.js(CHIPS),
        "src": page.js(f"{thumb}.getAttribute('src').slice(0, 22)"),
        "size": page.js(f"[{thumb}.naturalWidth, {thumb}.naturalHeight]"),
        "composer_error": page.visible("composer-error"),
    }
    # A file that is no image, dropped: said by the composer, nothing attached.
    _drop(page, "notes.txt", "text/plain", b"just text")
    page.wait(f"!{page.el('composer-error')}.hidden", "the dropped file refused")
    seen["dropped_text"] = {"error": page.text("composer-error"), "chips": page.js(CHIPS)}
    # An image dropped (not pasted) onto the composer, sent alone: Enter with no text.
    _drop(page, "dropped.png", "image/png", png(3, 3))
    page.wait(f"{CHIPS} === 1", "the dropped image's chip")
    page.fill("prompt-input", "")
    _key(page, "Enter")
    stored = "document.querySelectorAll('.stored [data-testid=msg-image] img')"
    page.wait(f"{stored}.length === 2", "the dropped image in the stored entry")
    page.wait_item(sid, "idle")
    last = f"{stored}[1]"
    page.wait(f"{last}.complete && {last}.naturalWidth === 3", "the dropped image's thumbnail")
    with urllib.request.urlopen(f"{args.provider_url}/_requests", timeout=5) as response:
        body = json.loads(response.read())["requests"][-1]["body"]
    users = [m for m in body["messages"] if m["role"] == "user"]
    seen["dropped"] = {
        "model_got": [p["type"] for p in users[-1]["content"]],
        "chips_after": page.js(CHIPS),
        "size": page.js(f"[{last}.naturalWidth, {last}.naturalHeight]"),
    }
    return seen


def image_paste(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """A pasted PNG becomes a chip; sending it to the offline provider is refused next to
    the composer, the text and the chip kept; the chip can be removed."""
    page.ready()
    page.create_session(args.workspace, "Images")
    _paste_png(page)
    thumb = "document.querySelector('[data-testid=attach-chip] img')"
    seen: dict[str, Any] = {
        "thumb": page.js(f"{thumb}.getAttribute('src').slice(0, 22)"),
        "decoded": bool(page.wait(f"{thumb}.complete && {thumb}.naturalWidth === 2", "decode")),
    }
    page.send("what is in this picture?")
    page.wait(f"!{page.el('composer-error')}.hidden", "the refusal by the composer")
    seen["refusal"] = page.text("composer-error")
    seen["banner"] = page.visible("error-banner")
    seen["text_kept"] = page.js(f"{page.el('prompt-input')}.value")
    seen["chips_kept"] = page.js(CHIPS)
    seen["pending_gone"] = not page.js("!!document.querySelector('[data-testid=pending-user]')")
    page.click("attach-remove")
    page.wait(f"{CHIPS} === 0", "the chip removed")
    seen["attachments_hidden"] = not page.visible("attachments")
    seen["bad_block"] = _api(
        page, "prompt('x', 'hi', [{type: 'image', mimeType: 'image/svg+xml', data: 'AA=='}])"
    )
    return seen


COMPOSE_SCENARIOS = {f.__name__: f for f in (mention_popup, image_paste, image_stored)}
