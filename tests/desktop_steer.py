"""Window scenarios for steering a running agent (registered into tests/desktop_driver.py's
SCENARIOS): the queue above the composer, Send now, Stop with a paused queue, edit and
resend in place, the pinned plan, and system notifications over a private D-Bus session
bus with a recording notification server (tests/notification_server.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from protocol.methods import Method

WAIT = 30.0
HERE = Path(__file__).resolve().parent
USERS = "[...document.querySelectorAll('.stored .msg.user')].map(m => m.innerText)"
QUEUED = "[...document.querySelectorAll('[data-testid=queue-text]')].map(m => m.innerText)"


def _item(index: int, testid: str) -> str:
    """A control of the queue's item `index` (from 0), as a JS expression."""
    return (
        f"document.querySelectorAll('[data-testid=queue-item]')[{index}]"
        f".querySelector('[data-testid={testid}]')"
    )


def _enter(page: Any, **mods: bool) -> None:
    flags = "".join(f", {k}: true" for k, v in mods.items() if v)
    page.js(
        f"{page.el('prompt-input')}.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter',"
        f" bubbles: true, cancelable: true{flags}}}))"
    )


def _type(page: Any, text: str, **mods: bool) -> None:
    """Type `text` in the composer and press Enter (with `mods`, e.g. ctrlKey)."""
    page.fill("prompt-input", text)
    _enter(page, **mods)


def _queued(page: Any, count: int) -> list[str]:
    page.wait(f"{QUEUED}.length === {count}", f"{count} queued messages")
    return list(page.js(QUEUED) or [])


