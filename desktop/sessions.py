"""Session helpers both clients use (the window's bridge and the terminal client): list
every session, read a transcript page, resume. Written once, on the host."""

from __future__ import annotations

from typing import Any, Protocol

from protocol.methods import Method


class Requester(Protocol):
    async def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Any: ...


def is_older(incoming: dict[str, Any], known: dict[str, Any] | None) -> bool:
    """Whether `incoming` is an older summary of a session than `known`: one comparison of
    their `version`s (the sidecar bumps it with every change it stores), whatever order
    they arrived in. Equal versions differ only in what the live runtime adds, so the
    later word wins; a summary without a version (an older sidecar) is never older."""
    if known is None:
        return False
    have, new = known.get("version"), incoming.get("version")
    return isinstance(have, int) and isinstance(new, int) and new < have


async def list_page(host: Requester, cursor: str | None = None) -> dict[str, Any]:
    """One page of the session list (most recent activity first) and the cursor of the
    next (None at the end): the window draws the first page at once and asks for the
    rest behind it, so thousands of sessions do not hold up its first paint."""
    params: dict[str, Any] = {"cursor": cursor} if cursor else {}
    page = await host.request(Method.SESSION_LIST, params)
    return {
        "sessions": [entry["_meta"] for entry in page["sessions"]],
        "nextCursor": page.get("nextCursor") or None,
    }


async def list_all(
    host: Requester, query: str | None = None, archived: bool = False
) -> list[dict[str, Any]]:
    """Every session summary (the sidecar pages its list 100 at a time), most recent
    activity first; `query` keeps those whose title or transcript has every word,
    `archived` lists the archived ones instead."""
    summaries: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    if query:
        meta["query"] = query
    if archived:
        meta["archived"] = True
    params: dict[str, Any] = {"_meta": meta} if meta else {}
    while True:
        page = await host.request(Method.SESSION_LIST, params)
        summaries.extend(entry["_meta"] for entry in page["sessions"])
        cursor = page.get("nextCursor")
        if not cursor:
            return summaries
        params = {"cursor": cursor, **({"_meta": meta} if meta else {})}


async def messages_page(
    host: Requester, session_id: str, offset: int | None, limit: int
) -> dict[str, Any]:
    """A transcript page; `offset=None` means the newest `limit` entries."""
    if offset is None:
        head = await host.request(Method.MESSAGES, {"sessionId": session_id, "limit": 1})
        offset = max(0, int(head["total"]) - limit)
    page = await host.request(
        Method.MESSAGES, {"sessionId": session_id, "offset": offset, "limit": limit}
    )
    return {"messages": page["messages"], "total": page["total"], "offset": offset}


async def resume(host: Requester, session_id: str, cwd: str | None = None) -> dict[str, Any]:
    """Resume a session in its own recorded directory; its new summary."""
    if cwd is None:
        cwd = (await host.request(Method.STATUS, {"sessionId": session_id}))["cwd"]
    result = await host.request(
        Method.SESSION_RESUME, {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
    )
    resumed: dict[str, Any] = result["_meta"]
    return resumed


async def fork(host: Requester, session_id: str, turn: int | None = None) -> dict[str, Any]:
    """Fork a session in its own directory (before `turn`, when given); the new summary."""
    cwd = (await host.request(Method.STATUS, {"sessionId": session_id}))["cwd"]
    params: dict[str, Any] = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
    if turn is not None:
        params["_meta"] = {"turn": turn}
    result = await host.request(Method.SESSION_FORK, params)
    forked: dict[str, Any] = result["_meta"]
    return forked


async def changes(host: Requester, session_id: str, turn: int | None = None) -> dict[str, Any]:
    """What a turn changed (default: the last): files with +/- counts and the unified diff."""
    params: dict[str, Any] = {"sessionId": session_id}
    if turn is not None:
        params["turn"] = turn
    found: dict[str, Any] = await host.request(Method.CHANGES, params)
    return found


async def rewind(
    host: Requester,
    session_id: str,
    turn: int | None,
    scope: str,
    *,
    force: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Rewind to before `turn` (None: undo the last code rewind, scope code); `dry_run`
    only says what would change."""
    params: dict[str, Any] = {"sessionId": session_id, "scope": scope, "force": force}
    params["dryRun"] = dry_run
    if turn is None:
        params["undo"] = True
    else:
        params["turn"] = turn
    outcome: dict[str, Any] = await host.request(Method.REWIND, params)
    return outcome
