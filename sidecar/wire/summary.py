"""The session summary: one shape everywhere (`protocol.models.SessionSummary`).

Built as a plain dict: this runs on every status request and every list entry, and
`tests/test_wire.py` checks it against the model.
"""

from __future__ import annotations

from typing import Any

from protocol.values import Sandbox
from sidecar.core.views import SessionView
from sidecar.domain.records import effective_sandbox, iso


def summary(view: SessionView) -> dict[str, Any]:
    """Never carries the listener's token: clients log these results (one writes its logs
    world-readable); the token is handed out only by `_session/http` to a client asking."""
    record = view.record
    awaiting = None
    if view.awaiting is not None:
        waiting = view.awaiting
        awaiting = {
            "toolCallId": waiting.call_id,
            "title": waiting.title,
            "since": iso(waiting.since),
        }
    http = None
    if view.live and view.url is not None:
        http = {"url": view.url}
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "title": record.title,
        "status": record.status.value,
        "mode": record.mode.value,
        "backend": record.backend.value,
        "generation": record.generation,
        "version": record.version,
        "live": view.live,
        "messageCount": record.message_count,
        "lastError": record.last_error,
        "interrupted": record.interrupted,
        "forkedFrom": record.forked_from,
        "archived": record.archived,
        "importedFrom": record.imported_from,
        "agent": record.agent,
        "heldBy": view.held_by,
        "model": record.model,
        "usage": {"inputTokens": record.usage_input, "outputTokens": record.usage_output},
        "turns": record.turns,
        "approval": record.approval.value,
        "sandbox": (record.sandbox or Sandbox.WORKSPACE).value,
        "effectiveSandbox": effective_sandbox(record.mode, record.sandbox).value,
        "sandboxProblem": view.sandbox_problem,
        "checkpointProblem": view.checkpoint_problem,
        "awaitingPermission": awaiting,
        "mcpServers": [
            {
                "name": server.name,
                "transport": server.transport,
                "status": server.status,
                "tools": server.tools,
                "error": server.error,
            }
            for server in view.mcp
        ],
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at),
        "http": http,
    }
