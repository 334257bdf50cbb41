"""A session's queue of messages: added while a turn runs, run in order as turns end.

The queue is part of the record (`domain/queue.py`, one JSON column written unfenced
like a name, under this module's per-session lock, so every change is whole), so it
survives Rebuild UI and a sidecar restart, and every client is told of each change
(`QueueChanged`). A drain task per live session starts the next message once no turn
runs; it takes the turn lock before the message leaves the queue, so a message is never
both queued and running, and an edit or a removal either happens before its turn or is
refused as too late.

A message is checked when it is added or edited for whatever its turn would refuse (the
engine's refusal, images for a model given none, an image that is none or too big), so
it is refused then, in `session/prompt`'s words. One its turn refuses all the same (the
model changed meanwhile) is neither dropped nor stalls the drain: it stays first, the
queue is paused with the reason (`Refusal`), and its waiter gets the refusal.

What stops the queue: a cancel pauses it (`clear` empties it instead); a runtime that
starts after a crash cut a turn short pauses it too, and so does a refused message (the
user says when it goes on: `run`). A message sent "now" cancels the running turn and runs next without pausing; a
message added while the session is idle runs at once (ahead of a paused queue, whose
messages stay paused). A waiter (a `session/prompt` with `_meta.queue`) is answered when
its message's turn ends, or as cancelled when it is removed or the queue cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from protocol.values import StopReason
from sidecar.agent.outcome import TurnOutcome
from sidecar.core.events import EventHub
from sidecar.core.registry import KeyedLock
from sidecar.core.runtime import SessionRuntime
from sidecar.domain.errors import InvalidInput, InvalidState, SessionBusy, SidecarError
from sidecar.domain.events import Origin, QueueChanged
from sidecar.domain.prompts import UserPrompt
from sidecar.domain.queue import (
    Block,
    PromptQueue,
    QueueItem,
    Refusal,
    checked_prompt,
    new_item,
)
from sidecar.store.base import SessionStore
from sidecar.store.images import ImageStore

log = logging.getLogger(__name__)

CANCELLED = TurnOutcome("", StopReason.CANCELLED)


class QueueOwner(Protocol):
    """What the queue uses of the manager."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def events(self) -> EventHub: ...

    def runtime(self, session_id: str) -> SessionRuntime | None: ...

    async def live(
        self, session_id: str, action: str, generation: int | None = None
    ) -> SessionRuntime: ...

    @property
    def images(self) -> ImageStore: ...

    async def read_prompt(self, session_id: str, blocks: Sequence[Block]) -> UserPrompt: ...


