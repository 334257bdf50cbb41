"""Stable JSON-RPC error codes and the one error type that carries them.

Standard JSON-RPC codes keep their meaning; ACP's "resource not found" (-32002) is what
an unknown session answers. Ours sit in the implementation-defined range
(-32099..-32000) and never change once published; the README lists them.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603

    # ACP's resource-not-found: clients (the TypeScript SDK's idempotent close/delete
    # helpers among them) rely on this code for an unknown session.
    SESSION_NOT_FOUND = -32002
    SESSION_BUSY = -32042
    RUNTIME_LIVE = -32043
    SESSION_NOT_LIVE = -32044
    INVALID_STATE = -32045
    STORE_ERROR = -32046
    RESOURCE_EXHAUSTED = -32047
    SHUTTING_DOWN = -32048
    RUNTIME_FAILED = -32049
    PROVIDER_ERROR = -32050
    CHECKPOINT_ERROR = -32051


class ProtocolError(Exception):
    """A JSON-RPC error: code, human message, optional structured data."""

    def __init__(self, code: ErrorCode | int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def invalid_params(cls, field: str, reason: str) -> ProtocolError:
        return cls(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {field}: {reason}",
            {"field": field, "reason": reason},
        )

    @classmethod
    def method_not_found(cls, method: str) -> ProtocolError:
        return cls(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})

    @classmethod
    def internal(cls) -> ProtocolError:
        # Never carries str(exc): internals stay in the sidecar's log.
        return cls(ErrorCode.INTERNAL_ERROR, "Internal error (see the sidecar log)")
