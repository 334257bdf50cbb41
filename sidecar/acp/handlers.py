"""ACP methods and our extensions, as thin translations onto the SessionManager.

Each handler's params are parsed once, by its route (`routes.py`: ACP's own model from
`acp.schema` where one exists, loaded on first use there), so a handler takes a typed
request, calls the manager with typed values, and shapes the result. No session rule
lives here.

`session/new` and `session/list`, the requests every client sends first, read their
params with models of ours (protocol/models.py, ACP's fields pinned by
`tests/test_protocol_methods.py`, and our `_meta` keys): those first requests are
answered while ACP's schema is still loading (sidecar/app.py). `session/load`, `resume`
and `fork` read ACP's models and keep the client's `mcpServers` as sent beside them
(session_params.py): the store keeps that list verbatim.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from typing import TYPE_CHECKING, Any, TypeVar

from protocol.methods import Method
from protocol.models import ListSessionsWithMeta, NewSessionWithMeta, WorktreeMeta
from protocol.values import Approval, Mode, Sandbox, available_modes
from sidecar.acp import preload
from sidecar.acp.extensions import ExtensionHandlers
from sidecar.acp.prompts import blocks_of, prompt_response
from sidecar.acp.routes import Params, Route, handlers
from sidecar.acp.server import Handler, RpcServer
from sidecar.acp.session_config import (
    APPROVAL,
    MODE,
    MODEL,
    SANDBOX,
    available_commands,
    config_options,
    parse_mode,
    sidecar_command,
)
from sidecar.acp.session_params import ForkParams, LoadParams, ResumeParams, SentServers
from sidecar.acp.updates import replay_notifications, session_update
from sidecar.agent.external.catalog import AgentCatalog
from sidecar.agent.mcp import InvalidServers, parse_servers
from sidecar.agent.providers.catalog import ModelCatalog
from sidecar.core.manager import NewSession, SessionManager
from sidecar.core.views import SessionView
from sidecar.core.worktree_place import WorktreeRequest
from sidecar.domain.agent_options import PREFIX as AGENT_PREFIX
from sidecar.domain.errors import InvalidInput
from sidecar.domain.events import Origin
from sidecar.store.base import ListCursor
from sidecar.wire.summary import summary

if TYPE_CHECKING:
    from acp.schema import (
        CancelNotification,
        CloseSessionRequest,
        DeleteSessionRequest,
        PromptRequest,
        PromptResponse,
        SetSessionConfigOptionSelectRequest,
        SetSessionModeRequest,
    )

LIST_PAGE = 100
REPLAY_PAGE = 500
# A cursor is "c", the last entry's row number, "_" and its updated_at (exact: repr).
CURSOR_DIGITS = 18  # ours never have more digits
CURSOR_CHARS = 64


def _modes(view: SessionView) -> dict[str, Any]:
    return {"currentModeId": view.record.mode.value, "availableModes": available_modes()}


def mcp_definitions(sent: SentServers, *, keep_when_empty: bool) -> str | None:
    """The client's `mcpServers` as sent, validated, as stored (JSON; env and headers
    included: the store is private). None: keep what the session has (an empty list on
    resume/load/fork)."""
    if sent is None or (keep_when_empty and sent == []):
        return None
    try:
        parse_servers(sent)
    except InvalidServers as exc:
        raise InvalidInput(exc.field, exc.reason) from None
    return json.dumps(sent)


def _absolute(field: str, path: str) -> str:
    if "\x00" in path or not os.path.isabs(path):
        raise InvalidInput(field, f"must be an absolute path, got {path!r}")
    return path


E = TypeVar("E", Approval, Sandbox)


def _choice(kind: type[E], value: str) -> E:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise InvalidInput("value", f"must be one of {allowed}, got {value!r}") from None


def encode_cursor(cursor: ListCursor) -> str:
    updated_at, seq = cursor
    return f"c{seq}_{updated_at!r}"


def decode_cursor(cursor: str | None) -> ListCursor | None:
    if cursor is None:
        return None
    refused = InvalidInput("cursor", "not a cursor returned by session/list")
    if not cursor.startswith("c") or len(cursor) > CURSOR_CHARS or not cursor.isascii():
        raise refused
    digits, _, stamp = cursor[1:].partition("_")
    if not digits.isdigit() or len(digits) > CURSOR_DIGITS:
        raise refused
    try:
        updated_at = float(stamp)
    except ValueError:
        raise refused from None
    if not math.isfinite(updated_at):
        raise refused
    return updated_at, int(digits)


class AcpHandlers:
    def __init__(
        self,
        manager: SessionManager,
        server: RpcServer,
        catalog: ModelCatalog,
        extensions: ExtensionHandlers,
        agents: AgentCatalog | None = None,
    ) -> None:
        self.manager = manager
        self.server = server
        self.catalog = catalog
        self.extensions = extensions
        self.agents = agents if agents is not None else AgentCatalog({})

    async def _opened(self, view: SessionView) -> dict[str, Any]:
        """What every response that opens a session carries; the session's commands are
        announced right after the response."""
        options = config_options(view, await self.catalog.models())
        # After the last await: the reply is written before this runs.
        asyncio.get_running_loop().call_soon(self._announce_commands, view.session_id)
        return {"modes": _modes(view), "configOptions": options, "_meta": summary(view)}

    def _announce_commands(self, session_id: str) -> None:
        runtime = self.manager.runtime(session_id)
        if runtime is not None and not runtime.engine.uses_provider:
            return  # an external agent announces its own commands (relayed as they come)
        provider = runtime.provider.commands if runtime is not None else ()
        # Built directly (no ACP model), like a text chunk: every session's first update,
        # sent while ACP's schema may still be loading (tests/test_acp_interop.py has the
        # SDK parse every update on the wire unchanged).
        update = {
            "availableCommands": available_commands(provider),
            "sessionUpdate": "available_commands_update",
        }
        self.server.notify(Method.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    async def _announce_config(self, session_id: str) -> list[dict[str, Any]]:
        options = config_options(await self.manager.view(session_id), await self.catalog.models())
        preload.ACP.ensure()
        from acp.schema import ConfigOptionUpdate

        update = ConfigOptionUpdate.model_validate(
            {"sessionUpdate": "config_option_update", "configOptions": options}
        )
        self.server.notify(*session_update(session_id, update))
        return options

    def routes(self) -> list[Route[Any]]:
        """ACP's methods but `initialize` (sidecar/acp/initialize.py answers that)."""
        return [
            Route(
                Method.SESSION_NEW,
                Params(NewSessionWithMeta, defaults={"mcpServers": []}),
                self.session_new,
            ),
            Route(Method.SESSION_LOAD, Params(LoadParams), self.session_load),
            Route(Method.SESSION_RESUME, Params(ResumeParams), self.session_resume),
            Route(
                Method.SESSION_CLOSE,
                Params["CloseSessionRequest"]("CloseSessionRequest"),
                self.session_close,
            ),
            Route(
                Method.SESSION_DELETE,
                Params["DeleteSessionRequest"]("DeleteSessionRequest"),
                self.session_delete,
            ),
            Route(Method.SESSION_LIST, Params(ListSessionsWithMeta), self.session_list),
            Route(Method.SESSION_FORK, Params(ForkParams), self.session_fork),
            Route(
                Method.SESSION_PROMPT, Params["PromptRequest"]("PromptRequest"), self.session_prompt
            ),
            Route(
                Method.SESSION_CANCEL,
                Params["CancelNotification"]("CancelNotification"),
                self.session_cancel,
            ),
            Route(
                Method.SESSION_SET_MODE,
                Params["SetSessionModeRequest"]("SetSessionModeRequest"),
                self.session_set_mode,
            ),
            Route(
                Method.SESSION_SET_CONFIG_OPTION,
                Params["SetSessionConfigOptionSelectRequest"](
                    "SetSessionConfigOptionSelectRequest"
                ),
                self.session_set_config_option,
            ),
        ]

    def table(self) -> dict[str, Handler]:
        return handlers(self.routes())

    async def session_new(self, request: NewSessionWithMeta) -> dict[str, Any]:
        meta = request.meta
        if not self.agents.knows(meta.agent):
            known = ", ".join(self.agents.names())
            raise InvalidInput("_meta.agent", f"unknown agent {meta.agent!r} (known: {known})")
        spec = NewSession(
            _absolute("cwd", request.cwd),
            meta.mode,
            meta.backend,
            meta.title,
            meta.approval,
            meta.sandbox,
            mcp_definitions(request.mcp_servers, keep_when_empty=False) or "[]",
            meta.agent,
            _worktree_request(meta.worktree),
        )
        try:
            view = await self.manager.create(spec)
        except InvalidInput as exc:
            if exc.field.startswith("worktree"):  # named as the client sent it
                raise InvalidInput(f"_meta.{exc.field}", exc.reason) from None
            raise
        return {"sessionId": view.session_id, **await self._opened(view)}

    async def session_resume(self, request: ResumeParams) -> dict[str, Any]:
        servers = mcp_definitions(request.mcp_servers, keep_when_empty=True)
        view = await self.manager.resume(request.acp.session_id, servers)
        return await self._opened(view)

    async def session_load(self, request: LoadParams) -> dict[str, Any]:
        session_id = request.acp.session_id
        servers = mcp_definitions(request.mcp_servers, keep_when_empty=True)
        view = await self.manager.load(session_id, servers)
        offset = 0
        while True:
            page, _ = await self.manager.messages(session_id, offset, REPLAY_PAGE)
            if not page:
                break
            for method, update in replay_notifications(session_id, (e for _, e in page)):
                self.server.notify(method, update)
            offset += len(page)
            await self.server.writer_drained()  # a long replay must not starve other replies
        return await self._opened(view)

    async def session_fork(self, request: ForkParams) -> dict[str, Any]:
        view = await self.manager.fork(
            request.acp.session_id,
            _absolute("cwd", request.acp.cwd),
            mcp_definitions(request.mcp_servers, keep_when_empty=True),
            before_turn=request.before_turn,
        )
        return {"sessionId": view.session_id, **await self._opened(view)}

    async def session_close(self, request: CloseSessionRequest) -> dict[str, Any]:
        return {"_meta": summary(await self.manager.close(request.session_id))}

    async def session_delete(self, request: DeleteSessionRequest) -> dict[str, Any]:
        """`_meta.removeWorktree: true` deletes a session whose worktree has unmerged work."""
        meta = request.field_meta or {}
        remove = meta.get("removeWorktree", False)
        if not isinstance(remove, bool):
            raise InvalidInput("_meta.removeWorktree", "must be true or false")
        await self.manager.delete(request.session_id, remove_worktree=remove)
        return {}

    async def session_list(self, request: ListSessionsWithMeta) -> dict[str, Any]:
        """Most recent activity first; `_meta.query` searches titles and transcript text,
        `_meta.archived: true` lists the archived sessions instead of the others."""
        cwd = None if request.cwd is None else _absolute("cwd", request.cwd)
        views, next_cursor = await self.manager.list_page(
            cwd=cwd,
            cursor=decode_cursor(request.cursor),
            limit=LIST_PAGE,
            query=request.meta.query,
            archived=request.meta.archived,
        )
        sessions = []
        for view in views:
            entry = summary(view)
            sessions.append(
                {
                    "sessionId": entry["sessionId"],
                    "cwd": entry["cwd"],
                    "title": entry["title"],
                    "updatedAt": entry["updatedAt"],
                    "_meta": entry,
                }
            )
        result: dict[str, Any] = {"sessions": sessions}
        if next_cursor is not None:
            result["nextCursor"] = encode_cursor(next_cursor)
        return result

    async def session_prompt(self, request: PromptRequest) -> dict[str, Any] | PromptResponse:
        blocks = blocks_of(request)
        message = await self.manager.read_prompt(request.session_id, blocks)
        command = sidecar_command(message.text)
        if command is not None:
            return await self.extensions.run_command(request.session_id, *command)
        if (request.field_meta or {}).get("queue") is True:
            # Queued behind the running turn (or run at once), answered when its turn ends.
            _, _, waiter = await self.manager.queue.add(request.session_id, blocks, wait=True)
            assert waiter is not None
            outcome = await waiter
        else:
            outcome = await self.manager.prompt(request.session_id, message, Origin.ACP)
        return prompt_response(outcome)

    async def session_cancel(self, request: CancelNotification) -> dict[str, Any]:
        """`_meta.clearQueue: true` empties the session's queue too (else it is paused)."""
        clear = (request.field_meta or {}).get("clearQueue") is True
        return {"cancelled": await self.manager.cancel(request.session_id, clear_queue=clear)}

    async def session_set_mode(self, request: SetSessionModeRequest) -> dict[str, Any]:
        try:
            mode = Mode(request.mode_id)
        except ValueError:
            modes = ", ".join(m.value for m in Mode)
            raise InvalidInput(
                "modeId", f"must be one of {modes}, got {request.mode_id!r}"
            ) from None
        await self.manager.settings.set_mode(request.session_id, mode)
        await self._announce_config(request.session_id)
        return {}

    async def session_set_config_option(
        self, request: SetSessionConfigOptionSelectRequest
    ) -> dict[str, Any]:
        session_id, value = request.session_id, request.value
        if request.config_id == MODE:
            mode = parse_mode(value)
            if mode is None:
                modes = ", ".join(m.value for m in Mode)
                raise InvalidInput("value", f"mode must be one of {modes}, got {value!r}")
            await self.manager.settings.set_mode(session_id, mode)
        elif request.config_id == MODEL:
            models = await self.catalog.models()
            if value not in models:
                raise InvalidInput(
                    "value", f"model must be one of {', '.join(models)}, got {value!r}"
                )
            await self.manager.settings.set_model(session_id, value)
        elif request.config_id == APPROVAL:
            await self.manager.settings.set_setting(session_id, approval=_choice(Approval, value))
        elif request.config_id == SANDBOX:
            await self.manager.settings.set_setting(session_id, sandbox=_choice(Sandbox, value))
        elif request.config_id.startswith(AGENT_PREFIX):
            option = request.config_id[len(AGENT_PREFIX) :]
            await self.manager.settings.set_agent_option(session_id, option, value)
        else:
            known = ", ".join((MODE, MODEL, APPROVAL, SANDBOX, AGENT_PREFIX + "*"))
            raise InvalidInput(
                "configId", f"unknown config option {request.config_id!r}; known: {known}"
            )
        return {"configOptions": await self._announce_config(session_id)}


def _worktree_request(value: bool | WorktreeMeta | None) -> WorktreeRequest | None:
    if value is None or value is False:
        return None
    if value is True:
        return WorktreeRequest()
    return WorktreeRequest(value.branch, value.base)
