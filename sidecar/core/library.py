"""The session library: copies of sessions and what only hides one (fork, archive,
export, import).

A fork starts its new session through the lifecycle (`lifecycle.py`); an import makes a
closed one; export and archive change no runtime (archive tells a live one what the
store now says, `SessionRuntime.observe`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from protocol.values import Status
from sidecar.core import worktree_place
from sidecar.core.cwd_rules import check_sandboxable
from sidecar.core.lifecycle import ManagerDeps, SessionLifecycle, existing_dir
from sidecar.core.queries import SessionQueries
from sidecar.core.rewind import ContextState, context_at, locate_turn
from sidecar.core.views import SessionView
from sidecar.domain.errors import CheckpointError, InvalidInput
from sidecar.domain.events import StateChanged
from sidecar.domain.records import SessionRecord, now
from sidecar.domain.worktree_info import WorktreeInfo

log = logging.getLogger(__name__)

FORK_TITLE_MAX = 200
EXPORT_PAGE = 500  # transcript rows read at a time by an export
IMAGE_DATA = "imageData"  # an exported user row's images, base64, in the order of `images`


class SessionLibrary:
    def __init__(
        self, deps: ManagerDeps, lifecycle: SessionLifecycle, queries: SessionQueries
    ) -> None:
        self._deps = deps
        self.store = deps.runtime.store
        self.events = deps.events
        self._lifecycle = lifecycle
        self._queries = queries

    async def fork(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: str | None = None,
        before_turn: int | None = None,
    ) -> SessionView:
        """A new session (new id, generation 1) with a copy of the transcript so far (of a
        running session, up to its last completed turn), or up to before `before_turn`;
        with the source's checkpoints when it works in the same directory. A session in
        its own worktree forked in place gives the fork a worktree and branch of its own
        (`worktree_place.make_fork`)."""
        self._lifecycle.refuse_if_shutting_down()
        source = await self.store.get(session_id)
        upto, turns = source.message_count, source.turns
        runtime = self._queries.runtime(session_id)
        if runtime is not None and runtime.turns.before_turn is not None:
            upto, turns = runtime.turns.before_turn
        context = ContextState(source.summary_index, source.context_from, None, ())
        if before_turn is not None:
            if not 1 <= before_turn <= turns:
                raise InvalidInput("turn", f"the session has {turns} completed turn(s)")
            read = self._queries.reader(session_id)
            start = await locate_turn(read, upto, before_turn)
            if start is None:
                raise InvalidInput("turn", f"turn {before_turn} is not in the transcript")
            upto, turns = start, before_turn - 1
            context = await context_at(read, source, start)
        keeps_summary = context.pointer is not None and context.pointer < upto
        cwd = existing_dir(cwd)
        check_sandboxable(cwd, source.mode, source.sandbox)
        record = self._lifecycle.new_record(
            cwd,
            source.mode,
            source.backend,
            f"{source.title} (fork)"[:FORK_TITLE_MAX],
        ).replace(
            model=source.model,
            forked_from=session_id,
            context_from=context.context_from if keeps_summary else 0,
            summary_index=context.pointer if keeps_summary else None,
            turns=turns,
            approval=source.approval,
            sandbox=source.sandbox,
            rules=source.rules,
            mcp_servers=source.mcp_servers if mcp_servers is None else mcp_servers,
            agent=source.agent,
            # A whole fork may fork the agent's own session too (its engine decides, at
            # the first start); one cut at a turn starts the agent afresh.
            agent_session=source.agent_session if before_turn is None else None,
        )
        # Forked in place from a session in its own worktree: a worktree of its own too,
        # holding what the source's holds, so neither's edits reach the other.
        source_tree = WorktreeInfo.from_json(source.worktree) if cwd == source.cwd else None
        made = None
        if source_tree is not None:
            made = await worktree_place.make_fork(
                source_tree, record.session_id, self._lifecycle.host
            )
            await self._lifecycle.known_repos.add(made.repo)
            record = record.replace(cwd=made.path, worktree=made.to_json())
        async with self._lifecycle.locks.hold(record.session_id):
            if cwd == source.cwd:  # the same files (a forked worktree starts as the source)
                try:
                    await self._deps.runtime.checkpoints.fork(
                        session_id, record.session_id, record.cwd, before_turn
                    )
                except (CheckpointError, OSError) as exc:
                    log.warning("fork %s: checkpoints not copied: %s", record.session_id, exc)
            try:
                stored = await self.store.fork(session_id, record, upto)
            except BaseException:
                if made is not None:  # nobody's: its branch is new, nothing on it but copies
                    await asyncio.shield(self._lifecycle.unmake(made, record.session_id))
                raise
            return await self._lifecycle.start(stored)

    async def archive(self, session_id: str, archived: bool) -> SessionView:
        """Any session, live or not (a live one stays live: archiving only hides it from
        the default listing)."""
        record = await self.store.update_metadata(session_id, archived=archived)
        runtime = self._queries.runtime(session_id)
        if runtime is not None:
            runtime.observe(record, "archived")
        self.events.publish(session_id, StateChanged(record))
        return self._queries.view_of(record)

    async def export(
        self, session_id: str
    ) -> tuple[SessionRecord, AsyncIterator[list[dict[str, Any]]]]:
        """The record and its whole transcript in pages, as of now: rows a running turn
        appends meanwhile are not included (the record counts what is exported)."""
        record = await self.store.get(session_id)

        async def pages() -> AsyncIterator[list[dict[str, Any]]]:
            for offset in range(0, record.message_count, EXPORT_PAGE):
                limit = min(EXPORT_PAGE, record.message_count - offset)
                page = await self.store.messages(session_id, offset, limit)
                yield [await self._with_image_data(row) for row in page]

        return record, pages()

    async def _with_image_data(self, row: dict[str, Any]) -> dict[str, Any]:
        """An exported row carries its images' bytes (`imageData`, base64, in the order
        of `images`): the export is whole without the data dir."""
        refs = row.get("images") if row.get("role") == "user" else None
        if not isinstance(refs, list) or not refs:
            return row
        store = self._deps.runtime.images
        data = []
        for ref in refs:
            try:
                found = await store.read(str(ref.get("id", "")))
            except InvalidInput:
                log.warning("export: image %s is not in the data dir", ref.get("id"))
                found = b""
            data.append(base64.b64encode(found).decode())
        return {**row, IMAGE_DATA: data}

    async def _keep_image_data(self, line: int, row: dict[str, Any]) -> dict[str, Any]:
        """An imported row's images into this data dir (checked like any sent image:
        by content, and the bytes must be the ones the row names)."""
        if IMAGE_DATA not in row:
            return row
        data, refs = row[IMAGE_DATA], row.get("images")
        if not isinstance(data, list) or not isinstance(refs, list) or len(data) != len(refs):
            raise InvalidInput("content", f"line {line}: imageData does not match images")
        store = self._deps.runtime.images
        for encoded, ref in zip(data, refs, strict=True):
            if not encoded:
                continue  # not in the exporting data dir either: the reference stays
            try:
                kept = await store.put(str(encoded))
            except InvalidInput as exc:
                raise InvalidInput("content", f"line {line}: {exc.reason}") from None
            if not isinstance(ref, dict) or kept.digest != ref.get("id"):
                raise InvalidInput("content", f"line {line}: an image's bytes are not its id's")
        return {k: v for k, v in row.items() if k != IMAGE_DATA}

    async def import_session(
        self, exported: SessionRecord, rows: Sequence[dict[str, Any]]
    ) -> SessionView:
        """A new session (new id, closed: resume it to work in it) with the exported
        settings and `rows` as its transcript, in one store transaction. `exported` is
        the export's record; its id becomes `imported_from`. Its MCP servers are not
        taken (an export never holds them)."""
        self._lifecycle.refuse_if_shutting_down()
        cwd = existing_dir(exported.cwd)
        check_sandboxable(cwd, exported.mode, exported.sandbox)
        rows = [await self._keep_image_data(number, row) for number, row in enumerate(rows, 2)]
        created = now()
        record = exported.replace(
            session_id=f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            status=Status.CLOSED,
            generation=1,
            created_at=created,
            updated_at=created,
            last_error=None,
            interrupted=False,
            message_count=0,
            forked_from=None,
            lease_owner=None,
            lease_expires=None,
            mcp_servers="[]",
            archived=False,
            imported_from=exported.session_id,
        )
        return self._queries.view_of(await self.store.insert_with_transcript(record, rows))
