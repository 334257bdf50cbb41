"""Our extension methods (`_session/*`, `_sidecar/shutdown`) and the sidecar's own slash
commands (`/compact`, `/rename`), as thin translations onto the SessionManager. Each
method's params model is in `routes()`; the route parses them, the handler takes them
typed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final

from protocol.methods import Method
from protocol.models import (
    AgentsParams,
    ArchiveParams,
    ChangesParams,
    CompactParams,
    EditParams,
    ExportParams,
    FilesParams,
    HttpAccess,
    ImageParams,
    ImportParams,
    McpReconnectParams,
    MessagesParams,
    OutputParams,
    QueueEditParams,
    QueueItemParams,
    QueueMoveParams,
    QueueParams,
    RenameParams,
    ResizeParams,
    RevertParams,
    RewindParams,
    SetPermissionsParams,
    ShutdownParams,
    StatusParams,
    WorktreeDiffParams,
    WorktreeMergeParams,
    WorktreeOrphansParams,
    WorktreePatchParams,
)
from protocol.values import RewindScope, Status, StopReason
from sidecar.acp import preload, worktree_bodies
from sidecar.acp.permissions import request_params
from sidecar.acp.prompts import checked_blocks, prompt_response
from sidecar.acp.routes import Params, Route, handlers
from sidecar.acp.server import Handler, RpcServer
from sidecar.acp.session_config import SidecarCommand
from sidecar.acp.updates import session_update
from sidecar.agent.external.catalog import AgentCatalog, AgentInfo
from sidecar.core import export_files
from sidecar.core.manager import SessionManager
from sidecar.core.views import CompactionOutcome
from sidecar.domain.errors import InvalidInput, InvalidState, SessionNotLive
from sidecar.domain.records import SessionRecord, iso
from sidecar.domain.rules import parse_rules, rules_to_json
from sidecar.domain.titles import TITLE_CHARS
from sidecar.wire import export as wire_export
from sidecar.wire import transcript as wire_transcript
from sidecar.wire.changes import changes_body, rewind_body
from sidecar.wire.events import queue_body
from sidecar.wire.summary import summary

if TYPE_CHECKING:
    from acp.schema import PromptResponse

# An export returned in the result (no directory named) stays below this: a JSON-RPC
# reply over stdio is one line every other reply waits behind.
INLINE_EXPORT_MAX: Final = 1024 * 1024
IMPORT_MAX: Final = 256 * 1024 * 1024  # bytes of an export file `_session/import` reads


def compaction_result(outcome: CompactionOutcome) -> dict[str, Any]:
    result: dict[str, Any] = {"compacted": outcome.compacted}
    if outcome.cancelled:
        result["cancelled"] = True
    if outcome.reason is not None:
        result["reason"] = outcome.reason
    if outcome.compacted:
        result["summaryIndex"] = outcome.summary_index
        result["contextFrom"] = outcome.context_from
        result["contextChars"] = outcome.context_chars
    return result


def _absolute(field: str, path: str) -> str:
    if "\x00" in path or not os.path.isabs(path):
        raise InvalidInput(field, f"must be an absolute path, got {path!r}")
    return os.path.normpath(path)


async def _export_chunks(
    record: SessionRecord, pages: AsyncIterator[list[dict[str, Any]]], *, markdown: bool
) -> AsyncIterator[str]:
    """The export's text, one piece per page of the transcript."""
    if markdown:
        yield wire_export.markdown_header(record)
        async for page in pages:
            yield "".join(wire_export.markdown_entry(row) for row in page)
        return
    yield wire_export.jsonl_header(record) + "\n"
    async for page in pages:
        yield "".join(wire_export.jsonl_row(row) + "\n" for row in page)