def queue_steer(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Messages queued while a turn runs: edited, removed, run in order; Send now; Stop
    keeps a paused queue (across Rebuild UI) and Resume runs it; Stop and clear queue."""
    page.ready()
    sid = page.create_session(args.workspace, "Queue")
    seen: dict[str, Any] = {}
    page.send("/sleep 3 first")
    page.wait_item(sid, "running")
    seen["send_label"] = page.text("send")
    _type(page, "/sleep 4 one")
    page.send("two")  # the button queues too
    _type(page, "three")
    seen["queued"] = _queued(page, 3)
    seen["count"] = page.text("queue-count")
    seen["input_after"] = page.js(f"{page.el('prompt-input')}.value")
    page.js(f"{_item(1, 'queue-edit')}.click()")
    area = _item(1, "queue-edit-input")
    page.wait(f"!!{area}", "the queued message's editor")
    page.js(f"{area}.value = 'two, edited'")
    page.js(f"{_item(1, 'queue-save')}.click()")
    page.wait(f"{QUEUED}.includes('two, edited')", "the edit")
    page.js(f"{_item(2, 'queue-remove')}.click()")
    seen["after_edit_remove"] = _queued(page, 2)
    page.wait_text("transcript", "Echo: two, edited")
    page.wait_item(sid, "idle")
    page.wait(f"{page.el('queue')}.hidden", "the queue empty")
    page.wait(f"{USERS}.length === 3", "the three turns stored")
    seen["ran"] = page.js(USERS)
    seen["three_ran"] = "Echo: three" in page.text("transcript")
    # Send now: the running turn is cancelled and this message runs next.
    page.send("/sleep 30 long")
    page.wait_item(sid, "running")
    page.wait(f"!{page.el('send-now')}.hidden", "Send now offered")
    _type(page, "urgent", ctrlKey=True)
    page.wait_text("transcript", "Echo: urgent")
    page.wait_item(sid, "idle")
    seen["send_now"] = {
        "slept": "Slept 30 s" in page.text("transcript"),
        "users": page.js(USERS)[-2:],
    }
    # Stop keeps the queue, paused; it survives Rebuild UI; Resume runs it.
    page.send("/sleep 30 again")
    page.wait_item(sid, "running")
    _type(page, "after stop")
    _type(page, "and then")
    _queued(page, 2)
    page.click("stop")
    page.wait_item(sid, "idle")
    page.wait(f"!{page.el('queue-paused')}.hidden", "the queue paused")
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    page.wait(f"!{page.el('queue-paused')}.hidden", "the paused queue after the rebuild")
    page.js(f"{_item(1, 'queue-up')}.click()")  # "and then" first
    page.wait(f"{QUEUED}[0] === 'and then'", "the move")
    seen["shot"] = page.screenshot(Path(args.artifacts) / "desktop-queue.png")
    seen["paused"] = {
        "queued": _queued(page, 2),
        "up_disabled": page.js(f"{_item(0, 'queue-up')}.disabled"),
        "resume": page.visible("queue-resume"),
        "ran": "Echo: after stop" in page.text("transcript"),
        "sidecar": page.host(Method.QUEUE_LIST, {"sessionId": sid})["paused"],
    }
    page.click("queue-resume")
    page.wait_text("transcript", "Echo: after stop")
    page.wait(f"{page.el('queue')}.hidden", "the queue run")
    page.wait_item(sid, "idle")
    page.wait(f"{USERS}.slice(-2).join() === 'and then,after stop'", "the resumed queue stored")
    seen["resumed"] = page.js(USERS)[-3:]
    # Stop and clear queue: the waiting messages go.
    page.send("/sleep 30 cleared")
    page.wait_item(sid, "running")
    _type(page, "never")
    _queued(page, 1)
    page.click("stop-clear")
    page.wait_item(sid, "idle")
    page.wait(f"{page.el('queue')}.hidden", "the queue cleared")
    seen["cleared"] = {
        "sidecar": page.host(Method.QUEUE_LIST, {"sessionId": sid}),
        "ran": "Echo: never" in page.text("transcript"),
    }
    return seen


PLAN = {
    "entries": [
        {"content": "Read the code", "status": "completed", "priority": "medium"},
        {"content": "Write the fix", "status": "in_progress", "priority": "high"},
        {"content": "<b>Test it</b>", "status": "pending", "priority": "low"},
    ]
}


def _plan(page: Any) -> dict[str, Any]:
    rows = "[...document.querySelectorAll('[data-testid=plan-entry]')]"
    return {
        "rows": page.js(
            f"{rows}.map(r => [r.dataset.status, r.querySelector('.plan-mark').textContent,"
            " r.querySelector('.plan-text').textContent])"
        ),
        "summary": page.text("plan-summary"),
        "bold": bool(page.js(f"!!{page.el('plan')}.querySelector('b')")),
    }


def edit_plan(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Edit and resend an earlier message in place (the earlier branch stays, behind the
    rewind's marker); the pinned plan after a builtin `update_plan`, collapsible, back
    after a switch and after Rebuild UI."""
    page.ready()
    sid = page.create_session(args.workspace, "Edit and plan")
    page.send("first words")
    page.wait_text("transcript", "Echo: first words")
    page.send("second words")
    page.wait_text("transcript", "Echo: second words")
    page.wait_item(sid, "idle")
    seen: dict[str, Any] = {}
    turn1 = page.turn_el("user-turn", 1)
    page.js(f"{turn1}.querySelector('[data-testid=msg-edit]').click()")
    form = f"{turn1}.querySelector('[data-testid=edit-form]')"
    page.wait(f"!!{form}", "the editor in place")
    seen["editor"] = {
        "text": page.js(f"{form}.querySelector('[data-testid=edit-input]').value"),
        "focus": page.focused(),
        "scopes": page.js(
            f"[...{form}.querySelectorAll('[data-testid=edit-scope] option')].map(o => o.value)"
        ),
    }
    page.js(f"{form}.querySelector('[data-testid=edit-input]').value = 'first words, edited'")
    page.js(f"{form}.querySelector('[data-testid=edit-scope]').value = 'both'")
    page.js(f"{form}.querySelector('[data-testid=edit-save]').click()")
    page.wait_text("transcript", "Echo: first words, edited")
    page.wait_item(sid, "idle")
    page.wait(f"!!{page.el('note-rewind')}", "the rewind marker")
    seen["edit_notice"] = [page.text("notice-banner"), page.text("notice-action")]
    order = (
        "[...document.querySelectorAll('.stored .msg.user, .stored [data-testid=note-rewind]')]"
        ".map(m => m.dataset.testid === 'note-rewind' ? 'REWIND' : m.innerText)"
    )
    seen["after_edit"] = page.js(order)
    seen["messages"] = [
        m["text"]
        for m in page.host(Method.MESSAGES, {"sessionId": sid})["messages"]
        if m["type"] == "user"
    ]
    # The plan: a builtin update_plan call (the offline provider calls any tool).
    page.send(f"/tool update_plan {json.dumps(PLAN)}")
    card = page.el("approval-card")
    page.wait(f"!!{card} || !{page.el('plan')}.hidden", "the plan (or its approval)")
    if page.js(f"!!{card}"):
        page.click("approve-allow_once")
    page.wait(f"!{page.el('plan')}.hidden", "the pinned plan")
    page.wait_item(sid, "idle")
    seen["plan"] = _plan(page)
    seen["shot"] = page.screenshot(Path(args.artifacts) / "desktop-plan.png")
    page.click("plan-toggle")
    seen["collapsed"] = {
        "list_hidden": page.js(f"{page.el('plan-list')}.hidden"),
        "expanded": page.js(f"{page.el('plan-toggle')}.getAttribute('aria-expanded')"),
    }
    page.click("plan-toggle")
    other = page.create_session(args.workspace, "No plan")
    page.select(other)
    seen["other_plan_hidden"] = not page.visible("plan")
    page.select(sid)
    page.wait(f"!{page.el('plan')}.hidden", "the plan after a switch")
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    page.wait(f"!{page.el('plan')}.hidden", "the plan after the rebuild")
    seen["plan_after_rebuild"] = _plan(page)
    # As after an app restart: the host has seen no plan; the transcript's last call is it.
    page.app.plans.clear()
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.select(sid)
    page.wait(f"!{page.el('plan')}.hidden", "the plan from the transcript")
    seen["plan_from_transcript"] = _plan(page)
    return seen


# ---- a queued message its turn refuses -------------------------------------------------


@contextlib.contextmanager
def fake_chat_server(args: argparse.Namespace) -> Iterator[str]:
    """The fake Chat Completions server (tests/fake_chat_server.py) offering `fake-large`
    and `fake-small`, running while the scenario does: its `/v1` base URL (its root is
    `args.provider_url` too)."""
    port_file = Path(args.data_dir).parent / "fake-openai.port"
    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_chat_server.py"), "--port-file", str(port_file),
         "--models", "fake-large,fake-small"],
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT
        while not port_file.exists():
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the fake provider server did not start")
            time.sleep(0.05)
        args.provider_url = f"http://127.0.0.1:{port_file.read_text()}"
        yield f"{args.provider_url}/v1"
    finally:
        server.terminate()
        server.wait(10)


