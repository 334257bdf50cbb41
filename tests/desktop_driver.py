"""Runs the real desktop app in this process and drives its page: one scenario per run.

`webview.start()` can run only once per process, so tests/test_desktop_window.py starts
this file as a subprocess per scenario:

    python tests/desktop_driver.py SCENARIO --data-dir D --workspace W [--artifacts DIR]

It starts a private 24-bit Xvfb (WebEngine crashes on 16-bit), runs `DesktopApp` with the
scenario on pywebview's worker thread, drives the page with `evaluate_js` (clicks by
data-testid, fills inputs, waits with a bounded poll -- polling is fine in a test), and
prints one line `RESULT {json}` with what it observed; the pytest side asserts on it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from desktop.app import AppOptions, DesktopApp, exit_when_threads_finish  # noqa: E402
from protocol.methods import Method  # noqa: E402

WAIT = 20.0
SEL = "document.querySelector"


@contextlib.contextmanager
def xvfb(size: str = "1280x860x24") -> Iterator[str]:
    """A private X server; -displayfd lets Xvfb pick a free display number itself."""
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", size, "-nolisten", "tcp"],
        pass_fds=(write_fd,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        number = pipe.readline().strip()
    if not number.isdigit():
        server.kill()
        raise RuntimeError(f"Xvfb did not start (exit code {server.wait()})")
    display = f":{number}"
    try:
        yield display
    finally:
        server.terminate()
        server.wait(10)


class Page:
    """The current window's page, driven from the scenario thread."""

    def __init__(self, app: DesktopApp) -> None:
        self.app = app

    def js(self, script: str) -> Any:
        return self.app.windows.current.evaluate_js(script)

    def wait(self, script: str, what: str, timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(script)
            except Exception:  # the window is being swapped: try again
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                banner = self.js(f"{SEL}('[data-testid=error-banner]').innerText")
                raise TimeoutError(f"timed out waiting for {what}; error banner: {banner!r}")
            time.sleep(0.1)

    def ready(self) -> None:
        self.wait("document.body.dataset.ready === 'true'", "the page to load")

    def el(self, testid: str, session_id: str | None = None) -> str:
        scope = f'[data-session-id="{session_id}"] ' if session_id else ""
        return f"{SEL}('{scope}[data-testid=\"{testid}\"]')"

    def click(self, testid: str, session_id: str | None = None) -> None:
        el = self.el(testid, session_id)
        self.wait(f"{el} && !{el}.disabled && !{el}.closest('[hidden]')", f"{testid} enabled")
        self.js(f"{el}.click()")

    def fill(self, testid: str, value: str) -> None:
        el = self.el(testid)
        self.js(f"{el}.value = {json.dumps(value)}; {el}.dispatchEvent(new Event('change'))")

    def send(self, text: str) -> None:
        self.fill("prompt-input", text)
        self.click("send")

    def text(self, testid: str, session_id: str | None = None) -> str:
        return str(self.js(f"({self.el(testid, session_id)} || {{}}).innerText || ''"))

    def wait_text(self, testid: str, needle: str, timeout: float = WAIT) -> None:
        script = f"({self.el(testid)} || {{}}).innerText"
        self.wait(f"({script} || '').includes({json.dumps(needle)})", f"{needle!r}", timeout)

    def item(self, session_id: str) -> dict[str, Any]:
        return {
            "status": self.text("session-status", session_id),
            "generation": self.text("session-generation", session_id),
            "interrupted": bool(self.js(f"!!{self.el('session-interrupted', session_id)}")),
        }

    def wait_item(self, session_id: str, status: str, generation: int | None = None) -> None:
        status_el = self.el("session-status", session_id)
        cond = f"{status_el} && {status_el}.innerText === '{status}'"
        if generation is not None:
            gen_el = self.el("session-generation", session_id)
            cond += f" && {gen_el}.innerText === 'gen {generation}'"
        self.wait(cond, f"session {session_id} {status} (generation {generation})")

    def item_el(self, session_id: str) -> str:
        return f'{SEL}(\'[data-testid="session-item"][data-session-id="{session_id}"]\')'

    def select(self, session_id: str) -> None:
        self.wait(self.item_el(session_id), f"session {session_id} in the sidebar")
        self.js(f"{self.item_el(session_id)}.click()")
        self.wait(f"{self.el('detail-id')}.innerText === '{session_id}'", "the selection")

    def snapshot(self, session_id: str) -> dict[str, Any]:
        """What the page shows for a session: sidebar item and details."""
        return {
            "ids": self.session_ids(),
            **self.item(session_id),
            "detail_generation": self.text("detail-generation"),
            "endpoint": self.text("session-endpoint"),
        }

    def visible(self, testid: str) -> bool:
        return bool(self.js(f"!!{self.el(testid)} && !{self.el(testid)}.hidden"))

    def session_ids(self) -> list[str]:
        script = "[...document.querySelectorAll('[data-testid=session-item]')].map(e => e.dataset.sessionId)"
        return list(self.js(script) or [])

    def create_session(self, cwd: str, title: str) -> str:
        before = set(self.session_ids())
        self.click("new-session")
        self.fill("new-cwd", cwd)
        self.fill("new-title", title)
        self.click("create-session")
        self.wait(
            f"document.querySelectorAll('[data-testid=session-item]').length > {len(before)}",
            "new item",
        )
        (session_id,) = set(self.session_ids()) - before
        self.wait_item(session_id, "idle", 1)
        return session_id

    def rebuild(self, trigger: str) -> float:
        old = self.app.windows.current
        started = time.monotonic()
        self.js(trigger)
        deadline = time.monotonic() + WAIT
        while self.app.windows.current is old or not old.events.closed.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("the UI was not rebuilt")
            time.sleep(0.05)
        self.ready()
        return round(time.monotonic() - started, 2)

    def screenshot(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        time.sleep(0.6)  # let the compositor paint the last DOM change
        window = self.app.windows.current
        saved = self.app.windows.gui.call(lambda: window.native.grab().save(str(path)))
        return str(path) if saved else ""

    def host(self, method: str, params: dict[str, Any]) -> Any:
        return self.app.host_thread.call(self.app.host.request(method, params), WAIT)

    def diff_rows(self, root: str) -> list[str]:
        """The diff rows under `root` (a JS expression) as "kind|old line|new line|text"."""
        script = (
            f"[...({root}).querySelectorAll('[data-testid=diff-row]')].map(r => [r.dataset.kind,"
            " r.dataset.old || '', r.dataset.new || '', r.querySelector('.diff-code').textContent]"
            ".join('|'))"
        )
        return list(self.js(script) or [])

    def turn_el(self, testid: str, turn: int) -> str:
        return f'{SEL}(\'.stored [data-testid="{testid}"][data-turn="{turn}"]\')'

    def wait_changes(self, turn: int) -> str:
        """The changes list of `turn` once shown; its JS expression."""
        slot = self.turn_el("turn-changes", turn)
        self.wait(f"{slot} && !{slot}.hidden", f"the changes of turn {turn}")
        return slot

    def focused(self) -> str:
        return str(
            self.js("document.activeElement.dataset.testid || document.activeElement.tagName")
        )


def http_status(access: dict[str, Any]) -> dict[str, Any]:
    """GET /agent/status with `access` = a `_session/http` result ({url, token})."""
    request = urllib.request.Request(
        access["url"] + "/agent/status", headers={"Authorization": f"Bearer {access['token']}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return {"code": response.status, "body": json.loads(response.read())}


Scenario = Callable[[Page, argparse.Namespace], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


# ---- scenarios ----------------------------------------------------------------------


@scenario
def prompt(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Create a session from the page, talk to it, run a command, hit busy, page back."""
    page.ready()
    sid = page.create_session(args.workspace, "Demo session")
    page.send("hello desktop")
    page.wait_text("transcript", "Echo: hello desktop")
    page.send("$ echo tool-output-42; sleep 1; echo second line")
    # Consent first: the card shows what will run where, and Enter allows it once.
    card = page.el("approval-card")
    page.wait(f"!!{card}", "the approval card")
    focused = page.wait(
        f"document.activeElement === {card} || document.activeElement.tagName", "focus"
    )
    approval = {
        "command": page.text("approval-command"),
        "where": page.text("approval-where"),
        "sidebar": page.item(sid)["status"],
        "focused": focused,
        "buttons": page.js(
            "[...document.querySelectorAll('[data-testid=approval-card] button')]"
            ".map(b => b.dataset.testid)"
        ),
    }
    page.js(f"{card}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter'}}))")
    page.wait(f"!{card}", "the card to go once answered")
    live_out = "(document.querySelector('.live [data-testid=tool-output]') || {}).innerText || ''"
    page.wait(f"({live_out}).includes('tool-output-42')", "streamed command output")
    streamed = {
        "output": page.js(live_out),
        "status": page.item(sid)["status"],
        "approval": approval,
    }
    page.wait_text("transcript", "exited with status 0")
    page.wait(f"{page.el('tool-status')}.innerText === 'exit 0'", "the tool's exit status")
    tool = {k: page.text(f"tool-{k}") for k in ("command", "status", "output")}
    page.send("/sleep 2 nap")
    page.wait_item(sid, "running")
    page.send("are you there?")
    page.wait(f"!{page.el('error-banner')}.hidden", "the busy error")
    busy = {
        "code": page.js(f"{page.el('error-banner')}.dataset.code"),
        "text": page.text("error-banner"),
    }
    page.wait_text("transcript", "Slept 2 s. nap")
    page.wait_item(sid, "idle")
    page.js(f"{page.el('error-banner')}.querySelector('.banner-close').click()")

    # Paging: a long session made by another client of the same sidecar.
    other = page.host(Method.SESSION_NEW, {"cwd": args.workspace, "_meta": {"title": "Long one"}})
    long_id = other["sessionId"]
    for i in range(30):
        prompt = [{"type": "text", "text": f"message {i}"}]
        page.host(Method.SESSION_PROMPT, {"sessionId": long_id, "prompt": prompt})
    page.select(long_id)
    count = "document.querySelectorAll('.stored .msg').length"
    page.wait(f"{count} === 50", "the newest page")
    paging = {"first_page": page.js(count), "older_button": page.visible("load-older")}
    page.click("load-older")
    page.wait(f"{count} === 60", "the older page")
    paging.update(all=page.js(count), older_button_after=page.visible("load-older"))
    paging["first_message"] = page.js("document.querySelector('.stored .msg').innerText")

    # For the screenshot: one closed session and one running, so every badge shows.
    page.host(Method.SESSION_CLOSE, {"sessionId": long_id})
    busy_id = page.host(Method.SESSION_NEW, {"cwd": args.workspace, "_meta": {"title": "Build"}})
    prompt = [{"type": "text", "text": "/sleep 5 built"}]
    page.app.host_thread.submit(
        page.app.host.request(
            Method.SESSION_PROMPT, {"sessionId": busy_id["sessionId"], "prompt": prompt}
        )
    )
    page.wait_item(busy_id["sessionId"], "running")
    page.wait_item(long_id, "closed")
    page.select(sid)
    page.wait_text("transcript", "Slept 2 s. nap")
    page.fill("prompt-input", "")  # the refused prompt was handed back; not for the picture
    shot = page.screenshot(Path(args.artifacts) / "desktop.png")
    return {
        "session_id": sid,
        "transcript": page.text("transcript"),
        "tool": tool,
        "streamed": streamed,
        "busy": busy,
        "paging": paging,
        "screenshot": shot,
    }


@scenario
def rebuild(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Rebuild the UI mid-turn: same sessions, same runtime, the answer lands in the new page."""
    import webview

    page.ready()
    sid = page.create_session(args.workspace, "Slow turn")
    page.send("/sleep 4 slow answer")
    page.wait_item(sid, "running")
    summary = page.host(Method.STATUS, {"sessionId": sid})
    access = page.host(Method.HTTP, {"sessionId": sid})  # the summary carries no token
    before = page.snapshot(sid)
    old = page.app.windows.current
    seconds = page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    after = page.snapshot(sid)
    http = http_status(access)  # the old page's listener, same port and token
    page.wait_text("transcript", "Slept 4 s. slow answer", timeout=15)
    final = page.host(Method.STATUS, {"sessionId": sid})
    return {
        "session_id": sid,
        "host_before": {"generation": summary["generation"], "url": summary["http"]["url"]},
        "host_after": {"generation": final["generation"], "url": final["http"]["url"]},
        "page_before": before,
        "page_after": after,
        "http": {
            "code": http["code"],
            "sessionId": http["body"]["sessionId"],
            "status": http["body"]["status"],
        },
        "rebuild_seconds": seconds,
        "old_window_closed": old.events.closed.is_set(),
        "windows_open": len(webview.windows),
        "new_page_transcript": page.text("transcript"),
    }


@scenario
def approvals(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A pending approval survives Rebuild UI (the new page shows the same card and its answer
    counts); "Always allow" adds a rule the details list and can remove; Esc rejects."""
    page.ready()
    sid = page.create_session(args.workspace, "Consent")
    page.send("$ echo approved-after-rebuild > rebuilt.txt")
    page.wait(f"!!{page.el('approval-card')}", "the approval card")
    page.wait_item(sid, "waiting for approval")
    rebuild_s = page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.ready()
    page.select(sid)
    card = page.el("approval-card")
    page.wait(f"!!{card}", "the same approval card in the new page")
    after_rebuild = page.text("approval-command")
    page.click("approve-allow_always")
    page.wait_text("transcript", "exited with status 0")
    written = (Path(args.workspace) / "rebuilt.txt").read_text().strip()
    page.wait(f"{page.el('rules-list')}.children.length === 1", "the new rule in the details")
    rule = page.js(f"{page.el('rules-list')}.textContent")  # inside a closed <details>
    # The rule holds: the same command runs again unasked.
    page.send("$ echo approved-after-rebuild > rebuilt.txt")
    page.wait_item(sid, "idle")
    page.wait_text("transcript", "exited with status 0")
    asked_again = bool(page.js(f"!!{card}"))
    page.click("remove-rule")
    page.wait(f"{page.el('rules-list')}.children.length === 0", "the rule removed")
    rules_after = page.host(Method.PERMISSIONS, {"sessionId": sid})["rules"]
    # Esc rejects: the command does not run and the transcript says it was refused.
    page.send("$ touch refused.txt")
    page.wait(f"!!{card}", "another approval card")
    page.js(f"{card}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Escape'}}))")
    page.wait_text("transcript", "not run")
    return {
        "rebuild_s": rebuild_s,
        "after_rebuild": after_rebuild,
        "written": written,
        "rule": rule,
        "asked_again": asked_again,
        "rules_after": rules_after,
        "refused_file": (Path(args.workspace) / "refused.txt").exists(),
        "sidebar_after": page.item(sid)["status"],
    }


@scenario
def mcp(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Add an MCP server in the New session form (kept for later), see it connect with its
    tools in the details, pick it from the saved list for a second session."""
    os.environ["XDG_CONFIG_HOME"] = str(Path(args.data_dir) / "config")  # this run's own
    server = f"{sys.executable} {Path(__file__).parent / 'mcp_servers' / 'basic_server.py'}"
    page.ready()
    page.click("new-session")
    page.fill("new-cwd", args.workspace)
    page.fill("new-title", "With MCP")
    page.fill("new-mcp-name", "basic")
    page.fill("new-mcp-target", server)
    page.js(f"{page.el('new-mcp-save')}.checked = true")
    page.click("create-session")
    status = page.el("mcp-status")
    page.wait(f"{status} && {status}.innerText === 'connected'", "the server connected")
    first = page.text("mcp-list")
    page.click("new-session")
    saved = page.el("saved-mcp")
    page.wait(f"!!{saved}", "the saved server offered")
    offered = page.text("saved-mcp-list")
    page.fill("new-cwd", args.workspace)
    page.fill("new-title", "Saved MCP")
    page.js(f"{saved}.querySelector('input').checked = true")
    page.click("create-session")
    page.wait(
        f"{status} && {status}.innerText === 'connected' && "
        "document.querySelector('.d-title').innerText === 'Saved MCP'",
        "the saved server connected in the second session",
    )
    return {"first": first, "offered": offered, "second": page.text("mcp-list")}


@scenario
def lifecycle(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Close, resume, mode switch and delete (with its in-page confirmation) from the page."""
    page.ready()
    sid = page.create_session(args.workspace, "Lifecycle")
    page.send("first message")
    page.wait_text("transcript", "Echo: first message")
    seen: dict[str, Any] = {"session_id": sid}
    page.click("delete-session")
    page.click("confirm-delete")  # refused: the session is live
    page.wait(f"!{page.el('error-banner')}.hidden", "the live error")
    seen["delete_live"] = {
        "code": page.js(f"{page.el('error-banner')}.dataset.code"),
        "text": page.text("error-banner"),
    }
    page.click("close-session")
    page.wait_item(sid, "closed", 1)
    seen["closed"] = page.snapshot(sid)
    page.click("resume-session")
    page.wait_item(sid, "idle", 2)
    page.wait(f"{page.el('session-endpoint')}.innerText.startsWith('http://')", "the new endpoint")
    seen["resumed"] = page.snapshot(sid)
    page.send("second message")
    page.wait_text("transcript", "Echo: second message")
    page.send("/sleep 30 stop me")
    page.wait_item(sid, "running")
    page.click("stop")
    page.wait_item(sid, "idle", 2)
    seen["stopped"] = page.host(Method.STATUS, {"sessionId": sid})["status"]
    page.js(f"{page.el('mode-select')}.value = 'plan'")
    page.js(f"{page.el('mode-select')}.dispatchEvent(new Event('change'))")
    page.wait(f"{page.el('mode-select')}.value === 'plan'", "plan mode")
    seen["mode"] = page.host(Method.STATUS, {"sessionId": sid})["mode"]
    seen["transcript"] = page.text("transcript")
    page.click("close-session")
    page.wait_item(sid, "closed", 2)
    page.click("delete-session")
    seen["confirm_shown"] = page.visible("confirm-delete-box")
    page.click("cancel-delete")
    seen["kept_after_cancel"] = sid in page.session_ids()
    page.click("delete-session")
    page.click("confirm-delete")
    page.wait(f"!{page.item_el(sid)}", "the item to go")
    listed = page.host(Method.SESSION_LIST, {})["sessions"]
    seen["listed_after_delete"] = [s["sessionId"] for s in listed]
    shortcut = "new KeyboardEvent('keydown', {key: 'R', code: 'KeyR', ctrlKey: true, shiftKey: true, bubbles: true})"
    seen["shortcut_rebuild_seconds"] = page.rebuild(f"document.dispatchEvent({shortcut})")
    seen["ids_after_rebuild"] = page.session_ids()
    return seen


@scenario
def diffs(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """An edit's diff in its approval card and tool card, then the turn's changes list (from
    `_session/turn_changes`, and fetched again by a rebuilt page) with a file's diff."""
    workspace = Path(args.workspace)
    (workspace / "poem.txt").write_text("one\ntwo\nthree\nfour\n")
    page.ready()
    sid = page.create_session(args.workspace, "Diffs")
    page.send('/edit poem.txt two "TWO\nzwei"')
    card = page.el("approval-card")
    page.wait(f"!!{card}", "the approval card")
    page.wait(f"document.activeElement === {card}", "the card's focus")
    live_tool = f"{SEL}('.live [data-testid=tool-call]')"
    seen: dict[str, Any] = {
        "approval": {
            "command": page.text("approval-command"),
            "summary": page.js(f"{card}.querySelector('[data-testid=diff-summary]').textContent"),
            "open": page.js(f"{card}.querySelector('[data-testid=diff]').open"),
            "rows": page.diff_rows(card),
        },
        "live_tool": {
            "kind": page.js(f"{live_tool}.dataset.kind"),
            "command": page.js(
                f"{live_tool}.querySelector('[data-testid=tool-command]').innerText"
            ),
            "rows": page.diff_rows(live_tool),
            "open": page.js(f"{live_tool}.querySelector('[data-testid=diff]').open"),
        },
    }
    # Enter on the diff's summary is the summary's (it folds the diff), not "allow".
    summary = f"{card}.querySelector('summary')"
    page.js(
        f"{summary}.focus(); {summary}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter', bubbles: true}}))"
    )
    seen["card_after_enter_on_summary"] = bool(page.js(f"!!{card}"))
    page.click("approve-allow_once")
    page.wait(f"!{card}", "the card to go once answered")
    slot = page.wait_changes(1)
    seen["poem"] = (workspace / "poem.txt").read_text()
    stored_tool = f"{SEL}('.stored [data-testid=tool-call]')"
    seen["stored_tool"] = {
        "status": page.js(f"{stored_tool}.querySelector('[data-testid=tool-status]').innerText"),
        "label": page.js(f"{stored_tool}.querySelector('.diff-label').textContent"),
        "rows": page.diff_rows(stored_tool),
    }
    seen["changes_head"] = page.js(f"{slot}.querySelector('.changes-head').textContent")
    files = f"[...{slot}.querySelectorAll('[data-testid=change-file]')]"
    seen["changes_files"] = page.js(f"{files}.map(b => b.textContent)")
    page.js(f"{slot}.querySelector('[data-testid=change-file]').click()")
    box = f"{slot}.querySelector('[data-testid=change-diff]')"
    page.wait(f"{box}.querySelectorAll('[data-testid=diff-row]').length > 0", "the file's diff")
    seen["file_diff"] = page.diff_rows(box)
    seen["file_diff_expanded"] = page.js(
        f"{slot}.querySelector('[data-testid=change-file]').getAttribute('aria-expanded')"
    )
    # A new file: its approval says so; its turn lists it as added.
    page.send("/write fresh.txt hello from the page")
    page.wait(f"!!{card}", "the second approval card")
    seen["new_file_summary"] = page.js(
        f"{card}.querySelector('[data-testid=diff-summary]').textContent"
    )
    page.click("approve-allow_once")
    slot2 = page.wait_changes(2)
    seen["second_files"] = page.js(
        f"[...{slot2}.querySelectorAll('[data-testid=change-file]')].map(b => b.textContent)"
    )
    # A fresh page has no notifications to go by: it asks `_session/changes` per turn.
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    page.wait_changes(1)
    page.wait_changes(2)
    seen["after_rebuild"] = page.js(
        "[...document.querySelectorAll('.stored [data-testid=turn-changes]:not([hidden])')]"
        ".map(s => s.dataset.turn + ': ' + s.querySelector('.changes-head').textContent)"
    )
    return seen


@scenario
def rewind(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Rewind from a user's message: the menu, the dry run's confirmation, the files on disk;
    a conflict (a file the user changed since) left alone unless forced; undo."""
    workspace = Path(args.workspace)
    page.ready()
    sid = page.create_session(args.workspace, "Rewind")
    page.host(
        Method.SESSION_SET_CONFIG_OPTION,
        {"sessionId": sid, "configId": "approval", "value": "auto"},
    )
    page.send("/write notes.txt first version")
    page.wait_changes(1)
    page.send("/edit notes.txt first second")
    page.wait_changes(2)
    page.send("/write extra.txt made in turn 3")
    page.wait_changes(3)
    page.wait_item(sid, "idle")
    seen: dict[str, Any] = {"before": (workspace / "notes.txt").read_text()}

    trigger = f"{page.turn_el('user-turn', 2)}.querySelector('[data-testid=rewind-button]')"
    menu = page.el("rewind-menu")
    page.wait(f"!{trigger}.disabled", "the rewind button enabled")
    page.js(f"{trigger}.click()")
    page.wait(f"!!{menu}", "the rewind menu")
    seen["menu"] = page.js(f"[...{menu}.querySelectorAll('button')].map(b => b.dataset.testid)")
    seen["menu_focus"] = page.focused()
    page.js(
        f"{menu}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'ArrowDown', bubbles: true}}))"
    )
    seen["menu_focus_down"] = page.focused()
    page.js(f"{menu}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Escape', bubbles: true}}))")
    page.wait(f"!{menu}", "the menu closed by Esc")
    seen["focus_after_esc"] = page.focused()
    page.js(f"{trigger}.click()")
    page.wait(f"!!{menu}", "the rewind menu again")
    page.click("rewind-code")
    confirm = page.el("rewind-confirm")
    page.wait(f"!!{confirm}", "the confirmation")
    page.wait(f"document.activeElement === {confirm}", "the confirmation's focus")
    seen["plan"] = {
        "title": page.js(f"{confirm}.querySelector('.approval-head').textContent"),
        "restored": page.text("rewind-restored"),
        "removed": page.text("rewind-removed"),
        "conflicts": page.visible("rewind-conflicts"),
        "force_offered": page.visible("rewind-force"),
        "conversation": page.visible("rewind-conversation"),
        "disk_unchanged": (workspace / "extra.txt").exists(),
    }
    page.click("rewind-confirm-button")
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden", "the rewind's result")
    seen["notice"] = page.text("notice-banner")
    seen["after_code"] = {
        "notes": (workspace / "notes.txt").read_text(),
        "extra": (workspace / "extra.txt").exists(),
    }
    seen["messages_after_code"] = page.js("document.querySelectorAll('.stored .msg.user').length")

    # The user changes a file; rewinding both to before turn 1 finds the conflict.
    (workspace / "notes.txt").write_text("edited by the user\n")
    page.js(f"{notice}.querySelector('.banner-close').click()")
    trigger1 = f"{page.turn_el('user-turn', 1)}.querySelector('[data-testid=rewind-button]')"
    page.js(f"{trigger1}.click()")
    page.wait(f"!!{menu}", "the rewind menu for turn 1")
    page.click("rewind-both")
    page.wait(f"!!{confirm} && {confirm}.dataset.turn === '1'", "the confirmation for turn 1")
    seen["conflict_plan"] = {
        "conflicts": page.text("rewind-conflicts"),
        "removed": page.visible("rewind-removed"),
        "conversation": page.text("rewind-conversation"),
    }
    page.js(f"{page.el('rewind-force')}.click()")
    page.wait(f"!!{page.el('rewind-removed')}", "the forced plan")
    seen["forced_plan"] = {
        "removed": page.text("rewind-removed"),
        "conflicts": page.text("rewind-conflicts"),
        "still_on_disk": (workspace / "notes.txt").read_text(),
    }
    page.wait(f"document.activeElement === {confirm}", "the confirmation's focus again")
    page.js(f"{confirm}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter'}}))")
    page.wait(f"!{notice}.hidden", "the forced rewind's result")
    seen["forced_notice"] = page.text("notice-banner")
    seen["after_forced"] = (workspace / "notes.txt").exists()
    page.wait(f"!!{page.el('note-rewind')}", "the rewind marker in the transcript")
    seen["marker"] = page.text("note-rewind")
    # Undo takes the code back: the user's edit returns.
    seen["undo_label"] = page.text("notice-action")
    page.click("notice-action")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Undid')", "the undo's result")
    seen["after_undo"] = (workspace / "notes.txt").read_text()
    seen["summary_status"] = page.host(Method.STATUS, {"sessionId": sid})["status"]
    return seen


@scenario
def sidecar_kill(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """SIGKILL the sidecar under a live window: banner, restart, closed + resumable, intact."""
    page.ready()
    survivor = page.create_session(args.workspace, "Survivor")
    page.send("before the crash")
    page.wait_text("transcript", "Echo: before the crash")
    victim = page.create_session(args.workspace, "Interrupted")
    page.send("/sleep 30 never")
    page.wait_item(victim, "running")
    old_pid = page.app.host.pid
    os.kill(old_pid, signal.SIGKILL)
    page.wait(f"!{page.el('sidecar-banner')}.hidden", "the sidecar banner")
    page.wait(
        f"{page.el('sidecar-state')}.dataset.state === 'running' && {page.el('sidecar-state')}.dataset.pid !== '{old_pid}'",
        "the new sidecar",
    )
    page.wait_item(survivor, "closed", 1)
    page.wait_item(victim, "closed", 1)
    seen: dict[str, Any] = {
        "old_pid": old_pid,
        "new_pid": page.app.host.pid,
        "pill_pid": page.js(f"{page.el('sidecar-state')}.dataset.pid"),
        "banner": page.text("sidecar-banner"),
        "survivor_after_restart": page.item(survivor),
        "victim_after_restart": page.item(victim),
    }
    page.wait(f"!!{page.el('note-interrupted')}", "the interrupted marker in the transcript")
    page.select(survivor)
    page.wait_text("transcript", "Echo: before the crash")
    page.click("resume-session")
    page.wait_item(survivor, "idle", 2)
    page.send("after the crash")
    page.wait_text("transcript", "Echo: after the crash")
    seen["survivor_resumed"] = page.snapshot(survivor)
    seen["transcript"] = page.text("transcript")
    return seen


@scenario
def sigterm(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """SIGTERM mid-turn: the app quits, closing the session cleanly (not interrupted)."""
    page.ready()
    sid = page.create_session(args.workspace, "Terminated")
    page.send("/sleep 30 cut short")
    page.wait_item(sid, "running")
    os.kill(os.getpid(), signal.SIGTERM)
    return {"session_id": sid, "quit_by_signal": True}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--artifacts", default="test-artifacts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    result: dict[str, Any] = {"error": None, "sidecar_pids": []}
    with xvfb() as display:
        os.environ["DISPLAY"] = display
        app = DesktopApp(
            AppOptions(sidecar_args=["--data-dir", args.data_dir], default_cwd=args.workspace)
        )
        app.host.on_host_event(
            lambda kind, data: (
                result["sidecar_pids"].append(data["pid"]) if data.get("pid") else None
            )
        )

        def run(app: DesktopApp) -> None:
            started = time.monotonic()
            page = Page(app)
            quit_by_window = True
            try:
                observed = SCENARIOS[args.scenario](page, args)
                quit_by_window = not observed.pop("quit_by_signal", False)
                result.update(observed)
            except Exception:
                result["error"] = traceback.format_exc()
            result["scenario_seconds"] = round(time.monotonic() - started, 2)
            if quit_by_window:
                app.windows.close_all()  # as the user closing the last window

        started = time.monotonic()
        result["exit_code"] = app.run(run)
        result["total_seconds"] = round(time.monotonic() - started, 2)
    print("RESULT " + json.dumps(result), flush=True)
    return exit_when_threads_finish(0)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    raise SystemExit(main())
