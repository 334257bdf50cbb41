"""The window's steering calls refuse a bad argument themselves, naming it, before anything
reaches the sidecar (desktop/bridge_steer.py; the calls that pass are exercised against
the real sidecar by the window scenarios in tests/test_desktop_steer.py), and build the
requests the protocol names (docs/protocol.md)."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.bridge_steer import SteerCalls
from desktop.settings import Settings
from protocol.methods import Method


class NoSidecar(SteerCalls):
    """Every request is a failure here: a refused argument must never be sent."""

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"sent {method} {params}")

    def _start_turn(self, method: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"started {method} {params}")


class Recording(SteerCalls):
    """What would be sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        return {"queue": [], "paused": False}

    def _start_turn(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        return {"done": False, "started": True}


def message(result: Any) -> str:
    assert result["error"]["code"] == "invalid_input", result
    return str(result["error"]["message"])


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda b: b.queue("", "hi"), "sessionId"),
        (lambda b: b.queue("s", "  "), "prompt"),
        (lambda b: b.queue("s", 5), "prompt"),
        (lambda b: b.queue("s", "hi", "yes"), "now"),
        (lambda b: b.queue_list(None), "sessionId"),
        (lambda b: b.queue_edit("s", "", "hi"), "id"),
        (lambda b: b.queue_edit("s", "q1", ""), "prompt"),
        (lambda b: b.queue_remove("s", None), "id"),
        (lambda b: b.queue_move("s", "q1", -1), "index"),
        (lambda b: b.queue_move("s", "q1", True), "index"),
        (lambda b: b.queue_run(""), "sessionId"),
        (lambda b: b.cancel("s", "yes"), "clearQueue"),
        (lambda b: b.edit_resend("s", 0, "hi", "both"), "turn"),
        (lambda b: b.edit_resend("s", 1, "hi", "code"), "scope"),
        (lambda b: b.edit_resend("s", 1, "", "conversation"), "text"),
        (lambda b: b.set_focus("no"), "focused"),
        (lambda b: b.set_waiting(-1), "count"),
    ],
)
def test_a_bad_argument_is_refused_naming_it(call: Any, field: str) -> None:
    assert message(call(NoSidecar())).startswith(field)


def test_the_requests_are_the_protocols() -> None:
    b = Recording()
    b.queue("s", "next", True)
    b.queue_edit("s", "q1", "changed")
    b.queue_move("s", "q1", 0)
    b.cancel("s")
    b.cancel("s", True)
    b.edit_resend("s", 2, "again", "both")
    assert b.sent == [
        (
            Method.QUEUE,
            {"sessionId": "s", "prompt": [{"type": "text", "text": "next"}], "now": True},
        ),
        (
            Method.QUEUE_EDIT,
            {"sessionId": "s", "id": "q1", "prompt": [{"type": "text", "text": "changed"}]},
        ),
        (Method.QUEUE_MOVE, {"sessionId": "s", "id": "q1", "index": 0}),
        (Method.SESSION_CANCEL, {"sessionId": "s"}),
        (Method.SESSION_CANCEL, {"sessionId": "s", "_meta": {"clearQueue": True}}),
        (Method.EDIT, {"sessionId": "s", "turn": 2, "text": "again", "scope": "both"}),
    ]


def test_the_notifications_preference_is_kept(tmp_path: Any) -> None:
    settings = Settings(tmp_path)
    assert settings.notifications is True and settings.snapshot()["notifications"] is True
    assert settings.set_notifications(False)["notifications"] is False
    assert Settings(tmp_path).notifications is False  # read back from window.json
    with pytest.raises(ValueError, match="notifications"):
        settings.set_notifications("off")  # type: ignore[arg-type]
