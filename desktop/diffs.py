"""Diffs as the terminal client prints them: one file's change from its old and new text
(a write's approval, its tool card), a turn's unified diff split per file (`/changes`),
both bounded in lines so a large file never floods the terminal."""

from __future__ import annotations

import difflib
import re
from typing import Final

CONTEXT: Final = 3
HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")
GREEN, RED, CYAN, RESET = "\x1b[32m", "\x1b[31m", "\x1b[36m", "\x1b[0m"


def _lines(text: str | None) -> list[str]:
    return (text or "").splitlines()


def text_diff(path: str, old_text: str | None, new_text: str) -> list[str]:
    """A unified diff of one file (`old_text` None: the file is new).

    The common head and tail are cut before difflib compares (it is slow on long
    inputs, and an edit usually touches a few lines of a long file); the hunk numbers
    are then moved back to where the lines really are.
    """
    old, new = _lines(old_text), _lines(new_text)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start = max(0, head - CONTEXT)
    keep = max(0, tail - CONTEXT)
    window_old, window_new = old[start : len(old) - keep], new[start : len(new) - keep]
    fromfile = "/dev/null" if old_text is None else path
    lines = []
    for line in difflib.unified_diff(
        window_old, window_new, fromfile, path, lineterm="", n=CONTEXT
    ):
        match = HUNK.match(line)
        if match:
            old_at, old_n, new_at, new_n = match.groups()
            old_from, new_from = int(old_at) + start, int(new_at) + start
            line = f"@@ -{old_from}{old_n or ''} +{new_from}{new_n or ''} @@"
        lines.append(line)
    return lines


def split_unified(diff: str) -> dict[str, list[str]]:
    """A multi-file unified diff (git's) as {path: its lines, headers included}."""
    sections: list[list[str]] = []
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    return {_section_path(section): section for section in sections}


def _section_path(section: list[str]) -> str:
    """The file a section is about: `+++ b/P`, or `--- a/P` for a deletion, or the header."""
    for prefix in ("+++ b/", "--- a/"):
        for line in section:
            if line.startswith(prefix):
                return line[len(prefix) :]
    return section[0].removeprefix("diff --git a/").rpartition(" b/")[0]


def counts(lines: list[str]) -> tuple[int, int]:
    """(additions, deletions) in a unified diff's lines."""
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added, removed


def bounded(lines: list[str], limit: int) -> list[str]:
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"... {len(lines) - limit} more line(s) not shown"]


def colour(line: str) -> str:
    if line.startswith(("+++", "---")):
        return line
    if line.startswith("+"):
        return GREEN + line + RESET
    if line.startswith("-"):
        return RED + line + RESET
    if line.startswith("@@"):
        return CYAN + line + RESET
    return line
