"""A prompt's ACP content blocks (JSON objects, as a client sent them) as the text a turn
records and the builtin engine reads: text as is, a resource link as a reference line,
an embedded text resource with its contents. One function for `session/prompt` and for a
queued message whose turn came, so both read the same.

A prompt may hold no text at all when it carries something else (a pasted screenshot
sent with Enter, a resource): only a prompt with nothing in it is refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sidecar.domain.errors import InvalidInput

# Blocks that are a message without any text beside them.
CARRIERS: Final = frozenset({"image", "audio", "resource"})


def text_of(
    blocks: Sequence[Mapping[str, Any]], mention: Callable[[str], str | None] | None = None
) -> str:
    """`mention`: a linked file's text for the model (an `@` mention, read by the edge),
    or None to give the link as a reference line."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link":
            read = mention(str(block.get("uri"))) if mention is not None else None
            # Every ACP agent must accept links; the model gets them as a reference line.
            parts.append(
                read
                if read is not None
                else f"[resource: {block.get('name')} <{block.get('uri')}>]"
            )
        elif kind == "resource":
            resource = block.get("resource")
            if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
                parts.append(f"[resource {resource.get('uri')}]\n{resource['text']}")
    text = "\n".join(parts)
    if not text.strip() and not any(block.get("type") in CARRIERS for block in blocks):
        raise InvalidInput("prompt", "must contain non-empty text, an image or a resource")
    return text


@dataclass(frozen=True, slots=True)
class UserPrompt:
    """A turn's user message: the text the transcript shows and the builtin engine reads,
    and the content blocks as the client sent them (an external agent gets these; empty
    when the message came as plain text, over HTTP say)."""

    text: str
    blocks: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, blocks: Sequence[Mapping[str, Any]]) -> UserPrompt:
        return cls(text_of(blocks), tuple(blocks))

    def has(self, kind: str) -> bool:
        return any(block.get("type") == kind for block in self.blocks)
