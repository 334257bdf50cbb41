"""Method names: ACP's and our extensions, as constants in this one place.

ACP's are written out rather than imported from `acp.meta`: importing any part of the
`acp` package loads its whole schema (~0.4 s), which the sidecar must not pay before it
can answer `initialize`. `tests/test_protocol_methods.py` pins them to `acp.meta`.
ACP reserves names that start with `_` for extensions; ours live under `_session/`
and `_sidecar/`.
"""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final[int] = 1
# A client asks for our extension notifications at `initialize` with
# `clientCapabilities._meta = {EXTENSION_KEY: {"notifications": true}}`.
EXTENSION_KEY: Final = "acp-session-host"


class Method:
    """Every method name the sidecar speaks, as constants."""

    INITIALIZE: Final = "initialize"
    SESSION_NEW: Final = "session/new"
    SESSION_LOAD: Final = "session/load"
    SESSION_RESUME: Final = "session/resume"
    SESSION_CLOSE: Final = "session/close"
    SESSION_DELETE: Final = "session/delete"
    SESSION_LIST: Final = "session/list"
    SESSION_FORK: Final = "session/fork"
    SESSION_PROMPT: Final = "session/prompt"
    SESSION_CANCEL: Final = "session/cancel"
    SESSION_SET_MODE: Final = "session/set_mode"
    SESSION_SET_CONFIG_OPTION: Final = "session/set_config_option"
    # agent -> client notification and request
    SESSION_UPDATE: Final = "session/update"
    REQUEST_PERMISSION: Final = "session/request_permission"

    # extensions (requests)
    STATUS: Final = "_session/status"
    MESSAGES: Final = "_session/messages"
    RESIZE: Final = "_session/resize"
    COMPACT: Final = "_session/compact"
    HTTP: Final = "_session/http"
    RENAME: Final = "_session/rename"
    PERMISSIONS: Final = "_session/permissions"
    SET_PERMISSIONS: Final = "_session/permissions/set"
    MCP_RECONNECT: Final = "_session/mcp/reconnect"
    CHANGES: Final = "_session/changes"
    OUTPUT: Final = "_session/output"
    REWIND: Final = "_session/rewind"
    ARCHIVE: Final = "_session/archive"
    EXPORT: Final = "_session/export"
    IMPORT: Final = "_session/import"
    SHUTDOWN: Final = "_sidecar/shutdown"
    AGENTS: Final = "_session/agents"
    WORKTREE_DIFF: Final = "_session/worktree/diff"
    WORKTREE_MERGE: Final = "_session/worktree/merge"
    WORKTREE_DISCARD: Final = "_session/worktree/discard"
    WORKTREE_PATCH: Final = "_session/worktree/patch"
    WORKTREE_ORPHANS: Final = "_session/worktree/orphans"
    REVERT: Final = "_session/revert"
    QUEUE: Final = "_session/queue"
    QUEUE_LIST: Final = "_session/queue/list"
    QUEUE_EDIT: Final = "_session/queue/edit"
    QUEUE_REMOVE: Final = "_session/queue/remove"
    QUEUE_MOVE: Final = "_session/queue/move"
    QUEUE_RUN: Final = "_session/queue/run"
    EDIT: Final = "_session/edit"
    IMAGE: Final = "_session/image"
    FILES: Final = "_session/files"
    # extension notifications (agent -> client)
    STATE: Final = "_session/state"
    TURN_CHANGES: Final = "_session/turn_changes"
    QUEUE_UPDATE: Final = "_session/queue_update"


ACP_METHODS: Final[tuple[str, ...]] = (
    Method.INITIALIZE,
    Method.SESSION_NEW,
    Method.SESSION_LOAD,
    Method.SESSION_RESUME,
    Method.SESSION_CLOSE,
    Method.SESSION_DELETE,
    Method.SESSION_LIST,
    Method.SESSION_FORK,
    Method.SESSION_PROMPT,
    Method.SESSION_CANCEL,
    Method.SESSION_SET_MODE,
    Method.SESSION_SET_CONFIG_OPTION,
)
EXTENSION_METHODS: Final[tuple[str, ...]] = (
    Method.STATUS,
    Method.MESSAGES,
    Method.RESIZE,
    Method.COMPACT,
    Method.HTTP,
    Method.RENAME,
    Method.PERMISSIONS,
    Method.SET_PERMISSIONS,
    Method.MCP_RECONNECT,
    Method.CHANGES,
    Method.OUTPUT,
    Method.REWIND,
    Method.ARCHIVE,
    Method.EXPORT,
    Method.IMPORT,
    Method.SHUTDOWN,
    Method.AGENTS,
    Method.WORKTREE_DIFF,
    Method.WORKTREE_MERGE,
    Method.WORKTREE_DISCARD,
    Method.WORKTREE_PATCH,
    Method.WORKTREE_ORPHANS,
    Method.REVERT,
    Method.QUEUE,
    Method.QUEUE_LIST,
    Method.QUEUE_EDIT,
    Method.QUEUE_REMOVE,
    Method.QUEUE_MOVE,
    Method.QUEUE_RUN,
    Method.EDIT,
    Method.IMAGE,
    Method.FILES,
)
