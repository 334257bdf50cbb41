"""`@` mentions in the terminal client: completing `@partial` through the sidecar's
`_session/files`, and turning the mentions of a line into ACP `resource_link` blocks sent
beside its text.

A mention is `@` at the start of a word followed by a path (`@src/app.py`; a path with
spaces is quoted: `@"my notes.md"`), relative to the session's cwd. A word is taken as a
mention when completion offered that path or it exists under the cwd, so `user@host` or an
`@decorator` in the text stays text. The sidecar decides what the model gets of it (the
file's text, or a note: `sidecar/fs/mentions.py`).

Completion itself is the line editor's (`desktop.tui_editor.MentionCompleter`); what is
here is needed on a pipe too, without prompt_toolkit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

# `@path` or `@"a path"` at the start of a word.
MENTION: Final = re.compile(r'(?<!\S)@(?:"([^"\n]+)"|([^\s"]+))')
# The mention being typed at the cursor: `@` at a word start, then no space (or an open quote).
TYPING: Final = re.compile(r'(?<!\S)@("[^"\n]*|[^\s"]*)$')
COMPLETIONS: Final = 30  # paths asked of the sidecar per keystroke


def typing_mention(text_before_cursor: str) -> tuple[str, int] | None:
    """The partial path after an `@` at the cursor (without its quote) and how many
    characters a completion replaces, or None when no mention is being typed."""
    found = TYPING.search(text_before_cursor)
    if found is None:
        return None
    return found.group(1).lstrip('"'), len(found.group(1))


def quoted(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def mentions(text: str) -> list[str]:
    """The paths mentioned in `text`, in order, each once."""
    seen: dict[str, None] = {}
    for found in MENTION.finditer(text):
        path = (found.group(1) or found.group(2)).rstrip(".,;:!?)")
        if path:
            seen.setdefault(path, None)
    return list(seen)


def mention_blocks(text: str, cwd: str, offered: Iterable[str] = ()) -> list[dict[str, Any]]:
    """A `resource_link` for each mention in `text` that names a path: offered by
    completion, or existing under `cwd`."""
    known = set(offered)
    blocks = []
    for path in mentions(text):
        absolute = os.path.normpath(os.path.join(cwd, path))
        if path.rstrip("/") not in known and not os.path.lexists(absolute):
            continue
        blocks.append({"type": "resource_link", "name": path, "uri": Path(absolute).as_uri()})
    return blocks
