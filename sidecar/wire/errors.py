"""The one table from sidecar exceptions to wire errors: a JSON-RPC code and an HTTP status.

Looked up along `type(exc).__mro__`, so the closest class wins (as Starlette finds its
handlers); anything not here is a bug, answered as an opaque internal error. Both the
stdio server and the HTTP listener use this, so a refusal means the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from protocol.errors import ErrorCode, ProtocolError
from sidecar.domain import errors


@dataclass(frozen=True, slots=True)
class WireError:
    code: ErrorCode
    http_status: int


TABLE: Final[dict[type[Exception], WireError]] = {
    errors.InvalidInput: WireError(ErrorCode.INVALID_PARAMS, 400),
    errors.SessionNotFound: WireError(ErrorCode.SESSION_NOT_FOUND, 404),
    errors.NothingPending: WireError(ErrorCode.SESSION_NOT_FOUND, 404),
    errors.SessionBusy: WireError(ErrorCode.SESSION_BUSY, 409),
    errors.RuntimeLive: WireError(ErrorCode.RUNTIME_LIVE, 409),
    errors.SessionNotLive: WireError(ErrorCode.SESSION_NOT_LIVE, 409),
    errors.StaleGeneration: WireError(ErrorCode.SESSION_NOT_LIVE, 409),
    errors.InvalidState: WireError(ErrorCode.INVALID_STATE, 409),
    errors.StoreError: WireError(ErrorCode.STORE_ERROR, 500),
    errors.ProviderError: WireError(ErrorCode.PROVIDER_ERROR, 502),
    errors.ResourceExhausted: WireError(ErrorCode.RESOURCE_EXHAUSTED, 503),
    errors.RuntimeFailed: WireError(ErrorCode.RUNTIME_FAILED, 500),
    errors.ShuttingDown: WireError(ErrorCode.SHUTTING_DOWN, 503),
    errors.CheckpointError: WireError(ErrorCode.CHECKPOINT_ERROR, 503),
    # Any other refusal of ours: over HTTP its message is safe to show; over JSON-RPC it
    # is an internal error like any bug.
    errors.SidecarError: WireError(ErrorCode.INTERNAL_ERROR, 500),
}


def lookup(exc: BaseException) -> WireError | None:
    for cls in type(exc).__mro__:
        found = TABLE.get(cls)
        if found is not None:
            return found
    return None


def to_protocol_error(exc: errors.SidecarError) -> ProtocolError:
    """A sidecar exception as the JSON-RPC error a client gets."""
    if isinstance(exc, errors.InvalidInput):
        return ProtocolError.invalid_params(exc.field, exc.reason)
    found = lookup(exc)
    if found is None or found.code is ErrorCode.INTERNAL_ERROR:
        return ProtocolError.internal()
    session_id = getattr(exc, "session_id", None)
    data = {"sessionId": session_id} if isinstance(session_id, str) else None
    return ProtocolError(found.code, str(exc), data)
