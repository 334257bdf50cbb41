"""ACP methods and our extensions, as thin translations onto the SessionManager.

Each handler validates its params with a pydantic model (ACP's own from
`acp.schema` where one exists), calls the manager, and shapes the result.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from acp.schema import (
    CancelNotification,
    CloseSessionRequest,
    DeleteSessionRequest,
    ForkSessionRequest,
    ListSessionsRequest,
    LoadSessionRequest,
    NewSessionRequest,
    PromptRequest,
    ResumeSessionRequest,
    SetSessionModeRequest,
)
from pydantic import ValidationError

from protocol.errors import ProtocolError
from protocol.methods import Method
from protocol.models import (
    CompactParams,
    MessagesParams,
    NewSessionMeta,
    ResizeParams,
    StatusParams,
    available_modes,
)
from sidecar.acp_updates import replay_notifications
from sidecar.errors import InvalidInput, SessionNotLive
from sidecar.manager import SessionManager
from sidecar.rpc import RpcServer

LIST_PAGE = 100
REPLAY_PAGE = 500


def _dump(model: Any) -> dict[str, Any]:
    result: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return result


def _modes(summary: dict[str, Any]) -> dict[str, Any]:
    return {"currentModeId": summary["mode"], "availableModes": available_modes()}


def _meta(params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidInput("_meta", "must be an object")
    return meta


def _decode_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not cursor.startswith("c") or not cursor[1:].isdigit():
        raise InvalidInput("cursor", "not a cursor returned by session/list")
    return int(cursor[1:])


def prompt_text(request: PromptRequest) -> str:
    parts: list[str] = []
    for block in request.prompt:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            # Every ACP agent must accept links; the model gets them as a reference line.
            parts.append(f"[resource: {block.name} <{block.uri}>]")
        elif kind == "resource":
            resource = block.resource
            if isinstance(getattr(resource, "text", None), str):
                parts.append(f"[resource {resource.uri}]\n{resource.text}")
    text = "\n".join(parts)
    if not text.strip():
        raise InvalidInput("prompt", "must contain non-empty text content")
    return text


class AcpHandlers:
    def __init__(
        self, manager: SessionManager, server: RpcServer, request_shutdown: Callable[[], None]
    ) -> None:
        self.manager = manager
        self.server = server
        self.request_shutdown = request_shutdown

    def table(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
        """Every method but `initialize` (sidecar/initialize.py answers that)."""
        return {
            Method.SESSION_NEW: self.session_new,
            Method.SESSION_LOAD: self.session_load,
            Method.SESSION_RESUME: self.session_resume,
            Method.SESSION_CLOSE: self.session_close,
            Method.SESSION_DELETE: self.session_delete,
            Method.SESSION_LIST: self.session_list,
            Method.SESSION_FORK: self.session_fork,
            Method.SESSION_PROMPT: self.session_prompt,
            Method.SESSION_CANCEL: self.session_cancel,
            Method.SESSION_SET_MODE: self.session_set_mode,
            Method.STATUS: self.status,
            Method.MESSAGES: self.messages,
            Method.RESIZE: self.resize,
            Method.COMPACT: self.compact,
            Method.SHUTDOWN: self.shutdown,
        }

    async def session_new(self, params: dict[str, Any]) -> dict[str, Any]:
        params = {"mcpServers": [], **params}
        request = NewSessionRequest.model_validate(params)
        try:
            meta = NewSessionMeta.model_validate(_meta(params))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = "_meta." + ".".join(str(p) for p in first["loc"])
            raise ProtocolError.invalid_params(field, first["msg"]) from None
        summary = await self.manager.create(request.cwd, meta.mode, meta.backend, meta.title)
        return {"sessionId": summary["sessionId"], "modes": _modes(summary), "_meta": summary}

    async def session_resume(self, params: dict[str, Any]) -> dict[str, Any]:
        request = ResumeSessionRequest.model_validate(params)
        summary = await self.manager.resume(request.session_id)
        return {"modes": _modes(summary), "_meta": summary}

    async def session_load(self, params: dict[str, Any]) -> dict[str, Any]:
        request = LoadSessionRequest.model_validate({"mcpServers": [], **params})
        session_id = request.session_id
        runtime = self.manager.runtime(session_id)
        if runtime is None or runtime.closed:
            summary = await self.manager.resume(session_id)
        else:
            summary = self.manager.summary(session_id)
        offset = 0
        while True:
            page, _ = self.manager.messages(session_id, offset, REPLAY_PAGE)
            if not page:
                break
            for method, update in replay_notifications(session_id, page):
                self.server.notify(method, update)
            offset += len(page)
            await asyncio.sleep(0)  # a long replay must not starve other requests
        return {"modes": _modes(summary), "_meta": summary}

    async def session_fork(self, params: dict[str, Any]) -> dict[str, Any]:
        request = ForkSessionRequest.model_validate({"mcpServers": [], **params})
        summary = await self.manager.fork(request.session_id, request.cwd)
        return {"sessionId": summary["sessionId"], "modes": _modes(summary), "_meta": summary}

    async def session_close(self, params: dict[str, Any]) -> dict[str, Any]:
        request = CloseSessionRequest.model_validate(params)
        return {"_meta": await self.manager.close(request.session_id)}

    async def session_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        request = DeleteSessionRequest.model_validate(params)
        await self.manager.forget(request.session_id)
        return {}

    async def session_list(self, params: dict[str, Any]) -> dict[str, Any]:
        request = ListSessionsRequest.model_validate(params)
        if request.cwd is not None and not os.path.isabs(request.cwd):
            raise InvalidInput("cwd", "must be an absolute path")
        summaries, next_cursor = self.manager.list_page(
            cwd=request.cwd, cursor=_decode_cursor(request.cursor), limit=LIST_PAGE
        )
        result: dict[str, Any] = {
            "sessions": [
                {
                    "sessionId": s["sessionId"],
                    "cwd": s["cwd"],
                    "title": s["title"],
                    "updatedAt": s["updatedAt"],
                    "_meta": s,
                }
                for s in summaries
            ]
        }
        if next_cursor is not None:
            result["nextCursor"] = f"c{next_cursor}"
        return result

    async def session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        request = PromptRequest.model_validate(params)
        outcome = await self.manager.prompt(request.session_id, prompt_text(request), origin="acp")
        return {"stopReason": outcome.stop_reason, "_meta": {"response": outcome.response}}

    async def session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        request = CancelNotification.model_validate(params)
        try:
            cancelled = self.manager.cancel(request.session_id)
        except SessionNotLive:
            cancelled = False
        return {"cancelled": cancelled}

    async def session_set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        request = SetSessionModeRequest.model_validate(params)
        self.manager.set_mode(request.session_id, request.mode_id)
        return {}

    async def status(self, params: dict[str, Any]) -> dict[str, Any]:
        request = StatusParams.model_validate(params)
        return self.manager.summary(request.session_id)

    async def messages(self, params: dict[str, Any]) -> dict[str, Any]:
        request = MessagesParams.model_validate(params)
        page, total = self.manager.messages(request.session_id, request.offset, request.limit)
        return {"messages": page, "total": total}

    async def resize(self, params: dict[str, Any]) -> dict[str, Any]:
        request = ResizeParams.model_validate(params)
        return self.manager.resize(request.session_id, request.rows, request.cols)

    async def compact(self, params: dict[str, Any]) -> dict[str, Any]:
        request = CompactParams.model_validate(params)
        return await self.manager.compact(request.session_id, request.keep_turns)

    async def shutdown(self, params: dict[str, Any]) -> dict[str, Any]:
        self.request_shutdown()
        return {}
