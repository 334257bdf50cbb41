"""What deserves a system notification: a session's turn ended, failed, or waits for you.

Fed the sidecar's `_session/state` summaries as they arrive; says what happened when a
summary changes in a way the user would want to hear about while looking elsewhere (the
caller decides whether they are: the window's focus, the preference). Pure, so it is
tested without a bus or a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_SESSIONS = 10_000  # summaries remembered (the oldest forgotten first)


@dataclass(frozen=True)
class Happened:
    session_id: str
    title: str  # the session's title: the notification's title
    body: str  # what happened
    kind: str  # "ended" | "failed" | "approval"


class Attention:
    def __init__(self) -> None:
        self._last: dict[str, tuple[str, str | None]] = {}  # id -> (status, waiting call)

    def observe(self, summary: dict[str, Any]) -> Happened | None:
        session_id = summary.get("sessionId")
        if not isinstance(session_id, str):
            return None
        status = str(summary.get("status") or "")
        waiting = summary.get("awaitingPermission")
        call = str(waiting.get("toolCallId")) if isinstance(waiting, dict) else None
        before = self._last.pop(session_id, None)
        self._last[session_id] = (status, call)
        if len(self._last) > MAX_SESSIONS:
            self._last.pop(next(iter(self._last)))
        if before is None:
            return None  # first seen: nothing changed that we saw
        was_status, was_call = before
        title = str(summary.get("title") or "Session")
        if call is not None and call != was_call:
            what = str(waiting.get("title") or "a tool call") if isinstance(waiting, dict) else ""
            return Happened(session_id, title, f"Waiting for your approval: {what}", "approval")
        if was_status == "running" and status == "error":
            error = str(summary.get("lastError") or "").strip()
            body = f"The turn failed: {error}" if error else "The turn failed."
            return Happened(session_id, title, body, "failed")
        if was_status == "running" and status == "idle":
            return Happened(session_id, title, "The turn ended.", "ended")
        return None
