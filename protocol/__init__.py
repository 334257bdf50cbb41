"""The wire contract between the sidecar and its clients.

ACP (Agent Client Protocol, protocolVersion 1) plus our `_`-prefixed extensions.
This package does no I/O and imports nothing from `sidecar` or `desktop`, so any
client (the desktop host, tests, third-party tools) can depend on it alone.
"""

from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import MAX_MESSAGE_BYTES, decode_line, encode_message
from protocol.methods import (
    ACP_METHODS,
    EXTENSION_METHODS,
    EXTENSION_NOTIFICATIONS,
    PROTOCOL_VERSION,
    Method,
)
from protocol.models import (
    BACKENDS,
    MODES,
    STATUSES,
    Backend,
    CompactParams,
    HttpEndpoint,
    MessagesParams,
    MessagesResult,
    Mode,
    NewSessionMeta,
    ResizeParams,
    SessionStateNotification,
    SessionSummary,
    Status,
    StatusParams,
    available_modes,
)

__all__ = [
    "ACP_METHODS",
    "BACKENDS",
    "CompactParams",
    "EXTENSION_METHODS",
    "EXTENSION_NOTIFICATIONS",
    "MAX_MESSAGE_BYTES",
    "MODES",
    "PROTOCOL_VERSION",
    "STATUSES",
    "Backend",
    "ErrorCode",
    "HttpEndpoint",
    "MessagesParams",
    "MessagesResult",
    "Method",
    "Mode",
    "NewSessionMeta",
    "ProtocolError",
    "ResizeParams",
    "SessionStateNotification",
    "SessionSummary",
    "Status",
    "StatusParams",
    "available_modes",
    "decode_line",
    "encode_message",
]