class SessionQueue:
    def __init__(self, owner: QueueOwner) -> None:
        self._owner = owner
        self._locks = KeyedLock()
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._waiters: dict[str, asyncio.Future[TurnOutcome]] = {}
        self._waiting: dict[str, str] = {}  # item id -> its session, for those with a waiter
        self._next: set[str] = set()  # items that run even while the queue is paused
        self._held: set[str] = set()  # sessions cancelled, their pause not yet stored

    # ---- reading and changing ----------------------------------------------------------

    async def current(self, session_id: str) -> PromptQueue:
        runtime = self._owner.runtime(session_id)
        record = runtime.record if runtime is not None else await self._owner.store.get(session_id)
        return PromptQueue.from_json(record.queue)

    async def _save(self, session_id: str, queue: PromptQueue) -> PromptQueue:
        record = await self._owner.store.update_metadata(session_id, queue=queue.to_json())
        runtime = self._owner.runtime(session_id)
        if runtime is not None:
            runtime.observe(record, "queue")
        self._owner.events.publish(session_id, QueueChanged(queue))
        return queue

    async def _check(self, session_id: str, prompt: Sequence[Block]) -> None:
        """What the message's turn would refuse, refused now (InvalidInput naming
        `prompt`, as `session/prompt` says it): no content, content the engine or its
        model takes none of, an image that is none or too big (checked, not kept yet).
        A session not live has no engine to ask: its images are checked."""
        message = UserPrompt.of(prompt)
        runtime = self._owner.runtime(session_id)
        if runtime is not None:
            await runtime.turns.check(message)
            return
        for block in message.blocks:
            if block.get("type") == "image":
                await self._owner.images.check(str(block.get("data") or ""))

    async def add(
        self, session_id: str, prompt: Sequence[Block], *, now: bool = False, wait: bool = False
    ) -> tuple[QueueItem, PromptQueue, asyncio.Future[TurnOutcome] | None]:
        """Queue a message (`now`: cancel the running turn and run it next). `wait`: a
        future answered when its turn ends."""
        runtime = await self._owner.live(session_id, "queue a message for")
        item = new_item(list(prompt))
        await self._check(session_id, item.prompt)
        waiter = asyncio.get_running_loop().create_future() if wait else None
        async with self._locks.hold(session_id):
            queue = await self.current(session_id)
            idle = not runtime.turns.busy
            first = now or (idle and (not queue.items or queue.paused))
            queue = await self._save(session_id, queue.added(item, 0 if first else None))
            if first:
                self._next.add(item.id)
            if waiter is not None:
                self._waiters[item.id] = waiter
                self._waiting[item.id] = session_id
        if now and runtime.turns.busy:
            runtime.turns.abort()  # not a cancel of the queue: it goes on with this one
        self._kick(session_id)
        return item, queue, waiter

    async def edit(self, session_id: str, item_id: str, prompt: Sequence[Block]) -> PromptQueue:
        await self._check(session_id, checked_prompt(list(prompt)))
        async with self._locks.hold(session_id):
            queue = (await self.current(session_id)).edited(item_id, list(prompt))
            return await self._save(session_id, queue)

    async def remove(self, session_id: str, item_id: str) -> PromptQueue:
        async with self._locks.hold(session_id):
            queue = await self._save(session_id, (await self.current(session_id)).removed(item_id))
        self._answer_cancelled([item_id])
        return queue

    async def move(self, session_id: str, item_id: str, index: int) -> PromptQueue:
        async with self._locks.hold(session_id):
            return await self._save(
                session_id, (await self.current(session_id)).moved(item_id, index)
            )

    async def run(self, session_id: str) -> PromptQueue:
        """The user says go on: a paused queue runs again."""
        await self._owner.live(session_id, "run the queue of")
        async with self._locks.hold(session_id):
            queue = await self.current(session_id)
            if queue.paused:
                queue = await self._save(session_id, queue.resumed())
        self._kick(session_id)
        return queue

    def steering(self, session_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held, no queued message starts (an edit's rewind and its new turn are one step)."""
        return self._locks.hold(session_id)

    # ---- cancel, start ----------------------------------------------------------------

    async def cancel(self, runtime: SessionRuntime, *, clear: bool) -> bool:
        """Cancel the running turn; the queue is paused (kept) or, `clear`, emptied. The
        abort comes first and at once (a cancel never waits on the store)."""
        session_id = runtime.session_id
        self._held.add(session_id)  # the drain starts nothing until the pause is stored
        try:
            cancelled = runtime.turns.abort()
            async with self._locks.hold(session_id):
                queue = await self.current(session_id)
                if clear and (queue.items or queue.paused):
                    await self._save(session_id, PromptQueue())
                    self._answer_cancelled([i.id for i in queue.items])
                elif queue.items and not queue.paused and not clear:  # kept, not run
                    await self._save(session_id, replace(queue, paused=True))
        finally:
            self._held.discard(session_id)
        return cancelled

    async def started(self, runtime: SessionRuntime) -> None:
        """A runtime started: after a crash cut a turn short the queue is paused (the user
        says when it goes on); otherwise it goes on where it was."""
        session_id = runtime.session_id
        async with self._locks.hold(session_id):
            queue = PromptQueue.from_json(runtime.record.queue)
            if not queue.items:
                return
            if runtime.record.interrupted and not queue.paused:
                await self._save(session_id, replace(queue, paused=True))
                return
        self._kick(session_id)

    # ---- the drain ---------------------------------------------------------------------

    def _kick(self, session_id: str) -> None:
        running = self._drains.get(session_id)
        if running is None or running.done():
            self._drains[session_id] = asyncio.create_task(self._drain(session_id))

    async def _drain(self, session_id: str) -> None:
        try:
            while await self._run_next(session_id):
                pass
        except SidecarError as exc:
            log.warning("session %s: the queue stopped: %s", session_id, exc)
        except Exception:
            log.exception("session %s: the queue stopped", session_id)
        finally:
            if self._drains.get(session_id) is asyncio.current_task():
                del self._drains[session_id]

    async def _run_next(self, session_id: str) -> bool:
        """Start the next message once no turn runs and wait for its turn; False when
        there is nothing (more) to run now."""
        runtime = self._owner.runtime(session_id)
        if runtime is None:
            return False  # closed: the queue stays stored for the next runtime
        await runtime.turns.settled()
        if self._owner.runtime(session_id) is not runtime or session_id in self._held:
            return False
        async with self._locks.hold(session_id):
            queue = await self.current(session_id)
            if not queue.items:
                return False
            first, rest = queue.popped()
            if queue.paused and first.id not in self._next:
                return False
            try:
                # Everything that can refuse the message comes before it leaves the queue.
                message = await self._owner.read_prompt(session_id, first.prompt)
                kept = await runtime.turns.keep_images(message)
                task = runtime.turns.start_prompt(message, Origin.QUEUE, kept)
            except SessionBusy:
                return True  # another turn came first: wait for it, then look again
            except InvalidInput as exc:
                # Taken when queued, refused now (the model changed since, say): kept at
                # the head, the queue paused, every client told why.
                log.warning("session %s: queued %s refused: %s", session_id, first.id, exc)
                refused = Refusal(first.id, exc.reason)
                await self._save(session_id, replace(queue, paused=True, refused=refused))
                self._answer_refused(first.id, exc)
                return False
            except InvalidState as exc:  # the session is in error: the queue waits
                log.info("session %s: queue waits: %s", session_id, exc)
                return False
            self._next.discard(first.id)
            await self._save(session_id, rest)
        waiter = self._waiters.pop(first.id, None)
        self._waiting.pop(first.id, None)
        try:
            outcome = await asyncio.shield(task)  # a drain stopped never cancels the turn
        except Exception as exc:
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            raise
        if waiter is not None and not waiter.done():
            waiter.set_result(outcome)
        return True

    def closed(self, session_id: str) -> None:
        """The session closed (or went): its messages stay stored for the next runtime,
        and whoever waits on one (`session/prompt` with `_meta.queue`) is answered
        `cancelled` now rather than never."""
        self._answer_cancelled([i for i, s in self._waiting.items() if s == session_id])

    def _answer_refused(self, item_id: str, exc: InvalidInput) -> None:
        self._next.discard(item_id)
        self._waiting.pop(item_id, None)
        waiter = self._waiters.pop(item_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _answer_cancelled(self, item_ids: Sequence[str]) -> None:
        for item_id in item_ids:
            self._next.discard(item_id)
            self._waiting.pop(item_id, None)
            waiter = self._waiters.pop(item_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(CANCELLED)

    async def aclose(self) -> None:
        """At shutdown: the drains stop (the queues stay stored)."""
        drains = list(self._drains.values())
        for task in drains:
            task.cancel()
        await asyncio.gather(*drains, return_exceptions=True)
        self._answer_cancelled(list(self._waiting))
