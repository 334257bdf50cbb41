"""The terminal client's part of a session's queue (the sidecar's `_session/queue*`): a
prompt typed while a turn runs waits in the queue instead of being refused as busy
(`session/prompt` with `_meta.queue`, answered when its own turn ends), the queue is
printed when it changes (`_session/queue_update`), and `/queue` shows and steers it.

Messages are numbered as last printed (1 first to run): `/queue remove N` and `/queue
edit N` name what the user saw, by its id, so a queue that moved on meanwhile is refused
by the sidecar ("it ran, or was removed") rather than changing the wrong message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from desktop.tui_changes import UsageError
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.host import SidecarHost

SHOWN: Final = 10  # messages printed of a long queue; the rest are counted
PREVIEW: Final = 70  # characters of a message's text per line
QUEUE_USAGE: Final = (
    "usage: /queue [remove N | edit N TEXT | move N TO | run] (N as /queue numbers them)"
)


def item_text(item: dict[str, Any]) -> str:
    """A queued message's words, and what else it carries (images, files)."""
    blocks = [b for b in item.get("prompt") or [] if isinstance(b, dict)]
    words = " ".join(
        " ".join(str(b.get("text") or "").split()) for b in blocks if b.get("type") == "text"
    )
    images = sum(1 for b in blocks if b.get("type") == "image")
    files = sum(1 for b in blocks if b.get("type") in ("resource_link", "resource"))
    extras = [
        f"{n} {what}{'s' if n > 1 else ''}" for n, what in ((images, "image"), (files, "file")) if n
    ]
    carried = f"[+{', '.join(extras)}]" if extras else ""
    return " ".join(part for part in (words, carried) if part)


def queue_lines(body: dict[str, Any], clean: Callable[[str], str]) -> list[str]:
    """The queue as the lines `/queue` and a change print (`clean`: text made safe)."""
    items = [i for i in body.get("queue") or [] if isinstance(i, dict)]
    state = ", paused" if body.get("paused") else ""
    if not items:
        return [f"[queue: empty{state}]"]
    lines = [f"[queue: {len(items)} waiting{state}]"]
    refused = body.get("refused") if isinstance(body.get("refused"), dict) else None
    for n, item in enumerate(items[:SHOWN], 1):
        text = clean(item_text(item))
        text = text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"
        mark = "  (refused)" if refused and refused.get("id") == item.get("id") else ""
        lines.append(f"  {n}. {text}{mark}")
    if len(items) > SHOWN:
        lines.append(f"  ... and {len(items) - SHOWN} more")
    if refused:
        why = clean(str(refused.get("reason") or ""))
        lines.append(f"  a message was not sent: {why}; /queue edit or remove it, then /queue run")
    elif body.get("paused"):
        lines.append("  /queue run goes on")
    return lines


class QueueCommands:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    say: Callable[[str], None]
    clean: Callable[[str], str]
    queue_ids: dict[str, list[str]]  # sessionId -> the ids as last printed, in order
    queue_items: dict[str, dict[str, dict[str, Any]]]  # sessionId -> id -> item
    prompt_blocks: Callable[[str, str], Awaitable[list[dict[str, Any]]]]

    def show_queue(self, sid: str, body: dict[str, Any]) -> None:
        """A queue (a push or an answer): remembered as numbered, and printed."""
        items = [i for i in body.get("queue") or [] if isinstance(i, dict)]
        self.queue_ids[sid] = [str(i.get("id")) for i in items]
        self.queue_items[sid] = {str(i.get("id")): i for i in items}
        self.say("\n".join(queue_lines(body, self.clean)))

    def _queued_id(self, sid: str, number: str) -> str:
        ids = self.queue_ids.get(sid) or []
        if not number.isdigit() or not 1 <= int(number) <= len(ids):
            raise UsageError(f"no queued message {number!r}: /queue lists them, numbered")
        return ids[int(number) - 1]

    async def cmd_queue(self, arg: str) -> None:
        sid = self.current
        if sid is None:
            raise UsageError("no current session: /new creates one, /switch N picks one")
        word, _, rest = arg.partition(" ")
        if not word:
            body = await self.host.request(Method.QUEUE_LIST, {"sessionId": sid})
        elif word == "run":
            body = await self.host.request(Method.QUEUE_RUN, {"sessionId": sid})
        elif word == "remove" and rest.strip():
            item = self._queued_id(sid, rest.strip())
            body = await self.host.request(Method.QUEUE_REMOVE, {"sessionId": sid, "id": item})
        elif word == "edit" and len(rest.split(maxsplit=1)) == 2:
            number, text = rest.split(maxsplit=1)
            item = self._queued_id(sid, number)
            # The text changes (its @ mentions read again); its images stay with it.
            kept = [
                b
                for b in (self.queue_items.get(sid, {}).get(item) or {}).get("prompt") or []
                if isinstance(b, dict) and b.get("type") in ("image", "resource")
            ]
            prompt = [*await self.prompt_blocks(sid, text), *kept]
            params = {"sessionId": sid, "id": item, "prompt": prompt}
            body = await self.host.request(Method.QUEUE_EDIT, params)
        elif word == "move" and len(rest.split()) == 2 and rest.split()[1].isdigit():
            number, to = rest.split()
            item = self._queued_id(sid, number)
            params = {"sessionId": sid, "id": item, "index": max(int(to) - 1, 0)}
            body = await self.host.request(Method.QUEUE_MOVE, params)
        else:
            raise UsageError(QUEUE_USAGE)
        if not word:  # a change is printed by its push (`_session/queue_update`)
            self.show_queue(sid, body)

    async def cmd_now(self, arg: str) -> None:
        """Send now: the running turn is cancelled and this message runs next."""
        sid = self.current
        if sid is None or not arg.strip():
            raise UsageError("usage: /now TEXT, on a current session")
        params = {"sessionId": sid, "prompt": await self.prompt_blocks(sid, arg), "now": True}
        await self.host.request(Method.QUEUE, params)