@contextlib.contextmanager
def text_only_small_model(args: argparse.Namespace) -> Iterator[list[str]]:
    """The sidecar on the fake server, told that `fake-small` takes no images
    (`--text-only-model`)."""
    with fake_chat_server(args) as base_url:
        yield ["--provider", "openai", "--base-url", base_url,
               "--model", "fake-large", "--text-only-model", "fake-small"]  # fmt: skip


def queue_refused(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """An image queued while the model takes images, then the model changed to one that
    takes none: at its turn the message is kept first, the queue paused, and the page
    says why above the queue (the sidecar's reason), the message outlined; removing it
    clears the reason."""
    from desktop_compose import _paste_png

    page.ready()
    sid = page.create_session(args.workspace, "Refused later")
    slow = json.dumps([{"type": "text", "text": "slow", "delay": 30}]).encode()
    request = urllib.request.Request(f"{args.provider_url}/_script", data=slow, method="POST")
    with urllib.request.urlopen(request, timeout=5):
        pass
    page.send("a slow one")
    page.wait_item(sid, "running")
    _paste_png(page)
    _type(page, "look at this later")
    seen: dict[str, Any] = {"queued": _queued(page, 1)}
    page.click("stop")
    page.wait(f"!{page.el('queue-paused')}.hidden", "the paused queue")
    page.wait_item(sid, "idle")
    config = {"sessionId": sid, "configId": "model", "value": "fake-small"}
    page.host(Method.SESSION_SET_CONFIG_OPTION, config)
    page.click("queue-resume")
    page.wait(f"!{page.el('queue-refused')}.hidden", "the refusal shown above the queue")
    seen["refused"] = {
        "text": page.text("queue-refused"),
        "queued": list(page.js(QUEUED) or []),
        "outlined": page.js(
            f"{_item(0, 'queue-text')}.closest('li').classList.contains('refused')"
        ),
        "paused": page.visible("queue-paused"),
        "images": page.text("queue-images"),
    }
    page.click("queue-remove")
    page.wait(f"{QUEUED}.length === 0", "the refused message removed")
    seen["after_remove"] = {"refused_shown": page.visible("queue-refused")}
    return seen


# ---- notifications -------------------------------------------------------------------


@contextlib.contextmanager
def session_bus(args: argparse.Namespace, server: bool) -> Iterator[list[str]]:
    """A private D-Bus session bus for the app (DBUS_SESSION_BUS_ADDRESS), with the
    recording notification server on it when `server`."""
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--print-address", "--nofork"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert daemon.stdout is not None
    address = daemon.stdout.readline().strip()
    saved = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
    record = Path(args.data_dir).parent / "notifications.jsonl"
    record.write_text("")
    args.notifications = record
    notifier = None
    try:
        if server:
            notifier = subprocess.Popen(
                [sys.executable, str(HERE / "notification_server.py"), str(record)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert notifier.stdout is not None
            if notifier.stdout.readline().strip() != "ready":
                raise RuntimeError("the notification server did not start")
            args.notification_server = notifier
        yield []
    finally:
        if notifier is not None:
            notifier.kill()
            notifier.wait(10)
        daemon.kill()
        daemon.wait(10)
        if saved is None:
            os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
        else:
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = saved


def _notified(args: argparse.Namespace) -> list[dict[str, Any]]:
    lines = args.notifications.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _wait_notified(args: argparse.Namespace, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT
    while len(_notified(args)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited for {count} notifications, got {_notified(args)}")
        time.sleep(0.1)
    return _notified(args)


def _focus(page: Any, focused: bool) -> None:
    """The window gains or loses the focus, as the page hears it from its window (Xvfb
    has no window manager to move it)."""
    page.js(f"window.dispatchEvent(new Event('{'focus' if focused else 'blur'}'))")
    deadline = time.monotonic() + WAIT
    while page.app.focused is not focused:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not report focused={focused}")
        time.sleep(0.05)


def _blur(page: Any) -> None:
    _focus(page, False)


def notifications(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Turn ended, approval waiting and turn failed while the window is not focused: a
    Notify each, titled with the session's title; a click selects that session; the count
    of sessions waiting for you; the preference off sends none."""
    page.ready()
    sid = page.create_session(args.workspace, "Notify me")
    other = page.create_session(args.workspace, "Elsewhere")
    page.select(sid)
    _focus(page, True)
    page.send("hello while focused")
    page.wait_text("transcript", "Echo: hello while focused")
    page.wait_item(sid, "idle")
    _blur(page)
    page.send("hello unfocused")
    page.wait_text("transcript", "Echo: hello unfocused")
    seen: dict[str, Any] = {"ended": _wait_notified(args, 1)}
    seen["waiting"] = {
        "count": page.text("waiting-count"),
        "title": page.js("document.title"),
        "window_title": page.app.windows.current.title,
        "unseen_dot": bool(page.js(f"!!{page.el('session-unseen', sid)}")),
    }
    # The unseen session is still counted in a rebuilt page.
    page.select(other)
    page.rebuild(f"{page.el('rebuild-ui')}.click()")
    page.wait(f"!!{page.el('session-unseen', sid)}", "the unseen mark after the rebuild")
    seen["after_rebuild"] = page.text("waiting-count")
    page.select(sid)
    _blur(page)
    page.send("$ echo needs-approval")
    page.wait(f"!!{page.el('approval-card')}", "the approval card")
    seen["approval"] = _wait_notified(args, 2)[1]
    page.click("approve-allow_once")
    page.wait_text("transcript", "exited with status 0")
    page.wait_item(sid, "idle")
    notes = _wait_notified(args, 3)
    # A click on the notification: that session selected, the window in front.
    page.select(other)
    _blur(page)
    server = args.notification_server
    server.stdin.write(f"click {notes[-1]['id']}\n")
    server.stdin.flush()
    page.wait(f"{page.el('detail-id')}.innerText === '{sid}'", "the clicked session selected")
    page.wait(f"{page.el('waiting-count')}.hidden", "nothing waiting once seen")
    seen["clicked"] = {"focused": page.app.focused, "title": page.js("document.title")}
    # The preference off: no notification; on again: the next one comes (and only it).
    page.click("notifications-toggle")
    page.wait(f"{page.el('notifications-toggle')}.getAttribute('aria-pressed') === 'false'", "off")
    seen["preference_saved"] = page.app.settings.notifications
    _blur(page)
    page.send("quiet please")
    page.wait_text("transcript", "Echo: quiet please")
    page.wait_item(sid, "idle")
    page.click("notifications-toggle")
    page.wait(f"{page.el('notifications-toggle')}.getAttribute('aria-pressed') === 'true'", "on")
    _blur(page)
    page.send("loud again")
    page.wait_text("transcript", "Echo: loud again")
    seen["all"] = _wait_notified(args, 4)
    # A turn that fails (the offline provider's scripted failure) is told too.
    page.wait_item(sid, "idle")
    _blur(page)
    page.send("/fail the provider is down")
    page.wait_item(sid, "error")
    seen["failed"] = _wait_notified(args, 5)[4]
    seen["failed_waiting"] = page.text("waiting-count")
    return seen


def notifications_no_server(page: Any, args: argparse.Namespace) -> dict[str, Any]:
    """A session bus with no notification server: turns complete, nothing is shown."""
    page.ready()
    sid = page.create_session(args.workspace, "Nobody listens")
    _blur(page)
    page.send("first unfocused")
    page.wait_text("transcript", "Echo: first unfocused")
    page.wait_item(sid, "idle")
    page.send("second unfocused")
    page.wait_text("transcript", "Echo: second unfocused")
    page.wait_item(sid, "idle")
    return {
        "error_banner": page.visible("error-banner"),
        "status": page.item(sid)["status"],
    }


STEER_SCENARIOS = {
    f.__name__: f
    for f in (queue_steer, queue_refused, edit_plan, notifications, notifications_no_server)
}
STEER_SETUPS = {
    "queue_refused": text_only_small_model,
    "notifications": lambda args: session_bus(args, server=True),
    "notifications_no_server": lambda args: session_bus(args, server=False),
}
