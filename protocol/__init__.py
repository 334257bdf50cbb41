"""The wire contract between the sidecar and its clients.

ACP (Agent Client Protocol, protocolVersion 1) plus our `_`-prefixed extensions.
This package does no I/O and imports nothing from `sidecar` or `desktop`, so any
client (the desktop host, tests, third-party tools) can depend on it alone.
"""

from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import MAX_MESSAGE_BYTES, encode_message
from protocol.methods import ACP_METHODS, EXTENSION_METHODS, PROTOCOL_VERSION, Method
from protocol.models import SessionSummary, TranscriptEntry
from protocol.values import Backend, Mode, Status, StopReason, available_modes
from protocol.version import VERSION

__all__ = [
    "ACP_METHODS",
    "EXTENSION_METHODS",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "VERSION",
    "Backend",
    "ErrorCode",
    "Method",
    "Mode",
    "ProtocolError",
    "SessionSummary",
    "Status",
    "StopReason",
    "TranscriptEntry",
    "available_modes",
    "encode_message",
]
