"""Every session summary carries its record's `version` through a real sidecar: it goes
up with each change the store makes (a turn, a rename, an archive), a status request
that changes nothing leaves it, and it survives a restart (issue 22, point 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import Sidecar


async def listed_meta(sidecar: Sidecar, session_id: str) -> dict[str, Any]:
    """The summary `session/list` gives of an archived session."""
    page = await sidecar.call("session/list", {"_meta": {"archived": True}})
    (entry,) = [e for e in page["sessions"] if e["sessionId"] == session_id]
    meta: dict[str, Any] = entry["_meta"]
    return meta


async def test_the_summary_version_rises_with_each_change_and_survives_restart(
    data_dir: Path, workspace: Path
) -> None:
    sidecar = await Sidecar.start(data_dir)
    try:
        created = await sidecar.new_session(workspace)
        sid = created["sessionId"]
        first = (await sidecar.status(sid))["version"]
        assert first >= 1
        assert (await sidecar.status(sid))["version"] == first  # reading changes nothing
        await sidecar.prompt(sid, "hello there")
        after_turn = await sidecar.status(sid)
        assert after_turn["version"] > first
        renamed = await sidecar.call("_session/rename", {"sessionId": sid, "title": "Named"})
        after_rename = (await sidecar.status(sid))["version"]
        assert after_rename > after_turn["version"]
        assert renamed["version"] == after_rename
        await sidecar.call("_session/archive", {"sessionId": sid, "archived": True})
        after_archive = (await sidecar.status(sid))["version"]
        assert after_archive > after_rename
        assert (await listed_meta(sidecar, sid))["version"] == after_archive
        pushed = [p["version"] for m, p in sidecar.seen if m == "_session/state"]
        assert pushed and all(1 <= v <= after_archive for v in pushed)
        await sidecar.call("session/close", {"sessionId": sid})
        closed = (await sidecar.status(sid))["version"]
        assert closed > after_archive
    finally:
        await sidecar.close()
    again = await Sidecar.start(data_dir)
    try:
        assert (await again.status(sid))["version"] == closed
        assert (await listed_meta(again, sid))["version"] == closed
    finally:
        await again.close()
