"""Real sidecars on one PostgreSQL database, each playing a host of its own.

A "host" here is a host id (`--host-id`) and a data dir of its own (checkpoints are
files, per host); the processes share this machine, so only the host id tells them
apart, which is exactly what the lease rules look at.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import Sidecar

from desktop.client import RpcError

State = dict[str, Any]


async def start(
    root: Path, url: str, host: str, *args: str, env: dict[str, str] | None = None
) -> Sidecar:
    """A sidecar that has finished starting: its reconciliation has run (`initialize` is
    answered before that; any other request waits for it)."""
    sidecar = await Sidecar.start(
        root / host,
        "--store",
        "postgres",
        "--database-url",
        url,
        "--host-id",
        host,
        *args,
        env=env,
    )
    with contextlib.suppress(RpcError):  # not found, or the store's error: either way ready
        await sidecar.status("sess_none")
    return sidecar


def state_of(session_id: str, **expected: Any) -> Callable[[str, dict[str, Any]], bool]:
    """A `wait_for` predicate: a `_session/state` of the session with these fields."""

    def match(method: str, params: dict[str, Any]) -> bool:
        return (
            method == "_session/state"
            and params.get("sessionId") == session_id
            and all(params.get(key) == value for key, value in expected.items())
        )

    return match


def log_of(sidecar: Sidecar) -> str:
    return "\n".join(sidecar.client.stderr_tail)
