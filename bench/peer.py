"""The peer: a minimal agent on the official `agent-client-protocol` SDK, over its own stdio.

`python -m bench.peer` answers what the round-trip scenario sends the sidecar:
`initialize`, `session/new` (sessions kept in a dict, no store, no listener),
`session/prompt` (streams "Echo:" and " <text>" as `agent_message_chunk`s, like the
offline provider, then `end_turn`) and `_session/status` (a summary of the same
shape as the sidecar's, through the SDK's `ext_method`). It is what an ACP agent
costs when it does the same work minus durability: the SDK's own connection,
routing and pydantic models.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, cast

from acp import (
    Agent,
    Client,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    update_agent_message_text,
)
from acp.schema import AgentCapabilities, Implementation


class EchoAgent:
    def __init__(self) -> None:
        self._conn: Client | None = None
        self._sessions: dict[str, dict[str, Any]] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="bench-peer", title="Bench peer", version="0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"sess_{uuid.uuid4().hex}"
        stamp = time.time()
        self._sessions[session_id] = {
            "sessionId": session_id,
            "cwd": cwd,
            "title": "Untitled session",
            "status": "idle",
            "mode": "craft",
            "backend": "pipe",
            "generation": 1,
            "live": True,
            "messageCount": 0,
            "lastError": None,
            "interrupted": False,
            "createdAt": stamp,
            "updatedAt": stamp,
            "http": None,
        }
        return NewSessionResponse(session_id=session_id)

    def _session(self, session_id: Any) -> dict[str, Any]:
        session = self._sessions.get(str(session_id))
        if session is None:
            raise RequestError(-32002, "session not found", {"sessionId": session_id})
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        assert self._conn is not None
        for chunk in ("Echo:", f" {text}"):
            await self._conn.session_update(
                session_id=session_id, update=update_agent_message_text(chunk)
            )
        session["messageCount"] += 2
        session["updatedAt"] = time.time()
        return PromptResponse(stop_reason="end_turn", field_meta={"response": f"Echo: {text}"})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "session/status":
            return dict(self._session(params.get("sessionId")))
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def main() -> int:
    # The SDK routes only the methods an agent defines; EchoAgent defines what is sent here.
    asyncio.run(run_agent(cast(Agent, EchoAgent())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
