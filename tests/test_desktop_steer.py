"""Steering a running agent in the real window (tests/desktop_steer.py's scenarios, run by
tests/desktop_driver.py under Xvfb): the queue, Send now, Stop and Resume, edit and resend
in place, the pinned plan, and system notifications over a private D-Bus session bus with
a notification server that records what it receives (tests/notification_server.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from dbus_fast import Message
from dbus_fast.aio import MessageBus
from desktop_steer import session_bus
from test_desktop_window import run_driver, window_only

from desktop.attention import Attention
from desktop.notify import Notifier

needs_dbus = pytest.mark.skipif(
    shutil.which("dbus-daemon") is None and not os.environ.get("CI"),
    reason="dbus-daemon is not installed (scripts/install-system-deps.sh)",
)


@window_only
def test_messages_queued_while_a_turn_runs_are_edited_removed_and_run_in_order(
    tmp_path: Path,
) -> None:
    r = run_driver("queue_steer", tmp_path)
    assert r["send_label"] == "Queue"
    assert r["queued"] == ["/sleep 4 one", "two", "three"] and r["count"] == "3 queued"
    assert r["input_after"] == ""
    assert r["after_edit_remove"] == ["/sleep 4 one", "two, edited"]
    assert r["ran"] == ["/sleep 3 first", "/sleep 4 one", "two, edited"]
    assert r["three_ran"] is False
    # Send now: the long turn cancelled, the urgent message ran next.
    assert r["send_now"] == {"slept": False, "users": ["/sleep 30 long", "urgent"]}
    # Stop: the queue kept and paused (after Rebuild UI too), not run until Resume.
    assert r["paused"] == {
        "queued": ["and then", "after stop"],  # moved up while paused
        "up_disabled": True,
        "resume": True,
        "ran": False,
        "sidecar": True,
    }
    assert r["resumed"] == ["/sleep 30 again", "and then", "after stop"]
    assert r["cleared"]["sidecar"]["queue"] == [] and r["cleared"]["ran"] is False


@window_only
def test_a_queued_message_its_turn_refuses_stays_and_the_page_says_why(tmp_path: Path) -> None:
    r = run_driver("queue_refused", tmp_path)
    assert r["queued"] == ["look at this later"]
    refused = r["refused"]
    assert refused["queued"] == ["look at this later"] and refused["outlined"] is True
    assert refused["paused"] is True and refused["images"] == "🖼 1"
    assert "'fake-small' is given no images" in refused["text"], refused["text"]
    assert refused["text"].startswith("A message was not sent: ")
    assert r["after_remove"] == {"refused_shown": False}


@window_only
def test_edit_and_resend_in_place_and_the_pinned_plan(tmp_path: Path) -> None:
    r = run_driver("edit_plan", tmp_path)
    assert r["editor"] == {
        "text": "first words",
        "focus": "edit-input",
        "scopes": ["conversation", "both"],
    }
    # The earlier branch stays, the rewind's marker shows where the new one starts.
    assert r["after_edit"] == ["first words", "second words", "REWIND", "first words, edited"]
    assert r["messages"] == ["first words", "second words", "first words, edited"]
    assert "files went back" in r["edit_notice"][0] and r["edit_notice"][1] == "Undo code rewind"
    plan = r["plan"]
    assert plan["rows"] == [
        ["completed", "✓", "Read the code"],
        ["in_progress", "◐", "Write the fix"],
        ["pending", "○", "<b>Test it</b>"],
    ]
    assert plan["summary"] == "Plan · 1/3 done · now: Write the fix"
    assert plan["bold"] is False  # the agent's text is text
    assert r["collapsed"] == {"list_hidden": True, "expanded": "false"}
    assert r["other_plan_hidden"] is True
    assert r["plan_after_rebuild"] == plan
    assert r["plan_from_transcript"] == plan


@window_only
@needs_dbus
def test_notifications_when_unfocused_a_click_selects_and_the_preference_stops_them(
    tmp_path: Path,
) -> None:
    r = run_driver("notifications", tmp_path)
    ended = r["ended"]
    assert [(n["summary"], n["body"]) for n in ended] == [("Notify me", "The turn ended.")]
    assert ended[0]["actions"][0] == "default"
    assert r["waiting"] == {
        "count": "1 waiting",
        "title": "(1) ACP Session Host",
        "window_title": "(1) ACP Session Host",
        "unseen_dot": True,
    }
    assert r["after_rebuild"] == "1 waiting"
    assert r["approval"]["summary"] == "Notify me"
    assert r["approval"]["body"].startswith("Waiting for your approval: ")
    assert "echo needs-approval" in r["approval"]["body"]
    assert r["clicked"] == {"focused": True, "title": "ACP Session Host"}
    assert r["preference_saved"] is False
    bodies = [n["body"] for n in r["all"]]
    # ended, approval, ended (after the approval), and -- with the preference off for
    # "quiet please" -- nothing until it is on again: "loud again" ended.
    assert len(bodies) == 4 and bodies[2] == bodies[3] == "The turn ended.", bodies
    # A failed turn: the session's title, and what went wrong.
    failed = r["failed"]
    assert (failed["summary"], failed["body"]) == (
        "Notify me",
        "The turn failed: offline provider: the provider is down",
    )
    assert failed["actions"][0] == "default" and r["failed_waiting"] == "1 waiting"


@window_only
@needs_dbus
def test_no_notification_server_the_app_runs_on_and_says_so_once(tmp_path: Path) -> None:
    r = run_driver("notifications_no_server", tmp_path)
    assert r["error_banner"] is False and r["status"] == "idle"
    said = [line for line in r["stderr"].splitlines() if "system notifications are off" in line]
    assert len(said) == 1, said
    assert "no notification server" in said[0]


async def test_no_session_bus_is_one_log_line_and_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-bus'}")
    notifier = Notifier(lambda key: None)
    with caplog.at_level("DEBUG", logger="desktop.notify"):
        first = await notifier.send("Title", "Body", "sess_1")
        second = await notifier.send("Title", "Body", "sess_1")
    assert first is False and second is False
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "no D-Bus session bus" in warnings[0].getMessage()
    await asyncio.sleep(0)


def test_attention_says_what_happened_when_it_changes() -> None:
    watch = Attention()
    base = {"sessionId": "s1", "title": "Fixing", "status": "idle"}
    assert watch.observe(base) is None  # first seen
    assert watch.observe({**base, "status": "running"}) is None
    ended = watch.observe(base)
    assert ended is not None and (ended.title, ended.body, ended.kind) == (
        "Fixing",
        "The turn ended.",
        "ended",
    )
    assert watch.observe(base) is None  # nothing changed
    watch.observe({**base, "status": "running"})
    asking = {"toolCallId": "c1", "title": "rm -rf build", "since": ""}
    waiting = watch.observe({**base, "status": "running", "awaitingPermission": asking})
    assert waiting is not None and waiting.kind == "approval"
    assert waiting.body == "Waiting for your approval: rm -rf build"
    assert watch.observe({**base, "status": "running", "awaitingPermission": asking}) is None
    failed = watch.observe({**base, "status": "error", "lastError": "provider down"})
    assert failed is not None and failed.body == "The turn failed: provider down"
    assert watch.observe({"title": "no id"}) is None


@needs_dbus
async def test_a_click_counts_only_from_the_server_that_showed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real bus and the test's server: its ActionInvoked "default" is a click; the same
    signal from another connection, or another action, is not."""
    args = argparse.Namespace(data_dir=str(tmp_path / "data"))
    clicked: list[str] = []
    with session_bus(args, server=True):
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", os.environ["DBUS_SESSION_BUS_ADDRESS"])
        notifier = Notifier(clicked.append)
        assert await notifier.send("Fixing", "The turn ended.", "sess_1") is True
        assert await notifier.send("Other", "The turn failed.", "sess_2") is True
        first, second = [json.loads(line) for line in args.notifications.read_text().splitlines()]
        assert (first["summary"], first["body"]) == ("Fixing", "The turn ended.")
        impostor = await MessageBus().connect()
        forged = Message.new_signal(
            "/org/freedesktop/Notifications",
            "org.freedesktop.Notifications",
            "ActionInvoked",
            "us",
            [first["id"], "default"],
        )
        await impostor.send(forged)  # sent before the server is even told to click
        server = args.notification_server
        server.stdin.write(f"click {first['id']} dismiss\nclick {second['id']}\n")
        server.stdin.flush()
        for _ in range(100):
            if "sess_2" in clicked:
                break
            await asyncio.sleep(0.05)
        impostor.disconnect()
        notifier.close()
    assert clicked == ["sess_2"]
