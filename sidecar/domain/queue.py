"""A session's queue of messages waiting for their turn: a value, stored with the record.

Each item keeps its prompt as the ACP content blocks the client sent (JSON objects, as
sent: text, resource links, resources, images), an id and when it was queued. The queue
runs in order as turns end; `paused` stops it (a cancel, a crash that cut a turn short,
or a message its turn refused, `refused`: it runs again when the user says so). Every change makes a new value; the whole
queue is one small JSON column (bounded: `MAX_ITEMS` items of at most `MAX_PROMPT_CHARS`
characters each), so a change costs the queue's size, never the transcript's.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field, replace
from typing import Any, Final

from sidecar.domain.errors import InvalidInput
from sidecar.domain.records import iso, now

MAX_ITEMS: Final = 1000
MAX_PROMPT_CHARS: Final = 1_000_000  # one item's content blocks, as JSON

Block = dict[str, Any]


@dataclass(frozen=True, slots=True)
class QueueItem:
    id: str
    prompt: tuple[Block, ...]
    created_at: str = field(default_factory=lambda: iso(now()))


def new_item(prompt: list[Block] | tuple[Block, ...]) -> QueueItem:
    return QueueItem("q_" + secrets.token_hex(8), checked_prompt(prompt))


def checked_prompt(prompt: list[Block] | tuple[Block, ...]) -> tuple[Block, ...]:
    if not prompt:
        raise InvalidInput("prompt", "must have at least one content block")
    size = len(json.dumps(list(prompt), ensure_ascii=False))
    if size > MAX_PROMPT_CHARS:
        raise InvalidInput("prompt", f"is {size} characters of JSON; at most {MAX_PROMPT_CHARS}")
    return tuple(prompt)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message its turn refused though it was taken when queued (the session's model
    changed since, say): it stays at the head and the queue pauses, saying why, until
    the user edits or removes it and runs the queue again."""

    item_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class PromptQueue:
    items: tuple[QueueItem, ...] = ()
    paused: bool = False
    refused: Refusal | None = None

    def index(self, item_id: str) -> int:
        for at, item in enumerate(self.items):
            if item.id == item_id:
                return at
        raise InvalidInput("id", f"no queued message {item_id} (it ran, or was removed)")

    def added(self, item: QueueItem, at: int | None = None) -> PromptQueue:
        if len(self.items) >= MAX_ITEMS:
            raise InvalidInput("prompt", f"the queue holds at most {MAX_ITEMS} messages")
        where = len(self.items) if at is None else at
        return replace(self, items=(*self.items[:where], item, *self.items[where:]))

    def edited(self, item_id: str, prompt: list[Block]) -> PromptQueue:
        at = self.index(item_id)
        item = replace(self.items[at], prompt=checked_prompt(prompt))
        return replace(self, items=(*self.items[:at], item, *self.items[at + 1 :]))

    def removed(self, item_id: str) -> PromptQueue:
        at = self.index(item_id)
        refused = None if self.refused and self.refused.item_id == item_id else self.refused
        return replace(self, items=self.items[:at] + self.items[at + 1 :], refused=refused)

    def resumed(self) -> PromptQueue:
        """The user says go on: not paused, and no refusal stands."""
        return replace(self, paused=False, refused=None)

    def moved(self, item_id: str, index: int) -> PromptQueue:
        at = self.index(item_id)
        if not 0 <= index < len(self.items):
            raise InvalidInput("index", f"must be 0..{len(self.items) - 1}, got {index}")
        rest = self.items[:at] + self.items[at + 1 :]
        return replace(self, items=(*rest[:index], self.items[at], *rest[index:]))

    def popped(self) -> tuple[QueueItem, PromptQueue]:
        return self.items[0], replace(self, items=self.items[1:])

    def to_json(self) -> str | None:
        if not self.items and not self.paused:
            return None  # the usual case stores nothing
        stored: dict[str, Any] = {
            "paused": self.paused,
            "items": [
                {"id": i.id, "prompt": list(i.prompt), "createdAt": i.created_at}
                for i in self.items
            ],
        }
        if self.refused is not None:
            stored["refused"] = {"id": self.refused.item_id, "reason": self.refused.reason}
        return json.dumps(stored, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | None) -> PromptQueue:
        if not text:
            return cls()
        raw = json.loads(text)
        items = tuple(
            QueueItem(i["id"], tuple(i["prompt"]), i["createdAt"]) for i in raw.get("items", ())
        )
        refused = raw.get("refused")
        why = Refusal(refused["id"], refused["reason"]) if refused else None
        return cls(items, bool(raw.get("paused", False)), why)
