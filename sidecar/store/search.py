"""Search words for `session/list` `_meta.query`, shared by every store.

User input is never handed to a query language: it is cut into plain words (letters and
digits; everything else separates), each word matched as a word prefix ("deplo" finds
"deploy"), and a session matches when every word occurs in its title or somewhere in
its transcript (not necessarily in one message). A query with no words is no filter.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Final

MAX_TERMS: Final = 16  # words beyond these are ignored (a bounded statement)
MAX_TERM_CHARS: Final = 64
# The text a transcript row contributes to the index: its `content`, when it is text
# (the SQLite and PostgreSQL indexes extract the same field in SQL).
CONTENT_KEY: Final = "content"
_WORD: Final = re.compile(r"[^\W_]+")


def fold(text: str, *, diacritics: bool = False) -> str:
    """Lower case, and (unless `diacritics`) accents removed, as FTS5's unicode61 does."""
    text = text.lower()
    if diacritics:
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def terms(query: str | None, *, diacritics: bool = False) -> list[str]:
    """The distinct words of `query`, in order, at most MAX_TERMS. [] means no filter."""
    if not query:
        return []
    found: list[str] = []
    for word in _WORD.findall(fold(query, diacritics=diacritics)):
        word = word[:MAX_TERM_CHARS]
        if word not in found:
            found.append(word)
        if len(found) == MAX_TERMS:
            break
    return found


def fts5_prefix(term: str) -> str:
    """An FTS5 MATCH operand for one word: quoted (so `NEAR`, `*`, `-`, `(` are text),
    then a prefix query."""
    return '"' + term.replace('"', '""') + '"*'


def row_text(row: Mapping[str, Any]) -> str:
    value = row.get(CONTENT_KEY)
    return value if isinstance(value, str) else ""


def matches(words: list[str], texts: Iterable[str]) -> bool:
    """Every word is a prefix of some word of `texts` (the memory store's plain scan)."""
    remaining = set(words)
    for text in texts:
        if not remaining:
            break
        tokens = _WORD.findall(fold(text))
        remaining = {w for w in remaining if not any(t.startswith(w) for t in tokens)}
    return not remaining
