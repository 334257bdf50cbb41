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
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from desktop_compose import COMPOSE_SCENARIOS  # noqa: E402
from desktop_steer import STEER_SCENARIOS, STEER_SETUPS, fake_chat_server  # noqa: E402

from desktop.app import AppOptions, DesktopApp, exit_when_threads_finish  # noqa: E402
from protocol.methods import Method  # noqa: E402

WAIT = 30.0  # generous: the window tests share a busy machine
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
                state = self.js(
                    "JSON.stringify({url: location.href.slice(0, 80), readyState: document.readyState,"
                    f" banner: ({SEL}('[data-testid=error-banner]') || {{}}).innerText,"
                    " bridge: !!(window.pywebview && window.pywebview.api),"
                    " items: document.querySelectorAll('[data-testid=session-item]').length})"
                )
                raise TimeoutError(f"timed out waiting for {what}; the page: {state}")
            time.sleep(0.1)

    def ready(self) -> None:
        # Twice the usual wait: the first load shares the machine with the sidecar's start.
        self.wait("document.body.dataset.ready === 'true'", "the page to load", 2 * WAIT)

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
        # The item can appear (from the sidecar's notification) before the page has the
        # answer to its session/new and selects it: what the test does next is for it.
        item = f"[data-session-id={json.dumps(session_id)}]"
        self.wait(
            f"document.querySelector('[data-testid=session-item]{item}')"
            ".getAttribute('aria-selected') === 'true'",
            "the new session selected",
        )
        return session_id

    def rebuild(self, trigger: str) -> float:
        """Rebuild UI (the page loaded again in the same window): until the new document is
        ready."""
        self.js("window.__before_rebuild = true")
        started = time.monotonic()
        self.js(trigger)
        deadline = time.monotonic() + WAIT
        while True:
            with contextlib.suppress(Exception):  # mid-load: no document to ask
                if self.js("window.__before_rebuild === undefined"):
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the UI was not rebuilt")
            time.sleep(0.05)
        self.ready()
        return round(time.monotonic() - started, 2)

    def screenshot(self, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        time.sleep(1.5)  # let the compositor paint the last DOM change (slow on a busy machine)
        window = self.app.windows.current
        saved = self.app.windows.gui.call(lambda: window.native.grab().save(str(path)))
        return str(path) if saved else ""

    def host(self, method: str, params: dict[str, Any]) -> Any:
        return self.app.host_thread.call(self.app.host.request(method, params), WAIT)

    def prompt_elsewhere(self, session_id: str, text: str) -> Any:
        """A turn another client of the same sidecar runs (not this page); waits for it."""
        prompt = [{"type": "text", "text": text}]
        return self.host(Method.SESSION_PROMPT, {"sessionId": session_id, "prompt": prompt})

    def long_session(self, cwd: str, title: str, turns: int) -> str:
        """A session another client made, with `turns` turns ("message i" each)."""
        created = self.host(Method.SESSION_NEW, {"cwd": cwd, "_meta": {"title": title}})
        for i in range(turns):
            self.prompt_elsewhere(created["sessionId"], f"message {i}")
        return str(created["sessionId"])

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
# Scenarios that need the sidecar started differently.
SIDECAR_ARGS: dict[str, list[str]] = {
    # A hosted API with no key: the sidecar says so at initialize, and sends nothing.
    "provider_problem": ["--provider", "openai", "--base-url", "https://api.openai.com/v1"],
}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


# Scenarios that need something ready before the app starts (stored sessions, a provider
# server): each yields the extra sidecar arguments and cleans up after the app quit.
Setup = Callable[[argparse.Namespace], contextlib.AbstractContextManager[list[str]]]
SETUPS: dict[str, Setup] = {}


def setup_for(name: str) -> Callable[[Setup], Setup]:
    def register(fn: Setup) -> Setup:
        SETUPS[name] = fn
        return fn

    return register


# ---- scenarios ----------------------------------------------------------------------


@scenario
def prompt(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Create a session from the page, talk to it, run a command, hit busy, page back."""
    page.ready()
    sid = page.create_session(args.workspace, "Demo session")
    page.send("hello desktop")
    page.wait_text("transcript", "Echo: hello desktop")
    page.send("$ echo tool-output-42; sleep 3; echo second line")
    # Consent first: the card shows what will run where, and Enter allows it once.
    card = page.el("approval-card")
    page.wait(f"!!{card}", "the approval card")
    focused = page.wait(
        f"document.activeElement === {card} || document.activeElement.tagName", "focus"
    )
    page.wait(f"{page.el('working')}.innerText.includes('approval')", "the waiting indicator")
    approval = {
        "working": page.text("working"),
        "model": page.text("detail-model"),
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
    page.send("are you there?")  # queued while the turn runs, not refused as busy
    queued = "[...document.querySelectorAll('[data-testid=queue-text]')].map(q => q.innerText)"
    page.wait(f"{queued}.length === 1", "the queued message")
    busy = {"queued": page.js(queued), "banner": page.visible("error-banner")}
    page.wait_text("transcript", "Slept 2 s. nap")
    page.wait_text("transcript", "Echo: are you there?")
    page.wait_item(sid, "idle")

    # Paging: a long session made by another client of the same sidecar.
    long_id = page.long_session(args.workspace, "Long one", 30)
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
    prompt = [{"type": "text", "text": "/sleep 15 built"}]
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
    page.send("/sleep 8 slow answer")
    page.wait_item(sid, "running")
    summary = page.host(Method.STATUS, {"sessionId": sid})
    access = page.host(Method.HTTP, {"sessionId": sid})  # the summary carries no token
    before = page.snapshot(sid)
    old = page.app.windows.current
    rebuilds = page.app.windows.rebuilds
    seconds = page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    after = page.snapshot(sid)
    http = http_status(access)  # the old page's listener, same port and token
    page.wait_text("transcript", "Slept 8 s. slow answer", timeout=20)
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
        "same_window": page.app.windows.current is old and not old.events.closed.is_set(),
        "rebuilt": page.app.windows.rebuilds - rebuilds,
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
    page.click("delete-session")  # live: the confirmation offers "Close and delete"
    seen["delete_live"] = {
        "button": page.text("confirm-delete"),
        "text": page.text("confirm-delete-text"),
        "focus": page.focused(),
    }
    page.click("cancel-delete")
    page.click("close-session")
    page.wait_item(sid, "closed", 1)
    seen["closed"] = page.snapshot(sid)
    options = page.app.host.config_options  # the host's copy of each live session's options
    seen["options_kept"] = {"closed": sid in options}
    page.click("resume-session")
    page.wait_item(sid, "idle", 2)
    page.wait(f"{page.el('session-endpoint')}.innerText.startsWith('http://')", "the new endpoint")
    seen["resumed"] = page.snapshot(sid)
    seen["options_kept"]["resumed"] = sid in options
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
    seen["options_kept"]["deleted"] = sid in options
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
    # The changes list comes by its own notification; the stored tail may land just after.
    status = f"{stored_tool}.querySelector('[data-testid=tool-status]')"
    page.wait(
        f"!!{stored_tool} && !!{status} && {status}.innerText !== 'running'", "the stored card"
    )
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
    # textContent: the banner may already be gone again (its cause over) when we look.
    restarted = f"{page.el('sidecar-banner')}.textContent"
    page.wait(f"{restarted}.includes('restarted')", "the restart")
    seen: dict[str, Any] = {"banner": page.js(restarted)}
    # Both were live: the app resumes them by itself (generation 2), and says so.
    page.wait_item(survivor, "idle", 2)
    page.wait_item(victim, "idle", 2)
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Resumed')", "the notice")
    seen.update(
        {
            "old_pid": old_pid,
            "new_pid": page.app.host.pid,
            "pill_pid": page.js(f"{page.el('sidecar-state')}.dataset.pid"),
            "notice": page.text("notice-banner"),
            "sidecar_banner_after": page.visible("sidecar-banner"),
            "survivor_after_restart": page.item(survivor),
            "victim_after_restart": page.item(victim),
        }
    )
    page.wait(f"!!{page.el('note-interrupted')}", "the interrupted marker in the transcript")
    # Said once: a rebuilt page does not say it again.
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    time.sleep(1.5)  # time for a repeated notice to show (wrongly)
    seen["notice_after_rebuild"] = page.visible("notice-banner") and "Resumed" in page.text(
        "notice-banner"
    )
    page.select(survivor)
    page.wait_text("transcript", "Echo: before the crash")
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


@contextlib.contextmanager
def recording_server() -> Iterator[tuple[int, list[str]]]:
    """A loopback HTTP server that records every request (nothing should ever reach it)."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()


@scenario
def render(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A hostile reply is shown as sanitised Markdown: no script runs, nothing remote is
    fetched, links open in the system browser only; command colours are rendered."""
    import webbrowser

    opened: list[str] = []
    webbrowser.open = lambda url, new=0, autoraise=True: opened.append(url) or True  # type: ignore[assignment]
    page.ready()
    sid = page.create_session(args.workspace, "Render")
    page.host(
        Method.SESSION_SET_CONFIG_OPTION,
        {"sessionId": sid, "configId": "approval", "value": "auto"},
    )
    with recording_server() as (port, hits):
        base = f"http://127.0.0.1:{port}"
        reply = (
            f"**bold** and `code` <script>window.pwned = 1</script> "
            f'<img src=x onerror="window.pwned = 2"> <img src="{base}/pixel"> '
            f"![pic]({base}/md.png) [bad](javascript:window.pwned=3) [site]({base}/link)\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\ndef f():\n    return 1\n```\n"
        )
        page.send(reply)
        md = f"{SEL}('.stored [data-testid=agent-message].md')"
        page.wait(f"!!{md} && !!{md}.querySelector('strong')", "the rendered reply")
        time.sleep(1.0)  # time for anything the page might (wrongly) load or run
        seen: dict[str, Any] = {
            "pwned": page.js("typeof window.pwned"),
            "tags": page.js(
                f"[...new Set([...{md}.querySelectorAll('*')].map(e => e.tagName.toLowerCase()))].sort()"
            ),
            "on_attrs": page.js(
                f"[...{md}.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on'))"
            ),
            "hrefs": page.js(f"[...{md}.querySelectorAll('a')].map(a => a.getAttribute('href'))"),
            "rels": page.js(f"[...{md}.querySelectorAll('a')].map(a => a.rel)"),
            "text": page.js(f"{md}.innerText"),
            "highlighted": page.js(f"!!{md}.querySelector('pre code .k')"),
            "copy_button": page.js(f"!!{md}.querySelector('[data-testid=copy-code]')"),
        }
        href_before = page.js("location.href")
        page.js(f"[...{md}.querySelectorAll('a')].find(a => a.textContent === 'site').click()")
        deadline = time.monotonic() + 5
        while not opened and time.monotonic() < deadline:
            time.sleep(0.1)
        seen["opened"] = list(opened)
        seen["href_after"] = page.js("location.href") == href_before
        seen["still_app"] = bool(page.js("!!window.app && document.body.dataset.ready === 'true'"))
        seen["hits"] = list(hits)
    page.send("$ printf '\\033[1;31mred\\033[0m plain \\033[38;5;82mgreen\\033[0m\\033[2J\\n'")
    out = f"{SEL}('.stored [data-testid=tool-call] [data-testid=tool-output]')"
    page.wait(f"!!{out} && {out}.innerText.includes('green')", "the command's output")
    seen["ansi"] = {
        "text": page.js(f"{out}.innerText"),
        "red": page.js(f"({out}.querySelector('.ansi-fg-1') || {{}}).textContent"),
        "bold": page.js(f"!!{out}.querySelector('.ansi-fg-1.ansi-bold')"),
        "green": page.js(f"({out}.querySelector('.ansi-fg-82') || {{}}).textContent"),
        "colour": page.js(f"getComputedStyle({out}.querySelector('.ansi-fg-1')).color"),
    }
    # A long card is folded, with "Show all".
    page.send("$ seq 1 100")
    cards = "document.querySelectorAll('.stored [data-testid=tool-call]')"
    page.wait(
        f"{cards}.length === 2 && !!{cards}[1].querySelector('[data-testid=show-all]')", "the fold"
    )
    long_out = f"{cards}[1].querySelector('[data-testid=tool-output]')"
    folded = page.js(f"{long_out}.clientHeight")
    seen["fold"] = {
        "label": page.js(f"{cards}[1].querySelector('[data-testid=show-all]').textContent"),
        "collapsed": page.js(f"{long_out}.classList.contains('collapsed')"),
    }
    page.js(f"{cards}[1].querySelector('[data-testid=show-all]').click()")
    seen["fold"]["taller_when_open"] = page.js(f"{long_out}.clientHeight") > folded
    seen["fold"]["label_open"] = page.js(
        f"{cards}[1].querySelector('[data-testid=show-all]').textContent"
    )
    return seen


@scenario
def whole_output(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A PTY command's card is in colour while it runs and after; output past the model's
    cap is there in full behind "Full output"; a code block's Copy fills the clipboard."""
    from qtpy.QtWidgets import QApplication

    page.ready()
    meta = {"title": "Output", "backend": "pty", "approval": "auto"}
    sid = page.host(Method.SESSION_NEW, {"cwd": args.workspace, "mcpServers": [], "_meta": meta})[
        "sessionId"
    ]
    page.select(sid)
    page.send("$ printf '\\033[1;32mgreen\\033[0m plain\\n'; sleep 4; echo done")
    live = f"{SEL}('.live [data-testid=tool-output]')"
    page.wait(f"!!{live} && !!{live}.querySelector('.ansi-fg-2')", "colour while it runs")
    seen: dict[str, Any] = {
        "live": {
            "green": page.js(f"{live}.querySelector('.ansi-fg-2').textContent"),
            "bold": page.js(f"!!{live}.querySelector('.ansi-fg-2.ansi-bold')"),
            "raw_escape": page.js(f"{live}.innerText.includes('\\x1b')"),
        }
    }
    card = f"{SEL}('.stored [data-testid=tool-call] [data-testid=tool-output]')"
    page.wait(f"!!{card} && {card}.innerText.includes('done')", "the stored card")
    seen["stored"] = {
        "green": page.js(f"({card}.querySelector('.ansi-fg-2') || {{}}).textContent"),
        "text": page.js(f"{card}.innerText"),
    }
    # Past the model's cap (64 KiB): cut in the card, whole behind "Full output".
    page.send("$ seq 1 40000")
    cards = "document.querySelectorAll('.stored [data-testid=tool-call]')"
    page.wait(
        f"{cards}.length === 2 && !!{cards}[1].querySelector('[data-testid=full-output]')",
        "the Full output button",
    )
    out = f"{cards}[1].querySelector('[data-testid=tool-output]')"
    seen["cut_has_last"] = page.js(f"{out}.innerText.includes('\\n40000')")
    button = f"{cards}[1].querySelector('[data-testid=full-output]')"
    labels = []
    while page.js(f"!!{button}") and len(labels) < 5:  # a page of 256 KiB per click
        labels.append(page.js(f"{button}.textContent"))
        page.js(f"{button}.click()")
        page.wait(f"!{button} || {button}.textContent !== {json.dumps(labels[-1])}", "a page")
    seen["labels"] = labels
    seen["full_lines"] = page.js(f"{out}.innerText.trim().split(/\\r?\\n/).length")
    seen["button_left"] = page.js(f"!!{cards}[1].querySelector('[data-testid=full-output]')")
    # A code block's Copy button.
    page.send("Code:\n\n```sh\necho copied-42\n```")
    copy = f"{SEL}('.stored [data-testid=agent-message] [data-testid=copy-code]')"
    page.wait(f"!!{copy}", "the code block's Copy button")
    page.js(f"{copy}.click()")
    page.wait(f"{copy}.textContent !== 'Copy'", "the Copy button's answer")
    seen["copy_label"] = page.js(f"{copy}.textContent")
    clipboard = QApplication.clipboard()
    seen["clipboard"] = page.app.windows.gui.call(lambda: clipboard.text() if clipboard else "")
    return seen


@scenario
def keep(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Nothing lost on screen: the message shows at once, a working indicator, Rebuild UI
    during a streaming command (its output so far, then more), per-session drafts, the
    selection and focus back after the rebuild, Stop keeping what was printed."""
    page.ready()
    a = page.create_session(args.workspace, "Streaming")
    page.host(
        Method.SESSION_SET_CONFIG_OPTION, {"sessionId": a, "configId": "approval", "value": "auto"}
    )
    command = "for i in $(seq 1 12); do echo line $i; sleep 1; done"
    page.send(f"$ {command}")
    seen: dict[str, Any] = {
        "pending_at_once": bool(page.js(f"!!{SEL}('.live [data-testid=pending-user]')")),
    }
    tool = f"{SEL}('[data-testid=tool-call]')"
    out = f"{tool}.querySelector('[data-testid=tool-output]')"
    page.wait(f"!!{tool} && {out}.innerText.includes('line 2')", "streamed output")
    page.wait(f"!{page.el('working')}.hidden", "the working indicator")
    seen["working"] = page.text("working")
    input_el = page.el("prompt-input")
    page.js(f"{input_el}.value = 'draft for A'; {input_el}.dispatchEvent(new Event('input'))")
    page.js(f"{input_el}.focus()")
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.wait(f"{page.el('detail-id')}.innerText === '{a}'", "the same session selected")
    page.wait(f"!!{tool} && {out}.innerText.includes('line 2')", "the output so far after rebuild")
    seen["after_rebuild"] = {
        "selected": page.text("detail-id"),
        "draft": page.js(f"{input_el}.value"),
        "focus": page.focused(),
        "status": page.js(f"{tool}.querySelector('[data-testid=tool-status]').innerText"),
        "cards": page.js("document.querySelectorAll('[data-testid=tool-call]').length"),
    }
    page.wait(
        f"{out}.innerText.includes('line 7') && "
        f"{tool}.querySelector('[data-testid=tool-status]').innerText === 'running'",
        "more output while it still runs",
    )
    page.wait_item(a, "idle")
    page.wait(f"{out}.innerText.includes('line 12')", "the whole output")
    lines = page.js(f"{out}.innerText").split("\n")
    seen["final_lines"] = [line for line in lines if line.startswith("line ")]
    seen["final_status"] = page.js(f"{tool}.querySelector('[data-testid=tool-status]').innerText")
    # Drafts are per session.
    b = page.create_session(args.workspace, "Other")
    seen["draft_in_new"] = page.js(f"{input_el}.value")
    page.js(f"{input_el}.value = 'draft for B'; {input_el}.dispatchEvent(new Event('input'))")
    page.select(a)
    seen["draft_back_in_a"] = page.js(f"{input_el}.value")
    seen["focus_after_switch"] = page.focused()
    page.select(b)
    seen["draft_back_in_b"] = page.js(f"{input_el}.value")
    # Stop keeps what was printed.
    page.host(
        Method.SESSION_SET_CONFIG_OPTION, {"sessionId": b, "configId": "approval", "value": "auto"}
    )
    page.send("$ echo starting; sleep 30")
    seen["draft_after_send"] = page.js(f"{input_el}.value")
    page.wait(f"!!{tool} && {out}.innerText.includes('starting')", "the stopped command's output")
    page.click("stop")
    seen["focus_after_stop"] = page.focused()
    page.wait_item(b, "idle")
    status = f"{SEL}('.stored [data-testid=tool-call] [data-testid=tool-status]')"
    page.wait(f"!!{status} && {status}.innerText === 'stopped'", "the stored stopped card")
    stored_out = f"{SEL}('.stored [data-testid=tool-call] [data-testid=tool-output]')"
    seen["stopped_output"] = page.js(f"{stored_out}.innerText")
    messages = page.host(Method.MESSAGES, {"sessionId": b, "offset": 0, "limit": 50})["messages"]
    seen["stopped_result"] = [m.get("text") for m in messages if m["type"] == "tool_result"]
    page.select(a)
    seen["draft_a_at_end"] = page.js(f"{input_el}.value")
    return seen


@scenario
def dead_ends(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Every error offers the next step: Retry and Resume for a failed turn, "Close and
    delete" for a live session; the error banner says it once and goes when it is over."""
    page.ready()
    sid = page.create_session(args.workspace, "Failing")
    layout = "JSON.stringify(document.querySelector('.layout').getBoundingClientRect())"
    before = page.js(layout)
    page.send("/fail boom")
    page.wait_item(sid, "error")
    banner = page.el("error-banner")
    page.wait(f"!{banner}.hidden", "the error banner")
    seen: dict[str, Any] = {
        "banner": page.text("error-banner"),
        "layout_unmoved": page.js(layout) == before,
        "actions": page.visible("error-actions"),
        "send_label": page.text("retry-turn"),
        "resume_enabled": page.js(f"!{page.el('resume-session')}.disabled"),
    }
    users = "document.querySelectorAll('.stored .msg.user').length"
    page.wait(f"{users} === 1", "the failed prompt in the transcript")
    try:
        page.click("retry-turn")
    except TimeoutError as exc:
        state = page.js(
            f"[{page.el('detail-status')}.innerText, {page.el('error-actions')}.hidden, "
            f"{page.el('detail-id')}.innerText]"
        )
        raise TimeoutError(f"{exc}; details: {state}; sid {sid}") from None
    page.wait(f"{users} === 2", "the retried prompt")
    page.wait_item(sid, "error")
    seen["retried"] = page.js(
        "[...document.querySelectorAll('.stored .msg.user')].map(m => m.innerText)"
    )
    page.click("error-resume")
    page.wait_item(sid, "idle")
    seen["resumed_live"] = page.host(Method.STATUS, {"sessionId": sid})["live"]
    seen["banner_after_resume"] = page.visible("error-banner")
    seen["actions_after_resume"] = page.visible("error-actions")
    page.send("hello again")
    page.wait_text("transcript", "Echo: hello again")
    doomed = page.create_session(args.workspace, "Doomed")
    page.click("delete-session")
    seen["delete_button"] = page.text("confirm-delete")
    page.click("confirm-delete")
    page.wait(f"!{page.item_el(doomed)}", "the live session to go")
    listed = page.host(Method.SESSION_LIST, {})["sessions"]
    seen["listed"] = sorted(s["sessionId"] for s in listed)
    seen["ids"] = [sid]
    return seen


def key(page: Page, key: str, target: str = "document", **mods: bool) -> None:
    flags = ", ".join(f"{k}: {'true' if v else 'false'}" for k, v in mods.items())
    code = f"Key{key.upper()}" if len(key) == 1 else key
    page.js(
        f"({target}).dispatchEvent(new KeyboardEvent('keydown', {{key: {json.dumps(key)}, "
        f"code: {json.dumps(code)}, bubbles: true, cancelable: true{', ' + flags if flags else ''}}}))"
    )


@scenario
def keyboard(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Keyboard paths (Ctrl+N, Esc, Ctrl+K, arrows), ARIA, dark mode kept across a rebuild,
    the narrow layout, and the new-session form (~, one message per error, recent folders,
    the folder picker)."""
    import webview

    workspace = Path(args.workspace)
    os.environ["HOME"] = str(workspace)  # so "~" is the test's own folder
    (workspace / "proj").mkdir()
    (workspace / "picked").mkdir()
    webview.Window.create_file_dialog = (  # type: ignore[method-assign]
        lambda self, dialog_type=10, directory="", **kw: [str(workspace / "picked")]
    )
    page.ready()
    seen: dict[str, Any] = {}
    form = page.el("new-session-form")
    key(page, "n", ctrlKey=True)
    seen["ctrl_n"] = {"open": page.js(f"!{form}.hidden"), "focus": page.focused()}
    key(page, "Escape", "document.activeElement")
    seen["esc_closes"] = page.js(f"{form}.hidden")
    key(page, "n", ctrlKey=True)
    page.fill("new-cwd", "~/no-such-folder")
    page.click("create-session")
    page.wait(f"!{page.el('new-session-error')}.hidden", "the form's error")
    seen["bad_folder"] = page.text("new-session-error")
    seen["bad_folder_banner"] = page.visible("error-banner")
    page.click("browse-folder")
    page.wait(f"{page.el('new-cwd')}.value.endsWith('picked')", "the picked folder")
    seen["picked"] = page.js(f"{page.el('new-cwd')}.value")
    page.fill("new-cwd", "~/proj")
    page.fill("new-title", "Alpha")
    page.click("create-session")
    page.wait("document.querySelectorAll('[data-testid=session-item]').length === 1", "Alpha")
    alpha = page.session_ids()[0]
    seen["alpha_cwd"] = page.text("detail-cwd")
    seen["recent"] = page.js(
        f"[...{page.el('recent-folders')}.querySelectorAll('option')].map(o => o.value)"
    )
    beta = page.create_session(args.workspace, "Beta")
    page.send("hello aria")
    page.wait_text("transcript", "Echo: hello aria")
    page.wait(f"{page.el('announcer')}.textContent.includes('new reply')", "the announcement")
    seen["announcer"] = page.text("announcer")
    # Ctrl+K: type to find, Enter to switch.
    key(page, "k", ctrlKey=True)
    seen["quick_open"] = page.visible("quick-switch") and page.focused() == "quick-input"
    page.js(
        f"{page.el('quick-input')}.value = 'alp'; {page.el('quick-input')}.dispatchEvent(new Event('input'))"
    )
    seen["quick_items"] = page.js(
        "[...document.querySelectorAll('[data-testid=quick-item] .item-title')].map(e => e.textContent)"
    )
    key(page, "Enter", page.el("quick-input"))
    page.wait(f"{page.el('detail-id')}.innerText === '{alpha}'", "Alpha selected")
    # The quick switch ends by focusing the prompt, once the selection is complete: wait
    # for that too, or its focus lands after the arrow keys below moved it.
    page.wait(
        f"document.activeElement === {page.el('prompt-input')}", "the prompt focused after Enter"
    )
    seen["quick_closed"] = not page.visible("quick-switch")
    # Arrows in the sidebar.
    page.js(f"{page.item_el(alpha)}.focus()")
    order = page.session_ids()
    key(page, "ArrowDown" if order.index(alpha) == 0 else "ArrowUp", page.item_el(alpha))
    page.wait(f"{page.el('detail-id')}.innerText === '{beta}'", "Beta by arrow key")
    page.wait(f"document.activeElement.dataset.sessionId === '{beta}'", "the focus on Beta")
    seen["arrow_focus"] = (
        page.js("document.activeElement.dataset.sessionId") == beta
        and page.js("document.activeElement.getAttribute('aria-selected')") == "true"
    )
    seen["aria"] = {
        "listbox": page.js(f"{page.el('session-list')}.getAttribute('role')"),
        "option": page.js(f"{page.item_el(beta)}.getAttribute('role')"),
        "log": page.js(f"{page.el('transcript')}.getAttribute('role')"),
        "live": page.js(f"{page.el('announcer')}.getAttribute('aria-live')"),
        "input_label": page.js(f"{page.el('prompt-input')}.getAttribute('aria-label')"),
        "unlabelled_buttons": page.js(
            "[...document.querySelectorAll('button')].filter(b => !b.closest('[hidden]') && !(b.textContent.trim() || b.getAttribute('aria-label'))).length"
        ),
    }
    # Dark mode: system -> light -> dark, kept by the host (a rebuilt page starts dark).
    bg = "getComputedStyle(document.body).backgroundColor"
    seen["light_bg"] = page.js(bg)
    page.click("theme-toggle")
    page.click("theme-toggle")
    seen["dark_bg"] = page.js(bg)
    seen["theme_label"] = page.text("theme-toggle")
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    seen["dark_after_rebuild"] = page.js("document.documentElement.dataset.theme")
    seen["saved"] = json.loads((Path(args.data_dir) / "config" / "window.json").read_text())
    # A narrow window: the sidebar collapses into a drawer.
    window = page.app.windows.current
    window.resize(800, 600)
    page.wait("window.innerWidth <= 800", "the narrow window")
    side = "document.querySelector('.sidebar').getBoundingClientRect()"
    page.wait(f"{side}.right <= 1", "the sidebar out of the way")
    seen["narrow"] = {
        "transcript_width": page.js(f"{page.el('transcript')}.getBoundingClientRect().width"),
        "toggle": page.visible("sidebar-toggle"),
    }
    page.click("sidebar-toggle")
    page.wait(f"{side}.left >= 0", "the drawer open")
    seen["drawer_open"] = True
    key(page, "Escape", "document.activeElement")
    page.wait(f"{side}.right <= 1", "the drawer closed by Esc")
    window.resize(1280, 860)
    return seen


@scenario
def resume_first(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The first run: one session left live, one closed, then the app quits."""
    page.ready()
    live = page.create_session(args.workspace, "Left live")
    page.send("remember me")
    page.wait_text("transcript", "Echo: remember me")
    closed = page.create_session(args.workspace, "Closed by hand")
    page.click("close-session")
    page.wait_item(closed, "closed", 1)
    return {"live": live, "closed": closed}


@scenario
def resume_second(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The next start: the session that was live comes back live; the closed one does not."""
    page.ready()
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Resumed')", "the notice")
    items = {sid: page.item(sid) for sid in page.session_ids()}
    return {"items": items, "notice": page.text("notice-banner")}


@scenario
def message_actions(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Retry, edit-and-resend and fork on a user's message."""
    page.ready()
    sid = page.create_session(args.workspace, "Actions")
    page.send("first words")
    page.wait_text("transcript", "Echo: first words")
    page.send("second words")
    page.wait_text("transcript", "Echo: second words")
    page.wait_item(sid, "idle")
    users = "[...document.querySelectorAll('.stored .msg.user')].map(m => m.innerText)"

    def action(turn: int, testid: str) -> None:
        button = f"{page.turn_el('user-turn', turn)}.querySelector('[data-testid={testid}]')"
        page.wait(f"!!{button}", f"{testid} on turn {turn}")
        page.js(f"{button}.click()")

    seen: dict[str, Any] = {}
    # Retry: the same message again, as a new turn.
    action(1, "msg-retry")
    page.wait(f"{users}.length === 3", "the retried message")
    page.wait_item(sid, "idle")
    seen["after_retry"] = page.js(users)
    # Fork before turn 2: a new session with turn 1 only, the message waiting to be edited.
    before = set(page.session_ids())
    action(2, "msg-fork")
    page.wait(
        f"document.querySelectorAll('[data-testid=session-item]').length > {len(before)}",
        "the fork",
    )
    (fork,) = set(page.session_ids()) - before
    page.wait(f"{page.el('detail-id')}.innerText === '{fork}'", "the fork selected")
    page.wait_text("transcript", "Echo: first words")
    seen["fork"] = {
        "users": page.js(users),
        "draft": page.js(f"{page.el('prompt-input')}.value"),
        "forked_from": page.host(Method.STATUS, {"sessionId": fork})["forkedFrom"],
    }
    # Edit and resend in the original, in place: the conversation goes back before turn 2.
    page.select(sid)
    page.wait_text("transcript", "Echo: second words")
    action(2, "msg-edit")
    editor = f"{page.turn_el('user-turn', 2)}.querySelector('[data-testid=edit-input]')"
    page.wait(f"!!{editor}", "the message to edit, in place")
    seen["edit_draft"] = page.js(f"{editor}.value")
    seen["edit_focus"] = page.focused()
    page.js(f"{editor}.value = 'second words, edited'")
    page.js(f"{page.turn_el('user-turn', 2)}.querySelector('[data-testid=edit-save]').click()")
    page.wait_text("transcript", "Echo: second words, edited")
    page.wait(f"!!{page.el('note-rewind')}", "the rewind marker")
    page.wait_item(sid, "idle")
    return seen


@scenario
def quit_fast(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """30 live sessions, then the user closes the window (timed by the test)."""
    page.ready()
    for i in range(30):
        page.host(
            Method.SESSION_NEW,
            {"cwd": args.workspace, "mcpServers": [], "_meta": {"title": f"Live {i}"}},
        )
    page.wait("document.querySelectorAll('[data-testid=session-item]').length === 30", "30 items")
    live = [s for s in page.host(Method.SESSION_LIST, {})["sessions"] if s["_meta"]["live"]]
    return {"live": len(live)}


@scenario
def screenshots(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The README's pictures, light and dark: a rendered reply, a coloured command, badges."""
    page.ready()
    page.click("theme-toggle")  # system -> light
    closed = page.host(
        Method.SESSION_NEW, {"cwd": args.workspace, "_meta": {"title": "Refactor the parser"}}
    )
    page.host(Method.SESSION_CLOSE, {"sessionId": closed["sessionId"]})
    page.wait_item(closed["sessionId"], "closed")
    sid = page.create_session(args.workspace, "Fix the flaky test")
    page.host(
        Method.SESSION_SET_CONFIG_OPTION,
        {"sessionId": sid, "configId": "approval", "value": "auto"},
    )
    reply = (
        "Here is the plan:\n\n1. **Read** the failing test\n2. Run `pytest -q` again\n\n"
        "```python\ndef retry(fn, times: int = 3):\n    for attempt in range(times):\n"
        '        if fn():\n            return attempt\n    raise TimeoutError("no luck")\n```\n\n'
        "| file | change |\n|---|---|\n| tests/test_io.py | +4 −1 |\n"
    )
    page.send(reply)
    page.wait(f"!!{SEL}('.stored .md table')", "the rendered reply")
    page.send(
        "$ printf '\\033[1;32m✓ 41 passed\\033[0m, \\033[33m1 skipped\\033[0m in "
        "\\033[36m2.31s\\033[0m\\n\\033[2mcoverage 94%%\\033[0m\\n'"
    )
    page.wait(f"!!{SEL}('.stored [data-testid=tool-output] .ansi-fg-2')", "the coloured output")
    page.wait_item(sid, "idle")
    running = page.host(
        Method.SESSION_NEW, {"cwd": args.workspace, "_meta": {"title": "Build the docs"}}
    )
    page.app.host_thread.submit(
        page.app.host.request(
            Method.SESSION_PROMPT,
            {
                "sessionId": running["sessionId"],
                "prompt": [{"type": "text", "text": "/sleep 6 built"}],
            },
        )
    )
    page.wait_item(running["sessionId"], "running")
    page.select(sid)
    page.wait(f"!!{SEL}('.stored .md table')", "the reply again")
    page.js(f"{page.el('transcript')}.scrollTop = 1e9")
    bg = "getComputedStyle(document.body).backgroundColor"
    page.wait(f"{bg} === 'rgb(246, 247, 249)'", "the light theme")
    light = page.screenshot(Path(args.artifacts) / "desktop-light.png")
    page.click("theme-toggle")  # light -> dark
    page.wait(f"{bg} === 'rgb(20, 23, 31)'", "the dark theme")
    dark = page.screenshot(Path(args.artifacts) / "desktop-dark.png")
    return {"light": light, "dark": dark}


@scenario
def library(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The session library: last activity first, search over transcripts, archive, rename,
    export -> import."""
    import webview

    workspace = Path(args.workspace)
    exports = workspace / "exports"
    exports.mkdir()
    opened: dict[str, str] = {}

    def dialog(self: Any, dialog_type: int = 10, directory: str = "", **kw: Any) -> list[str]:
        if dialog_type == webview.FileDialog.FOLDER:
            return [str(exports)]
        return [opened["path"]]

    webview.Window.create_file_dialog = dialog  # type: ignore[method-assign,assignment]
    page.ready()
    ids = {}
    for title, text in (
        ("Groceries", "buy a banana"),
        ("Deploy", "ship the build"),
        ("Notes", "hello"),
    ):
        ids[title] = page.create_session(args.workspace, title)
        page.send(text)
        page.wait_text("transcript", f"Echo: {text}")
        page.wait_item(ids[title], "idle")
    titles = "[...document.querySelectorAll('[data-testid=session-item] .item-title')].map(e => e.textContent)"
    seen: dict[str, Any] = {"order": page.js(titles)}
    page.select(ids["Groceries"])
    page.send("one more thing")
    page.wait_text("transcript", "Echo: one more thing")
    page.wait(f"{titles}[0] === 'Groceries'", "Groceries moved to the top")
    seen["order_after"] = page.js(titles)
    seen["time"] = page.text("session-time", ids["Groceries"])
    # Search over transcript text (a word prefix).
    search = page.el("session-search")
    page.js(f"{search}.value = 'banan'; {search}.dispatchEvent(new Event('input'))")
    page.wait(f"{titles}.length === 1", "the search's answer")
    seen["search"] = page.js(titles)
    page.js(f"{search}.value = ''; {search}.dispatchEvent(new Event('input'))")
    page.wait(f"{titles}.length === 3", "the whole list again")
    # Archive: hidden from the list, shown with "archived".
    page.select(ids["Notes"])
    page.click("archive-session")
    page.wait(f"{titles}.length === 2", "Notes hidden")
    seen["after_archive"] = page.js(titles)
    page.js(f"{page.el('show-archived')}.click()")
    page.wait(f"{titles}.length === 1 && {titles}[0] === 'Notes'", "the archived view")
    page.js(f"{page.el('show-archived')}.click()")
    page.wait(f"{titles}.length === 2", "the default view")
    # Rename inline.
    page.select(ids["Deploy"])
    page.js(
        f"{page.el('detail-title')}.dispatchEvent(new MouseEvent('dblclick', {{bubbles: true}}))"
    )
    rename = page.el("rename-input")
    page.wait(f"!!{rename}", "the rename field")
    page.js(f"{rename}.value = 'Deploy to staging'")
    page.js(
        f"{rename}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter', bubbles: true}}))"
    )
    page.wait(f"{page.item_el(ids['Deploy'])}.innerText.includes('Deploy to staging')", "renamed")
    seen["renamed"] = page.host(Method.STATUS, {"sessionId": ids["Deploy"]})["title"]
    # Export -> import.
    page.click("export-session")
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Exported')", "the export")
    files = sorted(exports.glob("*.jsonl"))
    seen["exported"] = [f.name for f in files]
    opened["path"] = str(files[0])
    before = set(page.session_ids())
    page.click("import-session")
    page.wait(
        f"document.querySelectorAll('[data-testid=session-item]').length > {len(before)}",
        "the import",
    )
    (imported,) = set(page.session_ids()) - before
    page.wait(f"{page.el('detail-id')}.innerText === '{imported}'", "the imported one selected")
    page.wait_text("transcript", "Echo: ship the build")
    status = page.host(Method.STATUS, {"sessionId": imported})
    seen["imported"] = {
        "from": status["importedFrom"],
        "title": status["title"],
        "status": status["status"],
    }
    seen["ids"] = ids
    return seen


LIBRARY_SIZE = 1_000
PROJECTS = 5
RARE = "zanzibar"


@setup_for("library_scale")
@contextlib.contextmanager
def thousand_stored_sessions(args: argparse.Namespace) -> Iterator[list[str]]:
    """1,000 closed sessions in 5 project folders, written by the sidecar's own SQLite
    store before the app starts; one holds RARE in its transcript."""
    import dataclasses

    from bench import transcripts
    from sidecar.domain.records import SessionState

    folders = [Path(args.workspace) / f"project-{i}" for i in range(PROJECTS)]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    store, close = transcripts.open_store(data / "sessions.db")
    now = time.time()
    try:
        for i in range(LIBRARY_SIZE):
            planted = i == LIBRARY_SIZE - 7  # far below the first page
            state = SessionState.IDLE if planted else SessionState.CLOSED
            record = transcripts.record(folders[i % PROJECTS], f"Stored {i}", state)
            # Activity a minute apart, newest first in the order written.
            record = dataclasses.replace(record, updated_at=now - 60 * i, created_at=now - 60 * i)
            store.insert(record)
            if planted:
                message = {"role": "user", "content": f"the {RARE} build failed", "createdAt": "x"}
                store.append_message(record.session_id, 1, message)
                store.update(record.session_id, 1, status=SessionState.CLOSED.value)
                args.planted = record.session_id
    finally:
        close()
    # The list's later pages are held until the scenario has seen the first one drawn.
    from desktop.bridge import Bridge

    real = Bridge.list_page
    args.pages_held = threading.Event()

    def held(self: Bridge, cursor: str | None = None) -> Any:
        if cursor is not None:
            args.pages_held.wait(WAIT)
        return real(self, cursor)

    Bridge.list_page = held  # type: ignore[method-assign]
    # Its own place in the activity order again (the update above made it the newest).
    with contextlib.closing(sqlite3.connect(data / "sessions.db")) as conn, conn:
        conn.execute(
            "UPDATE sessions SET updated_at = ? WHERE id = ?",
            (now - 60 * (LIBRARY_SIZE - 7), args.planted),
        )
    yield []


@scenario
def library_scale(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A thousand sessions: the sidebar draws a page and the next as its end scrolls into
    view; a transcript search finds the one; grouping by project; one session's change
    moves its item alone."""
    page.ready()
    items = "document.querySelectorAll('[data-testid=session-item]')"
    listing = page.el("session-list")
    # The page is ready with the first page drawn while the rest is still on its way.
    first_page = {
        "drawn": page.js(f"{items}.length"),
        "known": page.js(f"{listing}.dataset.total"),
        "loading": page.visible("sidebar-loading"),
    }
    args.pages_held.set()
    page.wait(f"{listing}.dataset.total === '{LIBRARY_SIZE}'", "the whole list")
    seen: dict[str, Any] = {
        "first_page": first_page,
        "loading_after": page.visible("sidebar-loading"),
        "drawn": page.js(f"{items}.length"),
        "more": page.js(f"!!{page.el('sidebar-more')}"),
        "first": page.js(f"{items}[0].querySelector('.item-title').textContent"),
    }
    page.js(f"{listing}.scrollTop = {listing}.scrollHeight")
    page.wait(f"{items}.length > {seen['drawn']}", "the next page")
    seen["drawn_after_scroll"] = page.js(f"{items}.length")
    # End on an item draws the rest and moves to the last one.
    page.js(f"{items}[0].focus()")
    page.js(
        f"{items}[0].dispatchEvent(new KeyboardEvent('keydown', {{key: 'End', bubbles: true}}))"
    )
    page.wait(f"{items}.length === {LIBRARY_SIZE}", "every item after End")
    page.wait(f"document.activeElement === {items}[{LIBRARY_SIZE - 1}]", "focus on the last")
    seen["last"] = page.js("document.activeElement.querySelector('.item-title').textContent")
    # Search over transcript text.
    search = page.el("session-search")
    started = time.monotonic()
    page.js(f"{search}.value = '{RARE[:6]}'; {search}.dispatchEvent(new Event('input'))")
    page.wait(f"{items}.length === 1", "the search's answer")
    seen["search_seconds"] = round(time.monotonic() - started, 2)
    seen["found"] = page.js(f"{items}[0].dataset.sessionId")
    page.js(f"{search}.value = ''; {search}.dispatchEvent(new Event('input'))")
    page.wait(f"{items}.length === 100", "the first page again")
    # Grouped by project: one header per folder, each counting all of its sessions.
    page.js(f"{page.el('group-by-project')}.click()")
    groups = "document.querySelectorAll('[data-testid=session-group]')"
    page.wait(f"{groups}.length === {PROJECTS}", "the project groups")
    seen["groups"] = page.js(
        f"[...{groups}].map(g => [g.dataset.cwd, g.querySelector('.group-count').textContent])"
    )
    seen["grouped_drawn"] = page.js(f"{items}.length")
    page.js(f"{page.el('group-by-project')}.click()")
    page.wait(f"{groups}.length === 0", "the plain list")
    # One session changes (resumed): its item moves to the top, the others stay drawn.
    planted = args.planted
    page.js(f"{items}[5].setAttribute('data-kept', 'yes')")
    page.host(
        Method.SESSION_RESUME,
        {
            "sessionId": planted,
            "cwd": page.host(Method.STATUS, {"sessionId": planted})["cwd"],
            "mcpServers": [],
        },
    )
    page.wait(f"{items}[0].dataset.sessionId === '{planted}'", "the resumed one on top")
    seen["kept_node"] = page.js("!!document.querySelector('[data-kept=yes]')")
    seen["drawn_after_change"] = page.js(f"{items}.length")
    seen["planted"] = planted
    return seen


@setup_for("models")
@contextlib.contextmanager
def provider_with_two_models(args: argparse.Namespace) -> Iterator[list[str]]:
    """The fake Chat Completions server offering two models, the sidecar on it."""
    with fake_chat_server(args) as base_url:
        yield ["--provider", "openai", "--base-url", base_url, "--model", "fake-small"]


@scenario
def models(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The model picker offers the provider's models; a choice is used by the next turn
    and is still shown after Rebuild UI."""
    page.ready()
    sid = page.create_session(args.workspace, "Models")
    picker = page.el("model-select")
    page.wait(f"{picker}.options.length === 2 && !{picker}.disabled", "the model choices")
    seen: dict[str, Any] = {
        "choices": page.js(f"[...{picker}.options].map(o => o.value)"),
        "current": page.js(f"{picker}.value"),
        "pill": page.text("detail-model"),
    }
    page.js(f"{picker}.value = 'fake-large'; {picker}.dispatchEvent(new Event('change'))")
    page.wait(f"{page.el('detail-model')}.innerText === 'fake-large'", "the new model shown")
    page.send("hello")
    page.wait_text("transcript", "echo: hello")
    with urllib.request.urlopen(f"{args.provider_url}/_requests", timeout=5) as response:
        requests = json.loads(response.read())["requests"]
    seen["sent_model"] = requests[-1]["body"]["model"]
    usage = page.el("detail-usage")
    page.wait(f"!{usage}.parentElement.hidden && {usage}.innerText.includes(' in · ')", "usage")
    seen["usage"] = page.text("detail-usage")
    seen["stored_model"] = page.host(Method.STATUS, {"sessionId": sid})["model"]
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.wait(f"{picker}.options.length === 2", "the choices after Rebuild UI")
    seen["after_rebuild"] = page.js(f"{picker}.value")
    return seen


@scenario
def provider_problem(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """No API key for a hosted provider: said once at the top, and the failed turn's error
    says what to set."""
    page.ready()
    banner = page.el("provider-banner")
    page.wait(f"!{banner}.hidden", "the provider banner")
    seen: dict[str, Any] = {"banner": page.text("provider-banner")}
    sid = page.create_session(args.workspace, "No key")
    page.send("hello")
    page.wait_item(sid, "error")
    page.wait(f"!{page.el('error-actions')}.hidden", "the failed turn's actions")
    time.sleep(0.5)  # the prompt's own answer arrives too; it must not repeat the hint
    seen["turn_error"] = page.text("detail-error")
    seen["banners"] = page.js(
        "[...document.querySelectorAll('.banner')].filter(b => !b.hidden).map(b => b.dataset.testid)"
    )
    seen["retry_offered"] = page.visible("error-actions")
    # The cause goes away: the next sidecar runs the keyless offline provider.
    page.app.host.sidecar_args[:] = ["--data-dir", args.data_dir]
    old_pid = page.app.host.pid
    os.kill(old_pid, signal.SIGKILL)
    pill = page.el("sidecar-state")
    page.wait(
        f"{pill}.dataset.state === 'running' && {pill}.dataset.pid !== '{old_pid}'",
        "the new sidecar",
    )
    page.wait(f"{banner}.hidden", "the provider banner gone with its cause")
    seen["banner_after_restart"] = page.visible("provider-banner")
    return seen


@scenario
def scroll(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A transcript scrolled up to read stays where it was across Rebuild UI."""
    page.ready()
    sid = page.long_session(args.workspace, "Long", 20)
    page.select(sid)
    box = page.el("transcript")
    page.wait(f"{box}.scrollHeight > {box}.clientHeight + 400", "a long transcript")
    page.js(f"{box}.scrollTop = 300; {box}.dispatchEvent(new Event('scroll'))")
    time.sleep(0.8)  # the page tells the host (debounced)
    before = page.js(f"{box}.scrollTop")
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.wait(f"{page.el('detail-id')}.innerText === '{sid}'", "the same session")
    page.wait(f"{box}.scrollHeight > {box}.clientHeight + 400", "the transcript again")
    page.wait(f"{box}.scrollTop > 0", "the scroll position")
    return {"before": before, "after": page.js(f"{box}.scrollTop")}


# Answers the page gets late: a busy bridge, a slow machine.
SLOW_PAGE_SECONDS = 4.0

# Each session's first transcript page (offset null) and every session list are answered
# by the host at once and handed to the page late. `__answered` lists what the host has
# answered (a session id, or "list"), so what is done next is newer than that answer;
# `__delivered` what the page has been handed.
SLOW_ANSWERS = """
const api = window.pywebview.api;
window.__answered = []; window.__delivered = [];
const late = (name, key) => {
  const real = api[name];
  api[name] = (...a) => real(...a).then((v) => {
    const what = key(a);
    if (what === null) return v;
    window.__answered.push(what);
    return new Promise((done) => setTimeout(() => { window.__delivered.push(what); done(v); }, LATE));
  });
};
late("messages", (a) => (a[1] === null ? a[0] : null));
late("list_page", () => "list");
"""


@scenario
def slow_page(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Answers that come late miss nothing that happened after they were given: a whole
    turn's reply and an approval card (which keeps the focus) while the transcript page
    is on its way; a turn's failure while the session list is."""
    (Path(args.workspace) / "poem.txt").write_text("one\n")
    page.ready()
    page.js(SLOW_ANSWERS.replace("LATE", str(int(SLOW_PAGE_SECONDS * 1000))))
    users = "document.querySelectorAll('.stored .msg.user').length"
    lives = "document.querySelectorAll('.live > *').length"

    def count(what: str, key: str) -> int:
        return int(page.js(f"window.__{what}.filter((x) => x === '{key}').length"))

    def wait_count(what: str, key: str, at_least: int) -> None:
        seen = f"window.__{what}.filter((x) => x === '{key}').length"
        page.wait(f"{seen} >= {at_least}", f"{key} {what} {at_least} times")

    sid = page.create_session(args.workspace, "Slow")
    wait_count("answered", sid, 1)
    page.send("hello")  # a turn newer than the page on its way
    page.wait_item(sid, "idle")
    page.wait_text("transcript", "Echo: hello", WAIT + SLOW_PAGE_SECONDS)
    page.wait(f"{users} === 1 && {lives} === 0", "the stored turn alone")
    seen: dict[str, Any] = {"reply": page.text("transcript")}
    other = page.create_session(args.workspace, "Slow approval")
    wait_count("answered", other, 1)
    page.send('/edit poem.txt one "ONE"')
    card = page.el("approval-card")
    page.wait(f"!!{card}", "the approval card")
    wait_count("delivered", other, 1)
    time.sleep(0.5)  # what the page does once its transcript is drawn
    call_id = page.js(f"{card}.dataset.toolCallId")
    seen["card_focused"] = page.js(f"document.activeElement === {card}")
    seen["cards_for_the_call"] = page.js(
        f"document.querySelectorAll('.tool[data-tool-call-id=\"{call_id}\"]').length"
    )
    page.click("approve-allow_once")
    page.wait_item(other, "idle")
    seen["poem"] = (Path(args.workspace) / "poem.txt").read_text()
    # A reload of the list (as after a restart) is on its way when the turn fails.
    lists = count("answered", "list")
    page.app.push_bridge_event(
        "auto_resumed", {"resumed": [], "failed": [], "interrupted": [], "why": "start"}
    )
    wait_count("answered", "list", lists + 1)
    page.send("/fail boom")
    page.wait_item(other, "error")
    wait_count("delivered", "list", lists + 1)
    time.sleep(0.5)
    seen["status_after_the_late_list"] = page.text("session-status", other)
    # A transcript scrolled up to read is where it was when the user comes back, though
    # its page is slow (the page remembers views while it waits: not the empty one).
    long_id = page.long_session(args.workspace, "Long", 20)
    box = page.el("transcript")
    page.select(long_id)
    wait_count("delivered", long_id, 1)
    page.wait(f"{box}.scrollHeight > {box}.clientHeight + 400", "a long transcript")
    page.js(f"{box}.scrollTop = 300; {box}.dispatchEvent(new Event('scroll'))")
    page.select(other)
    wait_count("delivered", other, 2)
    page.select(long_id)
    wait_count("delivered", long_id, 2)
    time.sleep(0.5)
    seen["scroll_back"] = page.js(f"{box}.scrollTop")
    # A turn another client runs meanwhile is appended below, and the reader stays put.
    page.prompt_elsewhere(long_id, "one more")
    page.wait_text("transcript", "Echo: one more")
    time.sleep(0.5)
    seen["scroll_after_a_turn"] = page.js(f"{box}.scrollTop")
    return seen


@setup_for("agents")
@contextlib.contextmanager
def scripted_agents(args: argparse.Namespace) -> Iterator[list[str]]:
    """An agents.toml with the scripted ACP agent (tests/agents/scripted_agent.py) as
    `scripted`, and two agents listed but not installed: `ghost` with an install command,
    `bare` without one and with markup in its command (text, never HTML)."""
    from external_agents import AgentSetup

    setup = AgentSetup(Path(args.data_dir).parent / "agents")
    setup.add("scripted")
    with setup.file.open("a") as toml:
        toml.write(
            '\n[agents.ghost]\ncommand = ["no-such-agent-acp-program"]\n'
            'install = "npm install -g ghost-agent-acp"\n'
            '\n[agents.bare]\ncommand = ["<i>nowhere-acp"]\n'
        )
    yield setup.args()


@scenario
def agents(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The new-session form's agent picker: the list as the sidecar gives it, an agent not
    installed says how to install it (nothing created), the scripted agent picked runs the
    session's turns (its plan pinned above the composer), and the session shows its agent
    where a builtin one shows none."""
    page.ready()
    seen: dict[str, Any] = {}
    page.click("new-session")
    picker = page.el("new-agent")
    page.wait(f"[...{picker}.options].some(o => o.value === 'scripted')", "the agent list")
    seen["options"] = page.js(
        f"[...{picker}.options].map(o => [o.value, o.textContent, o.dataset.available])"
    )
    seen["default"] = page.js(f"{picker}.value")
    pick = f"{picker}.dispatchEvent(new Event('change'))"
    page.fill("new-cwd", args.workspace)
    page.fill("new-title", "Outside")
    page.js(f"{picker}.value = 'ghost'; {pick}")
    seen["ghost_note"] = page.text("new-agent-note") if page.visible("new-agent-note") else None
    page.click("create-session")  # refused at once, before any call
    seen["ghost_focus"] = page.focused()
    page.js(f"{picker}.value = 'bare'; {pick}")
    note = page.el("new-agent-note")
    seen["bare_note"] = {"text": page.text("new-agent-note"), "html": page.js(f"{note}.innerHTML")}
    page.js(f"{picker}.value = 'scripted'; {pick}")
    seen["scripted_note_shown"] = page.visible("new-agent-note")
    page.click("create-session")
    page.wait("document.querySelectorAll('[data-testid=session-item]').length === 1", "Outside")
    (sid,) = page.session_ids()
    page.wait_item(sid, "idle", 1)
    seen["badge"] = page.text("session-agent", sid)
    seen["item_label"] = page.js(f"{page.item_el(sid)}.getAttribute('aria-label')")
    seen["detail_agent"] = page.text("detail-agent") if page.visible("detail-agent") else None
    page.send("say hi from agent")
    page.wait_text("transcript", "hi from agent")
    page.wait_item(sid, "idle")
    seen["transcript"] = page.text("transcript")
    seen["summary_agent"] = page.host(Method.STATUS, {"sessionId": sid}).get("agent")
    # The agent's own plan (ACP `plan` updates) is pinned above the composer too.
    page.send("plan read the code | write the fix")
    page.wait(f"!{page.el('plan')}.hidden", "the agent's plan pinned")
    page.wait_item(sid, "idle")
    rows = "[...document.querySelectorAll('[data-testid=plan-entry]')]"
    seen["plan"] = {
        "rows": page.js(
            f"{rows}.map(r => [r.dataset.status, r.querySelector('.plan-text').textContent])"
        ),
        "summary": page.text("plan-summary"),
    }
    # The form again: builtin is picked, and a builtin session shows no agent.
    page.click("new-session")
    seen["default_again"] = page.js(f"{picker}.value")
    page.click("cancel-new")
    ours = page.create_session(args.workspace, "Ours")
    seen["builtin_badge"] = bool(page.js(f"!!{page.el('session-agent', ours)}"))
    seen["builtin_detail_agent"] = page.visible("detail-agent")
    seen["sessions"] = sorted(
        s["_meta"]["agent"] for s in page.host(Method.SESSION_LIST, {})["sessions"]
    )
    return seen


# ---- worktrees and review (issue 24) ---------------------------------------------------


def git(cwd: Path | str, *args: str) -> str:
    """Real git in `cwd`, its output (a failure raises, with git's words)."""
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def git_repo(workspace: Path, files: dict[str, str]) -> None:
    """`workspace` as a git repository on `main` with `files` committed."""
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "config", "user.name", "Window Test")
    git(workspace, "config", "user.email", "window@test.invalid")
    for name, text in files.items():
        (workspace / name).write_text(text)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "start")


def auto_approve(page: Page, session_id: str) -> None:
    page.host(
        Method.SESSION_SET_CONFIG_OPTION,
        {"sessionId": session_id, "configId": "approval", "value": "auto"},
    )


def branch_files(page: Page) -> list[str]:
    script = "[...document.querySelectorAll('[data-testid=branch-file]')].map(f => f.dataset.path)"
    return list(page.js(script) or [])


def badges(page: Page, session_id: str) -> dict[str, Any]:
    def shown(testid: str) -> str | None:
        el = page.el(testid, session_id)
        return str(page.js(f"{el} ? {el}.innerText : null") or "") or None

    return {k: shown(f"session-{k}") for k in ("branch", "sync", "dirty")}


def confirm_branch(page: Page) -> str:
    """The branch view's confirmation: its question; then confirmed."""
    box = page.el("branch-confirm")
    page.wait(f"!{box}.hidden", "the confirmation")
    page.wait(f"document.activeElement === {page.el('branch-confirm-cancel')}", "its focus")
    question = page.text("branch-confirm-text")
    page.click("branch-confirm-ok")
    return question


@scenario
def worktree_merge(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A session made in a new worktree from the form (a bad branch refused next to the
    form first), its branch badge and its repository's group; a turn writes a file; the
    branch's Changes view; a squash merge after its confirmation; then a conflicting
    merge refused, naming the file."""
    workspace = Path(args.workspace)
    git_repo(workspace, {"README.md": "the app\n"})
    page.ready()
    seen: dict[str, Any] = {}
    page.click("new-session")
    page.fill("new-cwd", args.workspace)
    page.fill("new-title", "In a worktree")
    seen["options_hidden"] = not page.visible("new-worktree-options")
    page.js(f"{page.el('new-worktree')}.click()")
    seen["options_shown"] = page.visible("new-worktree-options")
    page.fill("new-branch", "bad..name")
    page.click("create-session")
    error = page.el("new-worktree-error")
    page.wait(f"!{error}.hidden", "the worktree's error")
    seen["bad_branch"] = {
        "error": page.text("new-worktree-error"),
        "form_open": page.visible("new-session-form"),
        "focus": page.focused(),
        "kept": page.js(f"{page.el('new-branch')}.value"),
        "sessions": len(page.session_ids()),
    }
    page.fill("new-branch", "feature-x")
    page.click("create-session")
    page.wait("document.querySelectorAll('[data-testid=session-item]').length === 1", "created")
    (sid,) = page.session_ids()
    page.wait_item(sid, "idle", 1)
    summary = page.host(Method.STATUS, {"sessionId": sid})
    seen["worktree"] = summary["worktree"]
    seen["cwd"] = summary["cwd"]
    page.wait(f"!!{page.el('session-branch', sid)}", "the branch badge")
    seen["badges"] = badges(page, sid)
    seen["detail_pill"] = page.text("detail-worktree")
    # A plain session on the same repository: grouped with the worktree one.
    plain = page.create_session(args.workspace, "Plain")
    page.js(f"{page.el('group-by-project')}.click()")
    groups = "[...document.querySelectorAll('[data-testid=session-group]')]"
    page.wait(f"{groups}.length > 0", "the groups")
    seen["groups"] = page.js(
        f"{groups}.map(g => [g.dataset.repo, g.querySelector('.group-count').textContent])"
    )
    seen["plain_badge"] = badges(page, plain)["branch"]
    page.select(sid)
    auto_approve(page, sid)
    page.send("/write feature.txt made in the worktree")
    page.wait_changes(1)
    page.wait_item(sid, "idle")
    page.wait(f"!!{page.el('session-dirty', sid)}", "the dirty badge after the turn")
    seen["badges_after_turn"] = badges(page, sid)
    seen["in_worktree"] = (Path(summary["cwd"]) / "feature.txt").read_text()
    seen["in_repo_before"] = (workspace / "feature.txt").exists()
    # The Changes view of the whole branch.
    page.click("branch-changes")
    page.wait(f"{SEL}('[data-testid=branch-file]')", "the branch's files")
    view = page.el("branch-view")
    seen["view"] = {
        "title": page.text("branch-title"),
        "totals": page.text("branch-totals"),
        "files": branch_files(page),
        "rows": page.diff_rows(view),
        "discard_disabled": page.js(f"{page.el('discard-worktree')}.disabled"),
    }
    seen["shot"] = page.screenshot(Path(args.artifacts) / "desktop-branch-view.png")
    page.js(f"{page.el('merge-strategy')}.value = 'squash'")
    page.click("merge-branch")
    seen["merge_question"] = confirm_branch(page)
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Merged')", "the merge")
    seen["merge_notice"] = page.text("notice-banner")
    seen["in_repo_after"] = (workspace / "feature.txt").read_text()
    seen["main_log"] = git(workspace, "log", "--format=%s", "main").splitlines()
    page.wait(f"!{page.el('session-dirty', sid)}", "the dirty badge gone after the merge")
    seen["badges_after_merge"] = badges(page, sid)
    seen["view_open_after"] = page.visible("branch-view")
    # A conflict: main and the branch change the same line; the merge names the file.
    (workspace / "feature.txt").write_text("main's own line\n")
    git(workspace, "commit", "-q", "-am", "main moves on")
    page.click("branch-close")
    page.send("/write feature.txt the worktree's second line")
    page.wait_changes(2)
    page.wait_item(sid, "idle")
    page.click("branch-changes")
    page.wait(f"{SEL}('[data-testid=branch-file]')", "the branch's files again")
    page.js(f"{page.el('merge-strategy')}.value = 'merge'")
    page.click("merge-branch")
    confirm_branch(page)
    page.wait(f"!{page.el('branch-error')}.hidden", "the conflict")
    seen["conflict"] = {
        "text": page.text("branch-error-text"),
        "files": page.js(
            "[...document.querySelectorAll('[data-testid=branch-conflict]')].map(l => l.innerText)"
        ),
        "main_file": (workspace / "feature.txt").read_text(),
        "main_status": git(workspace, "status", "--porcelain"),
    }
    # Esc closes the view, the focus back on its button.
    key(page, "Escape", page.el("branch-view"))
    page.wait(f"{page.el('branch-view')}.hidden", "the view closed by Esc")
    seen["focus_after_esc"] = page.focused()
    return seen


@scenario
def worktree_discard(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """Discard a worktree: refused in the page while the session is live, then, once it is
    closed, confirmed and done: the worktree and its branch gone, the session kept."""
    workspace = Path(args.workspace)
    git_repo(workspace, {"README.md": "the app\n"})
    page.ready()
    made = page.host(
        Method.SESSION_NEW,
        {
            "cwd": args.workspace,
            "mcpServers": [],
            "_meta": {"title": "To discard", "worktree": True},
        },
    )
    sid = made["sessionId"]
    page.select(sid)
    page.wait(f"!!{page.el('session-branch', sid)}", "the branch badge")
    worktree = made["_meta"]["worktree"]
    seen: dict[str, Any] = {"branch": worktree["branch"], "badges": badges(page, sid)}
    page.click("branch-changes")
    page.wait(f"!{page.el('branch-empty')}.hidden", "an empty branch")
    discard = page.el("discard-worktree")
    seen["live"] = {
        "disabled": page.js(f"{discard}.disabled"),
        "title": page.js(f"{discard}.title"),
        "empty": page.text("branch-empty"),
    }
    page.click("branch-close")
    # 120 files: the view shows a page of 100, the rest on "Load more files".
    auto_approve(page, sid)
    page.send("$ for i in $(seq 1 120); do echo line $i > f$i.txt; done")
    # Not "running" first: a turn this short may be over before a poll sees it.
    page.wait_text("transcript", "exited with status 0")
    page.wait_item(sid, "idle")
    page.click("branch-changes")
    page.wait("document.querySelectorAll('[data-testid=branch-file]').length > 0", "a page")
    seen["first_page"] = {
        "files": len(branch_files(page)),
        "more": page.visible("branch-more"),
        "totals": page.text("branch-totals"),
    }
    page.click("branch-more")
    page.wait("document.querySelectorAll('[data-testid=branch-file]').length > 100", "page 2")
    files = branch_files(page)
    seen["all_pages"] = {
        "files": len(files),
        "distinct": len(set(files)),
        "more": page.visible("branch-more"),
        "totals": page.text("branch-totals"),
    }
    page.click("branch-close")
    page.click("close-session")
    page.wait_item(sid, "closed")
    page.click("branch-changes")
    page.click("discard-worktree")
    seen["question"] = confirm_branch(page)
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Discarded')", "the discard")
    seen["notice"] = page.text("notice-banner")
    page.wait(f"!{page.el('session-branch', sid)}", "the badge gone")
    seen["after"] = {
        "badges": badges(page, sid),
        "view_open": page.visible("branch-view"),
        "button_shown": page.visible("branch-changes"),
        "directory": Path(worktree["path"]).exists(),
        "branches": git(workspace, "branch", "--list", worktree["branch"]).strip(),
        "listed": sid in page.session_ids(),
        "summary_worktree": page.host(Method.STATUS, {"sessionId": sid}).get("worktree"),
    }
    return seen


POEM = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen", "twenty",
]  # fmt: skip


def poem(**changed: str) -> str:
    return "".join(f"{changed.get(line, line)}\n" for line in POEM)


@scenario
def instruction_files(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """The details list the AGENTS.md files the builtin agent read, with their sizes (a
    binary one as left out), and follow a change to them."""
    workspace = Path(args.workspace)
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)  # read up to its root
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "AGENTS.md").write_bytes(b"\x00\x01binary")
    page.ready()
    page.create_session(str(workspace / "sub"), "Instructions")
    listed = (
        "[...document.querySelectorAll('[data-testid=instruction-file]')].map(f => f.innerText)"
    )
    page.wait(f"{listed}.length === 2", "the instruction files")
    first = page.js(listed)
    (workspace / "AGENTS.md").write_text("Use tabs, always.\n")
    page.send("hello")
    page.wait(f"{listed}.some(t => t.includes('18 bytes'))", "the re-read file")
    return {"first": first, "after": page.js(listed), "shown": page.visible("instruction-files")}


@scenario
def hunk_review(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A turn's diff card reviewed hunk by hunk: keys move between hunks, `a` keeps one,
    `r` reverts another on disk (the card is drawn again), and a hunk whose lines changed
    since the turn is reverted only after "Revert anyway"."""
    workspace = Path(args.workspace)
    (workspace / "poem.txt").write_text(poem())
    page.ready()
    sid = page.create_session(args.workspace, "Review")
    auto_approve(page, sid)
    page.send("/write poem.txt " + poem(two="TWO", nineteen="NINETEEN").rstrip("\n"))
    slot = page.wait_changes(1)
    page.wait_item(sid, "idle")
    page.js(f"{slot}.querySelector('[data-testid=change-file]').click()")
    review = f"{slot}.querySelector('[data-testid=file-review]')"
    hunks = f"[...{review}.querySelectorAll('[data-testid=hunk]')]"
    page.wait(f"!!{review} && {hunks}.length === 2", "two hunks to review")
    seen: dict[str, Any] = {
        "state": page.js(f"{review}.querySelector('[data-testid=file-review-state]').innerText"),
        "rows": page.diff_rows(review),
    }
    # Keys: focus the first hunk, j to the second, k back; a keeps the first (and moves on).
    page.js(f"{hunks}[0].focus()")
    key(page, "j", "document.activeElement")
    seen["after_j"] = page.js(f"{hunks}.indexOf(document.activeElement)")
    key(page, "k", "document.activeElement")
    seen["after_k"] = page.js(f"{hunks}.indexOf(document.activeElement)")
    key(page, "a", "document.activeElement")
    seen["after_a"] = {
        "verdicts": page.js(f"{hunks}.map(h => h.dataset.verdict)"),
        "focus": page.js(f"{hunks}.indexOf(document.activeElement)"),
    }
    # r on the second: reverted on disk, the card drawn again with the focus on it.
    key(page, "r", "document.activeElement")
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Reverted')", "the revert")
    seen["notice"] = page.text("notice-banner")
    seen["on_disk"] = (workspace / "poem.txt").read_text()
    page.wait(f"!!{review} && {hunks}.some(h => h.dataset.verdict === 'rejected')", "the mark")
    seen["after_r"] = {
        "verdicts": page.js(f"{hunks}.map(h => h.dataset.verdict)"),
        "state": page.js(f"{review}.querySelector('[data-testid=file-review-state]').innerText"),
        "focused_hunk": page.js(f"{hunks}.indexOf(document.activeElement)"),
    }
    seen["shot"] = page.screenshot(Path(args.artifacts) / "desktop-hunk-review.png")
    # Turn 2 changes a line; the user changes it again; Reject is refused, then forced.
    page.send("/edit poem.txt ten TEN")
    slot2 = page.wait_changes(2)
    page.wait_item(sid, "idle")
    (workspace / "poem.txt").write_text(
        (workspace / "poem.txt").read_text().replace("TEN", "ten, by the user")
    )
    page.js(f"{slot2}.querySelector('[data-testid=change-file]').click()")
    review2 = f"{slot2}.querySelector('[data-testid=file-review]')"
    page.wait(f"!!{review2} && !!{review2}.querySelector('[data-testid=hunk]')", "turn 2's hunk")
    page.js(f"{review2}.querySelector('[data-testid=hunk-reject]').click()")
    problem = f"{review2}.querySelector('[data-testid=revert-problem]')"
    page.wait(f"!{problem}.hidden", "the refusal")
    seen["refusal"] = {
        "text": page.js(f"{problem}.innerText"),
        "focus": page.focused(),
        "on_disk": (workspace / "poem.txt").read_text(),
    }
    page.js(f"{problem}.querySelector('[data-testid=revert-force]').click()")
    page.wait(
        f"!{notice}.hidden && {notice}.innerText.includes('overwriting')", "the forced revert"
    )
    seen["forced_notice"] = page.text("notice-banner")
    seen["forced_on_disk"] = (workspace / "poem.txt").read_text()
    # The notice's Undo: a code rewind's undo, the user's line back.
    page.click("notice-action")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Undid')", "the undo")
    seen["undone_on_disk"] = (workspace / "poem.txt").read_text()
    page.wait(
        f"!{review2}.querySelector('[data-testid=hunk]').dataset.verdict", "the mark forgotten"
    )
    return seen


@scenario
def file_review(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A turn's file reviewed as a whole: with one hunk accepted, the file's Reject says
    "Reject the rest" and reverts only the hunks not accepted; in another turn, with one
    hunk reverted, the file's Accept keeps the one left (the reverted one stays so)."""
    workspace = Path(args.workspace)
    (workspace / "poem.txt").write_text(poem())
    (workspace / "other.txt").write_text(poem())
    page.ready()
    sid = page.create_session(args.workspace, "File review")
    auto_approve(page, sid)
    changed = poem(two="TWO", ten="TEN", nineteen="NINETEEN").rstrip("\n")
    page.send("/write poem.txt " + changed)
    slot = page.wait_changes(1)
    page.wait_item(sid, "idle")
    page.js(f"{slot}.querySelector('[data-testid=change-file]').click()")
    review = f"{slot}.querySelector('[data-testid=file-review]')"
    hunks = f"[...{review}.querySelectorAll('[data-testid=hunk]')]"
    reject = f"{review}.querySelector('[data-testid=file-reject]')"
    accept = f"{review}.querySelector('[data-testid=file-accept]')"
    page.wait(f"!!{review} && {hunks}.length === 3", "three hunks to review")
    seen: dict[str, Any] = {"before": {"text": page.js(f"{reject}.innerText")}}
    seen["before"]["title"] = page.js(f"{reject}.title")
    page.js(f"{hunks}[1].querySelector('[data-testid=hunk-accept]').click()")
    page.wait(f"{hunks}[1].dataset.verdict === 'accepted'", "the middle hunk kept")
    seen["one_kept"] = {"text": page.js(f"{reject}.innerText"), "title": page.js(f"{reject}.title")}
    page.js(f"{reject}.click()")
    notice = page.el("notice-banner")
    page.wait(f"!{notice}.hidden && {notice}.innerText.includes('Reverted')", "the revert")
    seen["notice"] = page.text("notice-banner")
    page.wait(
        f"!!{review} && {hunks}.filter(h => h.dataset.verdict === 'rejected').length === 2",
        "the two reverted",
    )
    seen["verdicts"] = page.js(f"{hunks}.map(h => h.dataset.verdict)")
    seen["on_disk"] = (workspace / "poem.txt").read_text()
    seen["after"] = {
        "state": page.js(f"{review}.querySelector('[data-testid=file-review-state]').innerText"),
        "reject_disabled": page.js(f"{reject}.disabled"),
        "accept_disabled": page.js(f"{accept}.disabled"),
    }
    # Turn 2: one hunk reverted by itself, then the file's Accept keeps the other one.
    page.send("/write other.txt " + poem(three="THREE", eighteen="EIGHTEEN").rstrip("\n"))
    slot2 = page.wait_changes(2)
    page.wait_item(sid, "idle")
    page.js(f"{slot2}.querySelector('[data-testid=change-file]').click()")
    review2 = f"{slot2}.querySelector('[data-testid=file-review]')"
    hunks2 = f"[...{review2}.querySelectorAll('[data-testid=hunk]')]"
    page.wait(f"!!{review2} && {hunks2}.length === 2", "turn 2's hunks")
    page.js(f"{hunks2}[0].querySelector('[data-testid=hunk-reject]').click()")
    page.wait(f"!!{review2} && {hunks2}[0].dataset.verdict === 'rejected'", "the first reverted")
    page.js(f"{review2}.querySelector('[data-testid=file-accept]').click()")
    page.wait(f"{hunks2}[1].dataset.verdict === 'accepted'", "the rest kept")
    seen["second"] = {
        "verdicts": page.js(f"{hunks2}.map(h => h.dataset.verdict)"),
        "state": page.js(f"{review2}.querySelector('[data-testid=file-review-state]').innerText"),
        "accept_disabled": page.js(
            f"{review2}.querySelector('[data-testid=file-accept]').disabled"
        ),
        "reject_disabled": page.js(
            f"{review2}.querySelector('[data-testid=file-reject]').disabled"
        ),
        "on_disk": (workspace / "other.txt").read_text(),
    }
    return seen


HOSTILE_PY = (
    "def greet(name):\n"
    '    return "<img src=x onerror=window.pwned=1>" + name  # </span><b>bold</b>\n'
)


def code_rows(page: Page, root: str) -> list[dict[str, Any]]:
    """Each added row's code under `root`: its text, whether coloured, its tokens' classes,
    and the row's background (the add colour stays under the syntax colours)."""
    script = (
        f"[...({root}).querySelectorAll('[data-testid=diff-row][data-kind=add]')].map(r => {{"
        " const code = r.querySelector('.diff-code');"
        " return {text: code.textContent, hl: code.classList.contains('hl'),"
        " classes: [...code.children].map(c => c.className),"
        " tags: [...code.querySelectorAll('*')].map(c => c.tagName),"
        " background: getComputedStyle(r).backgroundColor}; })"
    )
    return list(page.js(script) or [])


@scenario
def syntax_colours(page: Page, args: argparse.Namespace) -> dict[str, Any]:
    """A .py file changed by a turn in a worktree session: its hunk lines in the turn's
    diff card and in the branch's Changes view carry syntax colours (token spans), the
    file's hostile text shown as text, never as markup."""
    workspace = Path(args.workspace)
    git_repo(workspace, {"README.md": "the app\n"})
    page.ready()
    page.click("new-session")
    page.fill("new-cwd", args.workspace)
    page.fill("new-title", "Colours")
    page.js(f"{page.el('new-worktree')}.click()")
    page.click("create-session")
    page.wait("document.querySelectorAll('[data-testid=session-item]').length === 1", "created")
    (sid,) = page.session_ids()
    page.wait_item(sid, "idle", 1)
    auto_approve(page, sid)
    page.send("/write app.py " + HOSTILE_PY)
    slot = page.wait_changes(1)
    page.wait_item(sid, "idle")
    page.js(f"{slot}.querySelector('[data-testid=change-file]').click()")
    review = f"{slot}.querySelector('[data-testid=file-review]')"
    page.wait(f"!!{review} && !!{review}.querySelector('[data-testid=hunk]')", "the hunk")
    seen: dict[str, Any] = {"card": code_rows(page, review)}
    page.click("branch-changes")
    page.wait(f"{SEL}('[data-testid=branch-file]')", "the branch's files")
    seen["branch"] = code_rows(page, page.el("branch-view"))
    seen["pwned"] = page.js("window.pwned === undefined ? null : window.pwned")
    seen["images"] = page.js("document.querySelectorAll('.diff-code img, .diff-code b').length")
    return seen


# Steering a running agent: the queue, edit and resend, the plan, notifications.
SCENARIOS.update(STEER_SCENARIOS)
SETUPS.update(STEER_SETUPS)
# The composer's attachments: the `@` popup, pasted images.
SCENARIOS.update(COMPOSE_SCENARIOS)
SETUPS["image_stored"] = provider_with_two_models  # a provider that takes images


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--artifacts", default="test-artifacts")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    result: dict[str, Any] = {"error": None, "sidecar_pids": []}
    setup = SETUPS.get(args.scenario, lambda _: contextlib.nullcontext([]))
    with xvfb() as display, setup(args) as extra_args:
        os.environ["DISPLAY"] = display
        extra_args = [*SIDECAR_ARGS.get(args.scenario, []), *extra_args]
        app = DesktopApp(
            AppOptions(
                sidecar_args=["--data-dir", args.data_dir, *extra_args],
                default_cwd=args.workspace,
                config_dir=Path(args.data_dir) / "config",
            )
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
                result["quit_started"] = time.time()
                app.windows.close_all()  # as the user closing the last window

        started = time.monotonic()
        result["exit_code"] = app.run(run)
        result["total_seconds"] = round(time.monotonic() - started, 2)
        if "quit_started" in result:
            result["quit_seconds"] = round(time.time() - result["quit_started"], 2)
    print("RESULT " + json.dumps(result), flush=True)
    return exit_when_threads_finish(0)


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    raise SystemExit(main())
