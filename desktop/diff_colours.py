"""Syntax colours for the hunks the window shows (a turn's changes, a branch's diff).

Pygments tokenizes each hunk here, by the file's name, and the page gets the result as
data: for every line of a hunk, a list of `[token class, text]` pairs (`tokens`, beside
`lines`). The page makes each pair a span whose text is set as text, never parsed as
HTML, with the class only when it is a token class's short name -- so nothing the agent
wrote can become markup, whatever it is. The line's add/remove background stays the
row's; the classes are those `desktop/ui/pygments.css` colours.

Each side of a hunk (the old lines with the context, the new lines with the context) is
tokenized as one text, so a string or a comment spanning lines is coloured as such.
Bounded: a hunk with a line longer than `MAX_LINE` characters, and whatever lies beyond
`MAX_LINES` lines in one answer, stays plain (Pygments' regular expressions are not
meant for minified megabyte lines).
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import get_lexer_for_filename  # type: ignore[import-untyped]
from pygments.token import STANDARD_TYPES, _TokenType  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

MAX_LINE: Final = 2_000  # characters: a longer line leaves its hunk plain
MAX_LINES: Final = 20_000  # lines coloured per answer; the rest plain
CLASS: Final = re.compile(r"[A-Za-z0-9_-]{1,12}")  # what the page accepts as a class too

Tokens = list[list[str]]  # [[class, text], ...] for one line ("" class: plain text)


@functools.lru_cache(maxsize=256)
def _lexer(name: str) -> Lexer | None:
    """The lexer for a file name (by its name only: no content guessing), or None."""
    try:
        lexer: Lexer = get_lexer_for_filename(name, stripnl=False, stripall=False)
    except ClassNotFound:
        return None
    return lexer


def lexer_for(path: str) -> Lexer | None:
    return _lexer(posixpath.basename(path)) if path else None


def _css_class(kind: _TokenType) -> str:
    """The token's class in Pygments' stylesheets (its nearest named ancestor's)."""
    while kind not in STANDARD_TYPES:
        kind = kind.parent
    name = str(STANDARD_TYPES[kind])
    return name if CLASS.fullmatch(name) else ""


def line_tokens(lexer: Lexer, lines: Sequence[str]) -> list[Tokens]:
    """`lines` tokenized as one text, split back into lines (same count, same text)."""
    out: list[Tokens] = [[]]
    for kind, value in lexer.get_tokens("\n".join(lines) + "\n"):
        css = _css_class(kind)
        for i, part in enumerate(value.split("\n")):
            if i:
                out.append([])
            if not part:
                continue
            line = out[-1]
            if line and line[-1][0] == css:
                line[-1][1] += part  # one span per run of one class
            else:
                line.append([css, part])
    rows = out[: len(lines)]
    rows += [[] for _ in range(len(lines) - len(rows))]
    # A lexer that changed the text (tabs, a missing newline) is not trusted: plain.
    if any("".join(t for _, t in row) != text for row, text in zip(rows, lines, strict=True)):
        return [[["", text]] if text else [] for text in lines]
    return rows


def hunk_tokens(lexer: Lexer, lines: Sequence[str]) -> list[Tokens | None] | None:
    """Per line of a hunk (`lines` with their ' ', '+', '-' or '\\' marks), its tokens
    (None for a "\\ No newline" note); None when the hunk stays plain."""
    if any(len(line) > MAX_LINE for line in lines):
        return None
    old = [line[1:] for line in lines if line[:1] in (" ", "-")]
    new = [line[1:] for line in lines if line[:1] in (" ", "+")]
    old_tokens, new_tokens = iter(line_tokens(lexer, old)), iter(line_tokens(lexer, new))
    out: list[Tokens | None] = []
    for line in lines:
        mark = line[:1]
        if mark == "-":
            out.append(next(old_tokens))
        elif mark == "+":
            out.append(next(new_tokens))
        elif mark == " ":
            next(old_tokens)
            out.append(next(new_tokens))
        else:
            out.append(None)
    return out


def colour_files(files: Iterable[Any], budget: int = MAX_LINES) -> None:
    """Add `tokens` beside `lines` to each hunk of these files (`{path, hunks: [{lines}]}`
    as the sidecar sends them), in place, while `budget` lines last."""
    for entry in files:
        if not isinstance(entry, dict) or not isinstance(entry.get("hunks"), list):
            continue
        lexer = lexer_for(str(entry.get("path") or ""))
        if lexer is None:
            continue
        for hunk in entry["hunks"]:
            lines = hunk.get("lines") if isinstance(hunk, dict) else None
            if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
                continue
            if len(lines) > budget:
                return
            budget -= len(lines)
            tokens = hunk_tokens(lexer, lines)
            if tokens is not None:
                hunk["tokens"] = tokens
