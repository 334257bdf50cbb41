"""What the window needs to show a running turn again after Rebuild UI: the tool calls
running now, with the output they printed so far as HTML.

The host sees every notification the sidecar sends; a page is disposable. So the app
keeps, per running tool call, its command and its output rendered so far (desktop.render's
`AnsiStream`: colours carry across chunks), bounded; each pushed chunk gets a sequence
number (`_meta.outputSeq`) and its HTML (`_meta.outputHtml`), so a page that fetched the
state at sequence N ignores the chunks up to N that were already in flight.
Entries go when the call finishes, or when the session stops running.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from desktop.render import AnsiStream

MAX_KEPT_HTML = 2 * 1024 * 1024  # characters of one call's HTML kept for a rebuilt page


@dataclass
class LiveCall:
    tool_call_id: str
    title: str
    kind: str
    command: str | None
    stream: AnsiStream = field(default_factory=AnsiStream)
    html: list[str] = field(default_factory=list)
    size: int = 0
    seq: int = 0
    truncated: bool = False


class LiveOutputs:
    """Running tool calls by session (thread-safe: fed on the host loop, read by bridges)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, dict[str, LiveCall]] = {}

    def observe(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Track one notification; returns the params to push (chunks get their HTML)."""
        if method == "_session/state":
            if params.get("status") != "running":
                with self._lock:
                    self._calls.pop(str(params.get("sessionId")), None)
            return params
        if method != "session/update":
            return params
        update = params.get("update")
        if not isinstance(update, dict):
            return params
        sid = str(params.get("sessionId"))
        kind = update.get("sessionUpdate")
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return params
        with self._lock:
            calls = self._calls.setdefault(sid, {})
            if kind == "tool_call":
                raw = update.get("rawInput")
                command = raw.get("command") if isinstance(raw, dict) else None
                calls[call_id] = LiveCall(
                    call_id,
                    str(update.get("title") or ""),
                    str(update.get("kind") or "other"),
                    command if isinstance(command, str) else None,
                )
                return params
            if kind != "tool_call_update":
                return params
            call = calls.get(call_id)
            if update.get("status") in ("completed", "failed"):
                calls.pop(call_id, None)
                return params
            meta = update.get("_meta")
            if (
                call is None
                or not isinstance(meta, dict)
                or not isinstance(meta.get("output"), str)
            ):
                return params
            chunk = call.stream.feed(meta["output"])
            call.seq += 1
            if not call.truncated:
                if call.size + len(chunk) > MAX_KEPT_HTML:
                    call.truncated = True
                else:
                    call.html.append(chunk)
                    call.size += len(chunk)
            new_meta = {**meta, "outputHtml": chunk, "outputSeq": call.seq}
            return {**params, "update": {**update, "_meta": new_meta}}

    def running(self, session_id: str) -> list[dict[str, Any]]:
        """The session's running tool calls, with their output so far."""
        with self._lock:
            calls = list(self._calls.get(session_id, {}).values())
            return [
                {
                    "toolCallId": c.tool_call_id,
                    "title": c.title,
                    "kind": c.kind,
                    "command": c.command,
                    "html": "".join(c.html),
                    "seq": c.seq,
                    "truncated": c.truncated,
                }
                for c in calls
            ]
