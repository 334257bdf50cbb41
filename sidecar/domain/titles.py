"""A session's title from its first prompt, when nobody gave it one."""

from __future__ import annotations

from typing import Final

TITLE_CHARS: Final = 60


def title_from(text: str) -> str:
    """The first non-empty line, cut at a word boundary near 60 characters."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = " ".join(line.split())  # tabs, runs of spaces
    if len(line) <= TITLE_CHARS:
        return line or "Untitled session"
    cut = line[: TITLE_CHARS + 1].rsplit(" ", 1)[0]
    if len(cut) < TITLE_CHARS // 2:  # one very long word: cut inside it
        cut = line[:TITLE_CHARS]
    return cut.rstrip(" ,.;:-") + "…"
