"""The session summary: one shape everywhere (`protocol.models.SessionSummary`).

Built as a plain dict: this runs on every status request and every list entry, and
`tests/test_wire.py` checks it against the model.
"""

from __future__ import annotations

from typing import Any

from protocol.values import Sandbox
from sidecar.core.views import SessionView
from sidecar.domain.records import SessionRecord, effective_sandbox, iso
from sidecar.domain.worktree_info import WorktreeInfo


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
        "worktree": worktree_body(record, view),
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
        "instructions": [
            {"path": file.path, "bytes": file.size, "cut": file.cut, "skipped": file.skipped}
            for file in view.instructions
        ],
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at),
        "http": http,
    }


def worktree_body(record: SessionRecord, view: SessionView) -> dict[str, Any] | None:
    """The session's own worktree: where, which branch off which base, and (while live,
    as of its last turn) how it stands; None for a session in a plain cwd."""
    info = WorktreeInfo.from_json(record.worktree)
    if info is None:
        return None
    state = view.worktree_state
    return {
        "repo": info.repo,
        "path": info.path,
        "branch": info.branch,
        "base": info.base,
        "ahead": None if state is None else state.ahead,
        "behind": None if state is None else state.behind,
        "dirty": None if state is None else state.dirty,
    }
