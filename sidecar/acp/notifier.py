"""Every numbered session event, sent to the stdio client as the ACP notification it
becomes (`updates.py`), with live command output as standard content (`live_output.py`)
and our extension notifications only for a client that asked for them.

ACP's SDK is imported where an ACP update is built, not at module level: the sidecar's
first requests are answered before it has loaded (see sidecar/app.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.acp import preload
from sidecar.acp.initialize import ClientOptions
from sidecar.acp.live_output import LiveOutput
from sidecar.acp.updates import SILENT_EVENTS, STATE_EVENTS, event_notification, session_update
from sidecar.core.events import Event
from sidecar.domain.events import ToolCallFinished, ToolOutputChunk
from sidecar.wire.events import ViewOf

Notify = Callable[[str, dict[str, Any]], None]


class AcpNotifier:
    def __init__(
        self, notify: Notify, client: ClientOptions, view_of: ViewOf, stream_cap: int
    ) -> None:
        self._notify = notify
        self._client = client
        self._view_of = view_of
        self._live: dict[str, LiveOutput] = {}
        self._stream_cap = stream_cap

    def _live_output(self, session_id: str) -> LiveOutput:
        live = self._live.get(session_id)
        if live is None:

            def send(call_id: str, text: str) -> None:
                preload.ACP.ensure()
                from acp.helpers import text_block, tool_content, update_tool_call

                update = update_tool_call(
                    call_id, status="in_progress", content=[tool_content(text_block(text))]
                )
                self._notify(*session_update(session_id, update))

            live = self._live[session_id] = LiveOutput(send, self._stream_cap)
        return live

    def __call__(self, event: Event) -> None:
        body = event.body
        if isinstance(body, ToolOutputChunk):
            # The chunk itself (`_meta.output`, our extension) goes first, so a client that
            # draws chunks has the first one before the first whole-content update.
            if self._client.extension_notifications:
                self._send(event)
            self._live_output(event.session_id).add(body.call_id, body.text)
            return
        if isinstance(body, ToolCallFinished):
            live = self._live.get(event.session_id)
            if live is not None:
                live.finish(body.call_id)
        elif isinstance(body, STATE_EVENTS) and not self._client.extension_notifications:
            return  # an extension notification nobody asked for: not even built
        elif isinstance(body, SILENT_EVENTS):
            return  # ACP has no notification for it (`updates.to_acp`): not even translated
        self._send(event)

    def _send(self, event: Event) -> None:
        notification = event_notification(event, self._view_of)
        if notification is None:
            return
        if notification[0].startswith("_") and not self._client.extension_notifications:
            return
        self._notify(*notification)
