"""A prompt's content blocks as the turn's user message: for the builtin engine, each `@`
mention (a `resource_link` to a `file://` path) read from the session's directory into
the model's text (bounded: `fs/mentions.py` per file, `MENTIONS_MAX` per prompt); for an
external agent that takes embedded context, each mention of a small text file inside
the session's directory sent as an embedded `resource` with its text (the same checks
and bounds; the transcript keeps the link's reference line), any other link as it is;
for one that does not, the links stay links (it reads files itself, with its own
tools). Read here, so every client gets it and the confinement is in one place. One
path for `session/prompt` and for a queued message whose turn came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sidecar.domain.prompts import UserPrompt, text_of
from sidecar.fs.mentions import MENTION_MAX, file_path, mentioned_file, read_mention

MENTIONS_MAX: Final = 256 * 1024  # bytes of mentioned files inlined into one prompt

Block = Mapping[str, Any]


def _mentions_files(blocks: Sequence[Block]) -> bool:
    return any(
        b.get("type") == "resource_link" and file_path(str(b.get("uri"))) is not None
        for b in blocks
    )


def _reader(cwd: str, hidden: tuple[str, ...]) -> Callable[[str], str | None]:
    left = MENTIONS_MAX

    def read(uri: str) -> str | None:
        nonlocal left
        if file_path(uri) is None:
            return None  # not a local file: a reference line
        if left <= 0:
            return (
                f"[mentioned {uri}: not inlined: the prompt's mentions are over "
                f"{MENTIONS_MAX // 1024} KiB]"
            )
        text = read_mention(uri, cwd, limit=min(MENTION_MAX, left), hidden=hidden)
        left -= len(text.encode())
        return text

    return read


def _embedded(blocks: Sequence[Block], cwd: str, hidden: tuple[str, ...]) -> list[Block]:
    """`blocks` with each link to a small text file inside `cwd` as an embedded text
    resource (bounded as the builtin's mentions); every other block as it was."""
    left = MENTIONS_MAX
    sent: list[Block] = []
    for block in blocks:
        uri = str(block.get("uri"))
        if block.get("type") != "resource_link" or file_path(uri) is None or left <= 0:
            sent.append(block)
            continue
        found = mentioned_file(uri, cwd, limit=min(MENTION_MAX, left), hidden=hidden)
        if found.text is None:
            sent.append(block)  # the agent gets the link, and may read it its own way
            continue
        left -= len(found.text.encode())
        sent.append({"type": "resource", "resource": {"uri": uri, "text": found.text}})
    return sent


async def read_prompt(
    blocks: Sequence[Block],
    *,
    cwd: str,
    hidden: tuple[str, ...],
    reads_files: bool,
    embeds_files: bool = False,
) -> UserPrompt:
    """The message (InvalidInput naming `prompt` when it holds nothing). `reads_files`:
    mentions become the model's text (the builtin engine); `embeds_files`: embedded
    resources (an external agent that takes them). Reading files blocks: done in a
    worker thread."""
    if not (reads_files or embeds_files) or not _mentions_files(blocks):
        return UserPrompt.of(blocks)
    if reads_files:
        text = await asyncio.to_thread(text_of, blocks, _reader(cwd, hidden))
        return UserPrompt(text, tuple(blocks))
    sent = await asyncio.to_thread(_embedded, blocks, cwd, hidden)
    return UserPrompt(text_of(blocks), tuple(sent))
