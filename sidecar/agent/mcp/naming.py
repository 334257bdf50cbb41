"""Public tool names: what the model sees for an MCP tool, and how to map it back.

The rule (deterministic, order-independent, collision-free):

1. The candidate for tool `t` of server `s` is `s__t`.
2. If the candidate already matches `^[a-zA-Z0-9_-]{1,64}$` (the alphabet and length both
   OpenAI and Anthropic accept) it is used as is, so well-behaved names stay readable.
3. Otherwise every character outside `[a-zA-Z0-9_-]` becomes `_`, the result is cut to leave
   room, and `_` plus the first 8 hex digits of `sha256(s + "\\0" + t)` is appended. The hash
   is of the *original* pair, so two names that sanitise alike still differ.
4. If two pairs still end up with the same name (e.g. server `a_` tool `b` and server `a`
   tool `_b` both give `a___b`), every member of that clash gets the hashed form of step 3;
   should hashed names clash again, the hash grows by 4 digits until they do not.

A name therefore depends only on the set of (server, tool) pairs, never on listing order; it
changes only when a newly listed tool clashes with it. The mapping is kept by the caller
(`assign_names` returns it) because sanitising is lossy and cannot be undone from the name.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable

MAX_NAME_LENGTH = 64
SEPARATOR = "__"
VALID_NAME: re.Pattern[str] = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_FIRST_HASH_DIGITS = 8
_MAX_HASH_DIGITS = 40

Pair = tuple[str, str]


def sanitise(text: str) -> str:
    """Replace every character a provider would reject with `_`."""
    return _INVALID_CHAR.sub("_", text)


def hashed_name(server: str, tool: str, digits: int = _FIRST_HASH_DIGITS) -> str:
    """Step 3 of the rule: sanitised, cut, and suffixed with a hash of the original pair."""
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:digits]
    stem = sanitise(f"{server}{SEPARATOR}{tool}")[: MAX_NAME_LENGTH - 1 - digits]
    return f"{stem}_{digest}"


def candidate_name(server: str, tool: str) -> str:
    """Steps 1-3: the name a pair gets when nothing clashes with it."""
    plain = f"{server}{SEPARATOR}{tool}"
    return plain if VALID_NAME.match(plain) else hashed_name(server, tool)


def assign_names(pairs: Iterable[Pair]) -> dict[Pair, str]:
    """Give every distinct (server, tool) pair its public name; names are unique and valid."""
    names = {pair: candidate_name(*pair) for pair in sorted(set(pairs))}
    digits = _FIRST_HASH_DIGITS
    while True:
        holders: defaultdict[str, list[Pair]] = defaultdict(list)
        for pair, name in names.items():
            holders[name].append(pair)
        clashes = [group for group in holders.values() if len(group) > 1]
        if not clashes:
            return names
        if digits > _MAX_HASH_DIGITS:  # pragma: no cover - needs a sha256 prefix collision
            raise RuntimeError("could not make MCP tool names unique")
        for group in clashes:
            for pair in group:
                names[pair] = hashed_name(*pair, digits=digits)
        digits += 4