def _whole_characters(data: bytes) -> bytes:
    """Cut a trailing, incomplete UTF-8 sequence (the next page starts with it)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): is its sequence complete?
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
            return data if need <= back else data[:-back]
    return data


def agent_info(info: AgentInfo) -> dict[str, Any]:
    """One row of `_session/agents`."""
    row: dict[str, Any] = {
        "name": info.name,
        "command": info.command,
        "available": info.available,
        "source": info.source,
    }
    if info.install and not info.available:
        row["install"] = info.install
    if info.capabilities is not None:
        row["capabilities"] = dict(info.capabilities)
    return row


class ExtensionHandlers:
    def __init__(
        self,
        manager: SessionManager,
        server: RpcServer,
        request_shutdown: Callable[[], None],
        agents: AgentCatalog | None = None,
    ) -> None:
        self.manager = manager
        self.server = server
        self.request_shutdown = request_shutdown
        self.agents = agents if agents is not None else AgentCatalog({})

    def routes(self) -> list[Route[Any]]:
        return [
            Route(Method.STATUS, Params(StatusParams), self.status),
            Route(Method.MESSAGES, Params(MessagesParams), self.messages),
            Route(Method.RESIZE, Params(ResizeParams), self.resize),
            Route(Method.COMPACT, Params(CompactParams), self.compact),
            Route(Method.HTTP, Params(StatusParams), self.http),
            Route(Method.RENAME, Params(RenameParams), self.rename),
            Route(Method.PERMISSIONS, Params(StatusParams), self.permissions),
            Route(Method.SET_PERMISSIONS, Params(SetPermissionsParams), self.set_permissions),
            Route(Method.MCP_RECONNECT, Params(McpReconnectParams), self.reconnect_mcp),
            Route(Method.CHANGES, Params(ChangesParams), self.changes),
            Route(Method.OUTPUT, Params(OutputParams), self.output),
            Route(Method.REWIND, Params(RewindParams), self.rewind),
            Route(Method.ARCHIVE, Params(ArchiveParams), self.archive),
            Route(Method.EXPORT, Params(ExportParams), self.export),
            Route(Method.IMPORT, Params(ImportParams), self.import_session),
            Route(Method.SHUTDOWN, Params(ShutdownParams), self.shutdown),
            Route(Method.AGENTS, Params(AgentsParams), self.list_agents),
            Route(Method.WORKTREE_DIFF, Params(WorktreeDiffParams), self.worktree_diff),
            Route(Method.WORKTREE_MERGE, Params(WorktreeMergeParams), self.worktree_merge),
            Route(Method.WORKTREE_DISCARD, Params(StatusParams), self.worktree_discard),
            Route(Method.WORKTREE_PATCH, Params(WorktreePatchParams), self.worktree_patch),
            Route(Method.WORKTREE_ORPHANS, Params(WorktreeOrphansParams), self.worktree_orphans),
            Route(Method.REVERT, Params(RevertParams), self.revert),
            Route(Method.QUEUE, Params(QueueParams), self.queue_add),
            Route(Method.QUEUE_LIST, Params(StatusParams), self.queue_list),
            Route(Method.QUEUE_EDIT, Params(QueueEditParams), self.queue_edit),
            Route(Method.QUEUE_REMOVE, Params(QueueItemParams), self.queue_remove),
            Route(Method.QUEUE_MOVE, Params(QueueMoveParams), self.queue_move),
            Route(Method.QUEUE_RUN, Params(StatusParams), self.queue_run),
            Route(Method.EDIT, Params(EditParams), self.edit),
            Route(Method.IMAGE, Params(ImageParams), self.image),
            Route(Method.FILES, Params(FilesParams), self.files),
        ]

    def table(self) -> dict[str, Handler]:
        return handlers(self.routes())

    async def status(self, request: StatusParams) -> dict[str, Any]:
        return summary(await self.manager.view(request.session_id))

    async def messages(self, request: MessagesParams) -> dict[str, Any]:
        if request.turn is not None:
            found = await self.manager.messages_by_turn(
                request.session_id, request.turn, request.turns
            )
            body = wire_transcript.page(found.entries, found.total)
            body["turns"] = found.turns
            body["nextTurn"] = found.next_turn
            if found.next_offset is not None:
                body["nextOffset"] = found.next_offset
            return body
        entries, total = await self.manager.messages(
            request.session_id, request.offset, request.limit
        )
        return wire_transcript.page(entries, total)

    async def resize(self, request: ResizeParams) -> dict[str, Any]:
        size = await self.manager.resize(request.session_id, request.rows, request.cols)
        return {"rows": size.rows, "cols": size.cols}

    async def compact(self, request: CompactParams) -> dict[str, Any]:
        outcome = await self.manager.compact(request.session_id, request.keep_turns)
        return compaction_result(outcome)

    async def changes(self, request: ChangesParams) -> dict[str, Any]:
        """What a turn changed in the working tree (default: the last), with its diff."""
        found = await self.manager.changes(request.session_id, request.turn)
        return changes_body(found, with_diff=True)  # with each file's hunks, ids included

    async def output(self, request: OutputParams) -> dict[str, Any]:
        """A page of a command's whole output, as the command printed it (escape sequences
        kept: a client renders or strips them); pages end on a character boundary."""
        page = await self.manager.output(
            request.session_id, request.tool_call_id, request.offset, request.limit
        )
        data = page.data
        end = page.offset + len(data)
        if end < page.total:
            data = _whole_characters(data)
        return {
            "text": data.decode("utf-8", errors="replace"),
            "offset": page.offset,
            "next": page.offset + len(data),
            "total": page.total,
        }

    async def rewind(self, request: RewindParams) -> dict[str, Any]:
        outcome = await self.manager.rewind(
            request.session_id,
            request.turn,
            request.scope,
            force=request.force,
            dry_run=request.dry_run,
        )
        return rewind_body(outcome)

    async def rename(self, request: RenameParams) -> dict[str, Any]:
        return summary(await self.manager.settings.rename(request.session_id, request.title))

    async def archive(self, request: ArchiveParams) -> dict[str, Any]:
        return summary(await self.manager.archive(request.session_id, request.archived))

    async def export(self, request: ExportParams) -> dict[str, Any]:
        """The session as JSON Lines (importable) or Markdown (for reading): written to
        `<directory>/<sessionId>.jsonl|.md` when a directory is named, else returned."""
        directory = None
        if request.directory is not None:
            directory = _absolute("directory", request.directory)
            await asyncio.to_thread(export_files.check_directory, directory)
        record, pages = await self.manager.export(request.session_id)
        chunks = _export_chunks(record, pages, markdown=request.format == "markdown")
        result: dict[str, Any] = {"format": request.format, "entries": record.message_count}
        if directory is None:
            parts: list[str] = []
            size = 0
            async for chunk in chunks:
                size += len(chunk.encode())
                if size > INLINE_EXPORT_MAX:
                    raise InvalidInput(
                        "directory",
                        f"the export is over {INLINE_EXPORT_MAX // 1024} KiB, too large to "
                        "return inline: name a directory to write it to",
                    )
                parts.append(chunk)
            return {**result, "bytes": size, "content": "".join(parts)}
        suffix = "md" if request.format == "markdown" else "jsonl"
        path = os.path.join(directory, f"{record.session_id}.{suffix}")
        size = await export_files.write_export(path, chunks)
        return {**result, "bytes": size, "path": path}

    async def import_session(self, request: ImportParams) -> dict[str, Any]:
        """A new session from a JSON Lines export: every line checked first, then the
        session and its whole transcript stored in one transaction (all or nothing)."""
        if request.path is not None:
            path = _absolute("path", request.path)
            text = await asyncio.to_thread(export_files.read_export, path, IMPORT_MAX)
        else:
            assert request.content is not None
            text = request.content
        # Split on newlines only: U+2028 and friends may sit unescaped inside JSON strings.
        header, rows = wire_export.parse_jsonl(text.split("\n"))
        exported = header.session
        cwd = exported.cwd if request.cwd is None else _absolute("cwd", request.cwd)
        template = SessionRecord(
            session_id=exported.session_id,
            cwd=cwd,
            title=exported.title,
            mode=exported.mode,
            backend=exported.backend,
            status=Status.CLOSED,
            generation=1,
            created_at=0.0,
            updated_at=0.0,
            model=exported.model,
            context_from=exported.context_from,
            summary_index=exported.summary_index,
            usage_input=exported.usage.input_tokens,
            usage_output=exported.usage.output_tokens,
            approval=exported.approval,
            sandbox=exported.sandbox,
            rules=rules_to_json(parse_rules(exported.rules)),
            turns=exported.turns,
            agent=exported.agent,
        )
        return summary(await self.manager.import_session(template, rows))

    async def permissions(self, request: StatusParams) -> dict[str, Any]:
        """The rules, and the calls waiting for consent (a new window shows their cards)."""
        rules, pending = await self.manager.settings.permissions(request.session_id)
        return {
            "rules": [rule.to_wire() for rule in rules],
            "pending": [
                {
                    **request_params(request.session_id, waiting.request),
                    "since": iso(waiting.since),
                }
                for waiting in pending
            ],
        }

    async def set_permissions(self, request: SetPermissionsParams) -> dict[str, Any]:
        """The rules come as given: `parse_rules` names what is wrong in them."""
        rules = parse_rules(request.rules)
        stored = await self.manager.settings.set_rules(request.session_id, rules)
        return {"rules": [rule.to_wire() for rule in stored]}

    async def reconnect_mcp(self, request: McpReconnectParams) -> dict[str, Any]:
        server = await self.manager.settings.reconnect_mcp(request.session_id, request.name)
        return {
            "name": server.name,
            "transport": server.transport,
            "status": server.status,
            "tools": server.tools,
            "error": server.error,
        }

    async def run_command(
        self, session_id: str, command: SidecarCommand, argument: str
    ) -> PromptResponse:
        """A prompt that was one of our slash commands: run it, say what happened as agent
        text, answer as a finished turn (nothing reaches the model or the transcript)."""
        if command.name == "compact":
            keep = argument or "2"
            if not keep.isdigit() or int(keep) > 1000:
                raise InvalidInput("prompt", "/compact takes the number of turns to keep (0-1000)")
            outcome = await self.manager.compact(session_id, int(keep))
            if outcome.compacted:
                text = f"Compacted: the context now starts at entry {outcome.context_from}."
            else:
                text = f"Nothing compacted: {outcome.reason or 'cancelled'}."
            meta: dict[str, Any] = {"compaction": compaction_result(outcome)}
        else:
            title = " ".join(argument.split())
            if not title:
                raise InvalidInput("prompt", "/rename takes the new title")
            view = await self.manager.settings.rename(session_id, title[: TITLE_CHARS * 3])
            text = f"Renamed to “{view.record.title}”."
            meta = {}
        preload.ACP.ensure()
        from acp.helpers import update_agent_message_text
        from acp.schema import PromptResponse

        self.server.notify(*session_update(session_id, update_agent_message_text(text)))
        return PromptResponse(
            stop_reason=StopReason.END_TURN.value, field_meta={"response": text, **meta}
        )

    async def http(self, request: StatusParams) -> HttpAccess:
        """The live session's listener and its bearer token, for the client that asks."""
        view = await self.manager.view(request.session_id)
        if not view.live:
            raise SessionNotLive(request.session_id, "open the HTTP endpoint of")
        if view.url is None or view.token is None:
            raise InvalidState(
                f"session {request.session_id} has no HTTP endpoint "
                "(socket binding is not allowed here)"
            )
        return HttpAccess(url=view.url, token=view.token)

    async def worktree_diff(self, request: WorktreeDiffParams) -> dict[str, Any]:
        """The session's branch and its uncommitted work against its base, file by file
        and hunk by hunk (hunk ids are stable), a page of files at a time."""
        files, following, info = await self.manager.worktrees.diff(
            request.session_id, request.cursor, request.limit
        )
        return {
            "branch": info.branch,
            "base": info.base,
            "files": [worktree_bodies.file_body(f) for f in files],
            "nextCursor": following,
        }

    async def worktree_merge(self, request: WorktreeMergeParams) -> dict[str, Any]:
        """Into the base branch of the main working tree; all or nothing."""
        merged = await self.manager.worktrees.merge(
            request.session_id, request.strategy, request.message
        )
        return {
            "strategy": merged.strategy,
            "base": merged.base,
            "before": merged.before,
            "after": merged.after,
        }

    async def worktree_discard(self, request: StatusParams) -> dict[str, Any]:
        await self.manager.worktrees.discard(request.session_id)
        return summary(await self.manager.view(request.session_id))

    async def worktree_patch(self, request: WorktreePatchParams) -> dict[str, Any]:
        directory = None if request.directory is None else _absolute("directory", request.directory)
        made = await self.manager.worktrees.patch(request.session_id, directory)
        if isinstance(made, str):
            return {"patch": made}
        return {"files": made}

    async def worktree_orphans(self, request: WorktreeOrphansParams) -> dict[str, Any]:
        """Worktrees of ours whose session is gone; removed when `prune` (branches kept)."""
        found = await self.manager.worktrees.orphans(request.repo, prune=request.prune)
        return {
            "orphans": [{"path": wt.path, "branch": wt.branch, "repo": wt.repo} for wt in found],
            "pruned": request.prune,
        }

    async def revert(self, request: RevertParams) -> dict[str, Any]:
        """Hunks of one file of a turn taken back, as a step `_session/rewind {undo}`
        takes back in turn."""
        done = await self.manager.revert(
            request.session_id, request.turn, request.path, request.hunks, force=request.force
        )
        if done is None:
            return {"turn": request.turn, "path": request.path, "cancelled": True}
        return {
            "turn": done.turn,
            "path": done.path,
            "hunks": list(done.hunks),
            "forced": done.forced,
            "rewind": done.rewind,
            "cancelled": False,
        }

    # ---- the queue, and edit-and-resend --------------------------------------------------

    async def queue_add(self, request: QueueParams) -> dict[str, Any]:
        """A message for the next free turn (at once when idle; `now`: the running turn
        is cancelled and this runs next)."""
        blocks = checked_blocks(request.prompt)
        item, queue, _ = await self.manager.queue.add(request.session_id, blocks, now=request.now)
        shown = queue_body(queue)
        return {"item": shown["queue"][queue.index(item.id)], **shown}

    async def queue_list(self, request: StatusParams) -> dict[str, Any]:
        return queue_body(await self.manager.queue.current(request.session_id))

    async def queue_edit(self, request: QueueEditParams) -> dict[str, Any]:
        blocks = checked_blocks(request.prompt)
        return queue_body(await self.manager.queue.edit(request.session_id, request.id, blocks))

    async def queue_remove(self, request: QueueItemParams) -> dict[str, Any]:
        return queue_body(await self.manager.queue.remove(request.session_id, request.id))

    async def queue_move(self, request: QueueMoveParams) -> dict[str, Any]:
        moved = await self.manager.queue.move(request.session_id, request.id, request.index)
        return queue_body(moved)

    async def queue_run(self, request: StatusParams) -> dict[str, Any]:
        return queue_body(await self.manager.queue.run(request.session_id))

    async def edit(self, request: EditParams) -> dict[str, Any]:
        """Answered like `session/prompt`, when the edited message's turn ends."""
        outcome = await self.manager.edit(
            request.session_id, request.turn, request.text, RewindScope(request.scope)
        )
        return prompt_response(outcome)

    async def image(self, request: ImageParams) -> dict[str, Any]:
        """`{mimeType, data}` (base64) of an image the session's transcript refers to."""
        found = await self.manager.image(request.session_id, request.id)
        return {"id": found.digest, "mimeType": found.mime_type, "data": found.data}

    async def files(self, request: FilesParams) -> dict[str, Any]:
        """Paths under the session's cwd for an `@` mention, best match first."""
        found = await self.manager.files(request.session_id, request.query, request.limit)
        return {
            "files": [{"path": f.path, "kind": f.kind} for f in found.files],
            "truncated": found.truncated,
        }

    async def list_agents(self, request: AgentsParams) -> dict[str, Any]:
        """What can run a session's turns: each agent, whether its program is installed
        (else the command that installs it), what it advertised when it last started."""
        del request
        infos = await asyncio.to_thread(self.agents.infos)  # PATH lookups: the disk
        return {"agents": [agent_info(info) for info in infos]}

    async def shutdown(self, request: ShutdownParams) -> dict[str, Any]:
        del request
        self.request_shutdown()
        return {}
