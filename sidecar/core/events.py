"""A session's event stream: every state change and streamed chunk is one numbered event.

Each event gets an increasing id, lands in a bounded replay buffer, and fans out to
sinks (the stdio notifier) and subscribers (SSE clients). Publishing never awaits, so
a slow subscriber cannot stall a turn; one that falls too far behind is dropped.
This is the only emitter: `_session/state`, `session/update` and SSE all come from it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from sidecar.domain.events import SessionEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    session_id: str
    body: SessionEvent


EventSink = Callable[[Event], None]


class Subscription:
    """One subscriber's view: replayed events first, then live ones."""

    def __init__(self, stream: EventStream, backlog: list[Event], queue_size: int) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=queue_size)
        for event in backlog:
            self._queue.put_nowait(event)
        self.dropped = False

    def _offer(self, event: Event) -> None:
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
    """The numbered stream of one session in this process (ids go on across generations)."""

    def __init__(
        self,
        session_id: str,
        sink: EventSink | None = None,
        *,
        capacity: int = 2048,
        subscriber_queue: int = 4096,
    ) -> None:
        self.session_id = session_id
        self._buffer: deque[Event] = deque(maxlen=capacity)
        self._next_id = 1
        self._sink = sink
        self._subscribers: set[Subscription] = set()
        self._subscriber_queue = max(subscriber_queue, capacity + 1)

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    def publish(self, body: SessionEvent) -> Event:
        event = Event(self._next_id, self.session_id, body)
        self._next_id += 1
        self._buffer.append(event)
        if self._sink is not None:
            try:
                self._sink(event)
            except Exception:
                # A broken sink (e.g. a closed stdout) must not break the turn; it is logged.
                log.exception("event sink failed for event %s", event.id)
        if self._subscribers:
            for subscription in list(self._subscribers):
                subscription._offer(event)
        return event

    def since(self, last_id: int) -> list[Event]:
        """Buffered events with id > last_id (older ones may have been evicted)."""
        return [event for event in self._buffer if event.id > last_id]

    def subscribe(self, last_id: int | None = None) -> Subscription:
        backlog = self.since(last_id) if last_id is not None else []
        subscription = Subscription(self, backlog, self._subscriber_queue)
        self._subscribers.add(subscription)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.discard(subscription)
            subscription._end()

    def end_subscriptions(self) -> None:
        """A runtime went away: its subscribers (SSE clients of its listener) are done, and
        the replay buffer is emptied (the numbering goes on)."""
        for subscription in list(self._subscribers):
            self._unsubscribe(subscription)
        self._buffer.clear()


class EventHub:
    """The streams of the sessions this process knows, all feeding one sink."""

    def __init__(self, sink: EventSink | None = None) -> None:
        self._sink = sink
        self._streams: dict[str, EventStream] = {}

    def stream(self, session_id: str) -> EventStream:
        stream = self._streams.get(session_id)
        if stream is None:
            stream = self._streams[session_id] = EventStream(session_id, self._sink)
        return stream

    def publish(self, session_id: str, body: SessionEvent) -> Event:
        return self.stream(session_id).publish(body)

    def forget(self, session_id: str) -> None:
        stream = self._streams.pop(session_id, None)
        if stream is not None:
            stream.end_subscriptions()
