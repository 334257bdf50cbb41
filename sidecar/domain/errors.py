"""The sidecar's exception tree. Both transports map these to wire errors through
one table (`sidecar/wire/errors.py`, walked by class hierarchy); nothing below the
edges knows about JSON-RPC or HTTP.

    SidecarError
    ├── InvalidInput          bad request data; names the field
    ├── SessionNotFound
    ├── NothingPending        no permission request with that id is waiting
    ├── SessionBusy           a turn is running (turn lock)
    ├── RuntimeLive           the session has a live runtime (resume, delete)
    │   └── LeaseHeld         ... in another sidecar process, which holds its lease
    ├── SessionNotLive        the operation needs a live runtime
    ├── InvalidState          the state machine refuses the transition
    ├── StaleGeneration       a fenced write from a superseded runtime
    ├── StoreError            the store could not read or write
    ├── ProviderError         the model provider failed
    │   └── AgentFailed       ... an external agent (exited, crashed, refused, hung)
    ├── ResourceExhausted     no file descriptors / sockets left
    ├── RuntimeFailed         a runtime could not start (the record keeps the error)
    ├── CheckpointError       checkpoints are off, git is missing or failed, none was taken
    └── ShuttingDown
"""

from __future__ import annotations


class SidecarError(Exception):
    """Base class; `str()` is a message safe to show to a client."""


class InvalidInput(SidecarError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class SessionNotFound(SidecarError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session not found: {session_id}")
        self.session_id = session_id


class NothingPending(SidecarError):
    def __init__(self, session_id: str, call_id: str) -> None:
        super().__init__(
            f"session {session_id} has no permission request waiting for tool call {call_id}"
        )
        self.session_id = session_id
        self.call_id = call_id


class SessionBusy(SidecarError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} is busy: a turn is already running")
        self.session_id = session_id


class RuntimeLive(SidecarError):
    def __init__(self, session_id: str, action: str) -> None:
        hint = "close it first" if action == "delete" else "it is already live"
        super().__init__(f"cannot {action} session {session_id}: it has a live runtime; {hint}")
        self.session_id = session_id


class LeaseHeld(RuntimeLive):
    """Live in another sidecar process: one writer per session, across processes."""

    def __init__(self, session_id: str, action: str, holder: str) -> None:
        SidecarError.__init__(
            self,
            f"cannot {action} session {session_id}: it is live in another sidecar ({holder}); "
            "close it there, or wait until that process is gone or its lease expires",
        )
        self.session_id = session_id
        self.holder = holder


class SessionNotLive(SidecarError):
    def __init__(self, session_id: str, action: str) -> None:
        super().__init__(
            f"cannot {action} session {session_id}: it has no live runtime; resume it first"
        )
        self.session_id = session_id


class InvalidState(SidecarError):
    pass


class StaleGeneration(SidecarError):
    def __init__(self, session_id: str, generation: int, current: int) -> None:
        super().__init__(
            f"write to session {session_id} from generation {generation} refused: "
            f"current generation is {current}"
        )
        self.session_id = session_id
        self.generation = generation
        self.current = current


class StoreError(SidecarError):
    pass


class ProviderError(SidecarError):
    pass


class AgentFailed(ProviderError):
    """An external ACP agent failed: the message names the agent and how (its exit status
    and the tail of its stderr); answered as a provider error (what runs the model)."""


class ResourceExhausted(SidecarError):
    pass


class RuntimeFailed(SidecarError):
    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id}: runtime failed to start: {reason}")
        self.session_id = session_id
        self.reason = reason


class CheckpointError(SidecarError):
    """No checkpoint to answer from (turned off, no git, git failed, none taken)."""


class ShuttingDown(SidecarError):
    def __init__(self) -> None:
        super().__init__("the sidecar is shutting down")
