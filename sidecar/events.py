"""A runtime's event stream: every state change and streamed chunk gets an
increasing id, lands in a bounded replay buffer, and fans out to sinks (the
stdio notifier) and subscribers (SSE clients). Publishing never awaits, so a
slow subscriber cannot stall a turn; one that falls too far behind is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# Event types.
STATE = "state"
USER_MESSAGE = "user_message"
AGENT_MESSAGE_CHUNK = "agent_message_chunk"
TOOL_CALL = "tool_call"
TOOL_CALL_UPDATE = "tool_call_update"
TURN_END = "turn_end"
MODE = "current_mode_update"
COMPACTION = "compaction"


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "data": self.data}


EventSink = Callable[[Event], None]


class Subscription:
    """One subscriber's view: replayed events first, then live ones."""

    def __init__(self, stream: EventStream, backlog: list[Event], queue_size: int) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=queue_size)
        for event in backlog:
            self._queue.put_nowait(event)
        self.dropped = False

    def _offer(self, event: Event | None) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped = True
            self._stream._unsubscribe(self)

    def _end(self) -> None:
        # Make room for the end marker even when the queue is full.
        while self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event

    def drain_nowait(self) -> list[Event]:
        """Events already queued, without waiting (a stopping listener flushes these)."""
        drained: list[Event] = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is None:
                break
            drained.append(event)
        return drained

    def close(self) -> None:
        self._stream._unsubscribe(self)


class EventStream:
    def __init__(self, capacity: int = 2048, subscriber_queue: int = 4096) -> None:
        self._buffer: deque[Event] = deque(maxlen=capacity)
        self._next_id = 1
        self._sinks: list[EventSink] = []
        self._subscribers: set[Subscription] = set()
        self._subscriber_queue = max(subscriber_queue, capacity + 1)
        self._closed = False

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    def add_sink(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def publish(self, type_: str, data: dict[str, Any]) -> Event:
        event = Event(self._next_id, type_, data)
        self._next_id += 1
        self._buffer.append(event)
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:
                # A broken sink (e.g. a closed stdout) must not break the turn; it is logged.
                log.exception("event sink failed for event %s", event.id)
        for subscription in list(self._subscribers):
            subscription._offer(event)
        return event

    def since(self, last_id: int) -> list[Event]:
        """Buffered events with id > last_id (older ones may have been evicted)."""
        return [event for event in self._buffer if event.id > last_id]

    def subscribe(self, last_id: int | None = None) -> Subscription:
        backlog = self.since(last_id) if last_id is not None else []
        subscription = Subscription(self, backlog, self._subscriber_queue)
        if self._closed:
            subscription._end()
        else:
            self._subscribers.add(subscription)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.discard(subscription)
            subscription._end()

    def close(self) -> None:
        """End every subscription (the runtime is going away)."""
        self._closed = True
        for subscription in list(self._subscribers):
            self._unsubscribe(subscription)
