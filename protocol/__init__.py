"""The wire contract between the sidecar and its clients.

ACP (Agent Client Protocol, protocolVersion 1) plus our `_`-prefixed extensions.
This package does no I/O and imports nothing from `sidecar` or `desktop`, so any
client (the desktop host, tests, third-party tools) can depend on it alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode, ProtocolError
from protocol.framing import MAX_MESSAGE_BYTES, encode_message
from protocol.methods import ACP_METHODS, EXTENSION_METHODS, PROTOCOL_VERSION, Method
from protocol.values import Backend, Mode, Status, StopReason, available_modes
from protocol.version import VERSION

if TYPE_CHECKING:
    from protocol.models import SessionSummary, TranscriptEntry

# The pydantic models load on first use (~0.25 s of import): `import protocol.methods`,
# which every sidecar start needs, must not pay for them.
_LAZY = frozenset({"SessionSummary", "TranscriptEntry"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from protocol import models

        return getattr(models, name)
    raise AttributeError(f"module 'protocol' has no attribute {name!r}")


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
