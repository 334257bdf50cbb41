"""A prompt's content blocks as the turn's user message: for the builtin engine, each `@`
mention (a `resource_link` to a `file://` path) read from the session's directory into
the model's text (bounded: `fs/mentions.py` per file, `MENTIONS_MAX` per prompt); for an
external agent, the links stay links (it reads files itself, with its own tools). One
path for `session/prompt` and for a queued message whose turn came."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sidecar.domain.prompts import UserPrompt, text_of
from sidecar.fs.mentions import MENTION_MAX, file_path, read_mention

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


async def read_prompt(
    blocks: Sequence[Block], *, cwd: str, hidden: tuple[str, ...], reads_files: bool
) -> UserPrompt:
    """The message (InvalidInput naming `prompt` when it holds no text). Reading files
    blocks: done in a worker thread."""
    if not reads_files or not _mentions_files(blocks):
        return UserPrompt.of(blocks)
    text = await asyncio.to_thread(text_of, blocks, _reader(cwd, hidden))
    return UserPrompt(text, tuple(blocks))
