"""A directory's paths, held for fuzzy completion (`_session/files`): built once per
listing, then every query is a few regular-expression scans in C over one lowercase
string, never a Python loop over every path.

The paths are kept in one order -- shallow first, then shorter, then by name -- joined
by newlines into `_blob`. A query runs its tiers best first, each a `finditer` over the
blob that stops once enough candidates are found:

0. the query whole, inside the base name (`conf` in `src/config.py`);
1. the query whole, anywhere in the path (`src/co` in `src/config.py`);
2. the query's characters in order, all inside the base name (`cfpy`);
3. the query's characters in order, anywhere (`scp` in `src/config.py`).

The tier is the first key of the score, so once the tiers run so far hold `limit`
candidates the later ones are not scanned at all; and since the blob is ordered shallow
and short first, stopping a tier early keeps its shortest paths, which is what the
scoring would pick anyway. The candidates
found (at most `limit * CANDIDATES_PER_RESULT`) are then scored in Python: tier, a base
name that is the query (less its extension) or starts with it, how tight the match is,
path length. The subsequence
patterns use possessive classes (`a[^b\\n]*+b`: the leftmost `b` after the `a`), so a
path of repeated characters cannot make the engine backtrack.

A path holding a newline is left out (it would split the blob); nothing else is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["file", "dir"]

CANDIDATES_PER_RESULT: Final = 8
MIN_CANDIDATES: Final = 200


@dataclass(frozen=True, slots=True)
class Found:
    path: str  # relative to the indexed directory, `/`-separated, no trailing slash
    kind: Kind


def _order(path: str) -> tuple[int, int, str]:
    return (path.count("/"), len(path), path)


def _class(char: str, *more: str) -> str:
    """A negated character class: anything but `char` (and `more`), possessively."""
    return "[^" + "".join(re.escape(c) for c in (char, *more)) + "\\n]*+"


def _subsequence(query: str, *, base_only: bool) -> str:
    """`abc` -> `a[^b\\n]*+b[^c\\n]*+c` (with `/` excluded too when `base_only`)."""
    extra = ("/",) if base_only else ()
    parts = [re.escape(query[0])]
    for char in query[1:]:
        parts.append(_class(char, *extra) + re.escape(char))
    return "".join(parts)


def patterns(query: str) -> list[re.Pattern[str]]:
    """The tiers' patterns for a lowercase query, best first; group 1 is the matched part,
    and each consumes the rest of its line (one match per path)."""
    whole = re.escape(query)
    tiers = []
    if "/" not in query:
        tiers.append(f"({whole})[^/\\n]*+\\n")
    tiers.append(f"({whole})[^\\n]*+\\n")
    if len(query) > 1:
        if "/" not in query:
            tiers.append(f"({_subsequence(query, base_only=True)})[^/\\n]*+\\n")
        tiers.append(f"({_subsequence(query, base_only=False)})[^\\n]*+\\n")
    return [re.compile(p) for p in tiers]


class PathIndex:
    """Paths under one directory, ordered for completion, with a lowercase copy to search."""

    def __init__(self, entries: Iterable[tuple[str, Kind]]) -> None:
        kept = sorted(
            {path: kind for path, kind in entries if path and "\n" not in path}.items(),
            key=lambda item: _order(item[0]),
        )
        self.paths: list[str] = [path for path, _ in kept]
        self.kinds: list[Kind] = [kind for _, kind in kept]
        lower = [path.lower() for path in self.paths]
        # Each path's offset in the blob, and one past the last (lowercasing may change a
        # length: offsets are of the lowercase text, the only one searched).
        self._starts: list[int] = []
        offset = 0
        for text in lower:
            self._starts.append(offset)
            offset += len(text) + 1
        self._starts.append(offset)
        self._blob = "\n".join(lower) + "\n" if lower else ""

    def __len__(self) -> int:
        return len(self.paths)

    def match(self, query: str, limit: int) -> tuple[list[Found], bool]:
        """The best `limit` paths for `query` (case-insensitive), and whether more match.
        An empty query: the shallowest paths (the top level first)."""
        if not query:
            top = range(min(limit, len(self.paths)))
            return [Found(self.paths[i], self.kinds[i]) for i in top], len(self.paths) > limit
        query = query.lower()
        cap = max(limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
        found: dict[int, tuple[int, int, int]] = {}  # index -> (tier, start, end in the path)
        full = False
        for tier, pattern in enumerate(patterns(query)):
            if len(found) >= limit:
                # The tier comes first in the score: no path of a later tier can rank
                # among the first `limit` any more (there may be more matches, though).
                full = True
                break
            for hit in pattern.finditer(self._blob):
                index = bisect.bisect_right(self._starts, hit.start()) - 1
                if index not in found:
                    at = self._starts[index]
                    found[index] = (tier, hit.start(1) - at, hit.end(1) - at)
                    if len(found) >= cap:
                        full = True
                        break
            if full:
                break
        ranked = sorted(found, key=lambda i: self._score(i, query, found[i]))
        chosen = ranked[:limit]
        more = full or len(found) > limit
        return [Found(self.paths[i], self.kinds[i]) for i in chosen], more

    def _score(self, index: int, query: str, hit: tuple[int, int, int]) -> tuple[int, ...]:
        tier, start, end = hit
        lower = self._blob[self._starts[index] : self._starts[index + 1] - 1]
        base_at = lower.rfind("/") + 1
        base = lower[base_at:]
        if base == query or base.split(".", 1)[0] == query:
            prefix = 0  # the name itself (`conf` -> `conf.py`)
        elif base.startswith(query) or lower.startswith(query):
            prefix = 1
        else:
            prefix = 2
        spread = end - start - len(query)  # 0: contiguous
        return (tier, prefix, spread, len(lower), index)
