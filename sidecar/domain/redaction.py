"""The process's secret values, and text with every one of them masked.

Secrets come into use at run time: provider API keys and the database password at
start-up, MCP server env and header values when a session's runtime is made (created,
resumed, loaded, forked), each runtime's HTTP bearer token. Whoever brings one in adds it
to `SECRETS`; the log filter (`sidecar/log_redact.py`) masks them in every log line,
whichever library wrote it. The registry is memory only: never persisted, never logged,
and it holds the values themselves only as long as the process (or, for what is
discarded, the runtime) lives.

What counts as the same secret in text: the value; each whitespace-separated word of it
(a header `Bearer <token>` leaks as the token alone; the scheme word is not masked); its
JSON-, repr- and URL-escaped forms. Values (and words) shorter than `MIN_SECRET` characters are not masked: they are
not secrets worth the name, and masking every `on` or `1234` would garble the log. A
library that shortens what it quotes (pydantic's `input_value='<first 24>...<last 23>'`)
shows pieces of a secret on either side of the cut: a piece of at least `MIN_PIECE`
characters that begins a secret and ends at a cut mark, or starts right after one and
ends the secret, is masked too.

Cheap: one compiled alternation of every form, longest first, rebuilt only when the set
changed and only when the next text is masked; text without a cut mark needs one regex
pass, and the pieces at a cut mark are found through an index of every form's
`MIN_PIECE`-character grams.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote

MARK: Final = "[redacted]"
MIN_SECRET: Final = 6
MIN_PIECE: Final = 6
CUT_MARKS: Final = ("...", "…")
# Words of a secret that are not secret: an Authorization header's scheme.
NOT_SECRET: Final = frozenset({"bearer", "basic", "digest", "token"})


def _forms(value: str) -> set[str]:
    """The ways `value` (and each word of it) appears in text."""
    forms: set[str] = set()
    for word in {value.strip(), *value.split()}:
        if len(word) < MIN_SECRET or word.lower() in NOT_SECRET:
            continue
        forms |= {word, json.dumps(word)[1:-1], repr(word)[1:-1], quote(word, safe="")}
    return {form for form in forms if len(form) >= MIN_SECRET}


Grams = dict[str, list[tuple[str, int]]]  # every MIN_PIECE-gram: (form, its offset there)


class SecretRegistry:
    """A multiset of secret values (added twice: discarded twice), thread-safe: records
    are logged from worker threads too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: Counter[str] = Counter()
        # Built on the first `redact` after a change (compiling is the cost: ~1 ms for 30
        # values, ~40 ms for 300), so a runtime's start and close never pay it; swapped
        # whole, so `redact` reads it without the lock. None: nothing to mask.
        self._compiled: tuple[re.Pattern[str], Grams] | None = None
        self._stale = False

    def __len__(self) -> int:
        return len(self._values)

    def add(self, *values: str | None) -> None:
        """Mask these from now on; empty and None values are ignored."""
        fresh = [v for v in values if v]
        if not fresh:
            return
        with self._lock:
            known = set(self._values)
            self._values.update(fresh)
            if not known.issuperset(fresh):
                self._stale = True

    def discard(self, *values: str | None) -> None:
        """Undo one `add` of each (a runtime's token, once the runtime is gone)."""
        with self._lock:
            gone = False
            for value in values:
                if value and self._values[value] > 0:
                    self._values[value] -= 1
                    if self._values[value] == 0:
                        del self._values[value]
                        gone = True
            if gone:
                self._stale = True

    def _compile(self) -> tuple[re.Pattern[str], Grams] | None:
        with self._lock:
            if self._stale:
                self._compiled, self._stale = _compiled(self._values), False
            return self._compiled

    def redact(self, text: str) -> str:
        """`text` with every known secret (and every cut piece of one) as `MARK`."""
        compiled = self._compile() if self._stale else self._compiled
        if compiled is None or not text:
            return text
        pattern, grams = compiled
        text = pattern.sub(MARK, text)
        if any(mark in text for mark in CUT_MARKS):
            text = _mask_cut_pieces(text, grams)
        return text


def _compiled(values: Iterable[str]) -> tuple[re.Pattern[str], Grams] | None:
    """One alternation of every form, longest first, and the grams of each form."""
    forms: set[str] = set().union(*(_forms(v) for v in values))
    if not forms:
        return None
    ordered = sorted(forms, key=len, reverse=True)
    grams: Grams = {}
    for form in ordered:
        for offset in range(len(form) - MIN_PIECE + 1):
            grams.setdefault(form[offset : offset + MIN_PIECE], []).append((form, offset))
    return re.compile("|".join(map(re.escape, ordered))), grams


def _mask_cut_pieces(text: str, grams: Grams) -> str:
    """Mask a secret's head just before a cut mark and its tail just after one."""
    spans: list[tuple[int, int]] = []
    for mark in CUT_MARKS:
        at = text.find(mark)
        while at != -1:
            after = at + len(mark)
            if head := _head(text, at, grams):
                spans.append((at - head, at))
            if tail := _tail(text, after, grams):
                spans.append((after, after + tail))
            at = text.find(mark, after)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    for start, end in reversed(merged):
        text = text[:start] + MARK + text[end:]
    return text


def _head(text: str, end: int, grams: Grams) -> int:
    """The length of the longest beginning of a form that `text[:end]` ends with: its last
    MIN_PIECE characters are a gram of that form, and all before them in the form match."""
    best = 0
    for form, offset in grams.get(text[max(0, end - MIN_PIECE) : end], ()):
        size = offset + MIN_PIECE
        if size > best and text.endswith(form[:size], 0, end):
            best = size
    return best


def _tail(text: str, start: int, grams: Grams) -> int:
    """The length of the longest ending of a form that `text[start:]` starts with."""
    best = 0
    for form, offset in grams.get(text[start : start + MIN_PIECE], ()):
        size = len(form) - offset
        if size > best and text.startswith(form[offset:], start):
            best = size
    return best


SECRETS: Final = SecretRegistry()
"""The process's one registry (the log filter reads it)."""
