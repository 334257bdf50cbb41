"""The routing of one agent connection's updates by session id (sidecar/agent/external/
router.py), in process: which session an update goes to, and that what it remembers of
sessions that left stays bounded on a process serving sessions for a long time."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from sidecar.agent.external import router as routing
from sidecar.agent.external.client import HostClient


class Recorder:
    """Stands in for a session's HostClient: records the updates routed to it."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))


def client(recorder: Recorder) -> HostClient:
    return cast(HostClient, recorder)


def test_a_stray_update_of_a_session_that_left_is_dropped_not_given_to_one_opening() -> None:
    router = routing.SessionRouter("agent")
    gone, opening = Recorder(), Recorder()
    router.add("old", client(gone))
    router.forget(client(gone))
    router.opening(client(opening))
    asyncio.run(router.session_update("old", "stray"))
    asyncio.run(router.session_update("new", "commands"))  # before session/new's answer
    assert gone.updates == [] and opening.updates == [("new", "commands")]


def test_the_ids_that_left_are_remembered_up_to_a_bound_oldest_forgotten_first() -> None:
    router = routing.SessionRouter("agent")
    bound = routing.LEFT_REMEMBERED
    for n in range(bound + 10):
        session = Recorder()
        router.add(f"s{n}", client(session))
        router.remove(f"s{n}")
    opening = Recorder()
    router.opening(client(opening))
    asyncio.run(router.session_update("s0", "oldest, forgotten"))
    asyncio.run(router.session_update(f"s{bound + 9}", "newest, still known"))
    assert opening.updates == [("s0", "oldest, forgotten")]
