"""A line over the frame limit (`protocol.framing.MAX_MESSAGE_BYTES`): discarded without
holding more than the limit, and its start read for the request's id, so the client's
request is answered by that id rather than by an id-less error it cannot match.

The start is read by a streaming JSON parser (`ijson`) over a bounded prefix: the
object's top-level members up to the cut. ACP's SDKs and our own client write `id` and
`method` before `params`, so a request whose params are what made it too large has both
in the prefix; a line whose id comes after its bulk (or that is not an object) keeps the
null id JSON-RPC gives what cannot be read.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

HEAD_BYTES: Final = 64 * 1024  # of an oversized line read for its id and method


def leading_members(head: bytes) -> dict[str, Any]:
    """The top-level members of the JSON object `head` starts, those complete before it
    is cut (values bounded by `head` itself); {} when it starts no object."""
    import ijson  # only an oversized line pays for the import

    members: dict[str, Any] = {}
    try:
        for key, value in ijson.kvitems(head[:HEAD_BYTES], "", use_float=True):
            members.setdefault(key, value)
    except ijson.JSONError:
        pass  # the cut (or bad JSON): what was read before it stands
    return members


async def discard_line(reader: asyncio.StreamReader, consumed: int) -> dict[str, Any]:
    """Skip the rest of a line over the reader's limit (`consumed`: the bytes of it the
    reader holds); the members its start shows."""
    head = await reader.readexactly(consumed)
    members = leading_members(head)
    del head
    while True:
        try:
            await reader.readuntil(b"\n")
            return members
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return members
