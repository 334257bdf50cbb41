"""The clients keep the newer of two summaries of a session by one comparison of their
`version`s, whatever order they arrived in (issue 22, point 4): the terminal client's
state of a session, and the shared rule in `desktop.sessions`. The page's rule is
`isNewer` in desktop/ui/store.js (tests/ui/)."""

from __future__ import annotations

from typing import Any

import pytest

from desktop import sessions
from desktop.tui import Tui
from protocol.methods import Method


def summary(version: int | None, status: str, **extra: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"sessionId": "sess_a", "status": status, "generation": 1, **extra}
    if version is not None:
        s["version"] = version
    return s


def test_an_older_version_is_older_whatever_else_it_says() -> None:
    newer = summary(5, "error", lastError="boom")
    assert sessions.is_older(summary(4, "idle"), newer)
    assert not sessions.is_older(summary(6, "idle"), newer)
    assert not sessions.is_older(summary(5, "idle"), newer)  # equal: the later word
    assert not sessions.is_older(summary(1, "idle"), None)  # nothing known yet
    # A summary without a version (an older sidecar) is never judged older.
    assert not sessions.is_older(summary(None, "idle"), newer)
    assert not sessions.is_older(summary(4, "idle"), summary(None, "error"))


async def test_the_terminal_client_keeps_the_newer_state_of_a_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tui = Tui([])  # its sidecar is never started: the pushes are handed over directly
    tui.current = "sess_a"
    tui.on_notification(Method.STATE, summary(7, "error", lastError="boom"))
    # A push of an earlier change that arrives late: neither kept nor printed.
    tui.on_notification(Method.STATE, summary(6, "running"))
    assert tui.states["sess_a"]["version"] == 7
    assert tui.hint("sess_a", RuntimeError("x")).startswith(" — /retry to try again")
    tui.on_notification(Method.STATE, summary(8, "closing"))
    assert tui.states["sess_a"]["status"] == "closing"
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert lines == ["[error, gen 1: boom]", "[closing, gen 1]"]
