"""Method names: ACP's (taken from `acp.meta`, never retyped) and our extensions.

ACP reserves names that start with `_` for extensions; ours live under `_session/`
and `_sidecar/`.
"""

from __future__ import annotations

from typing import Final

from acp.meta import AGENT_METHODS, CLIENT_METHODS
from acp.meta import PROTOCOL_VERSION as _ACP_PROTOCOL_VERSION

PROTOCOL_VERSION: Final[int] = _ACP_PROTOCOL_VERSION


class Method:
    """Every method name the sidecar speaks, as constants."""

    INITIALIZE: Final = AGENT_METHODS["initialize"]
    SESSION_NEW: Final = AGENT_METHODS["session_new"]
    SESSION_LOAD: Final = AGENT_METHODS["session_load"]
    SESSION_RESUME: Final = AGENT_METHODS["session_resume"]
    SESSION_CLOSE: Final = AGENT_METHODS["session_close"]
    SESSION_DELETE: Final = AGENT_METHODS["session_delete"]
    SESSION_LIST: Final = AGENT_METHODS["session_list"]
    SESSION_FORK: Final = AGENT_METHODS["session_fork"]
    SESSION_PROMPT: Final = AGENT_METHODS["session_prompt"]
    SESSION_CANCEL: Final = AGENT_METHODS["session_cancel"]
    SESSION_SET_MODE: Final = AGENT_METHODS["session_set_mode"]
    # agent -> client notification
    SESSION_UPDATE: Final = CLIENT_METHODS["session_update"]

    # extensions (requests)
    STATUS: Final = "_session/status"
    MESSAGES: Final = "_session/messages"
    RESIZE: Final = "_session/resize"
    COMPACT: Final = "_session/compact"
    SHUTDOWN: Final = "_sidecar/shutdown"
    # extension notification (agent -> client)
    STATE: Final = "_session/state"


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
)
EXTENSION_METHODS: Final[tuple[str, ...]] = (
    Method.STATUS,
    Method.MESSAGES,
    Method.RESIZE,
    Method.COMPACT,
    Method.SHUTDOWN,
)
EXTENSION_NOTIFICATIONS: Final[tuple[str, ...]] = (Method.STATE,)
