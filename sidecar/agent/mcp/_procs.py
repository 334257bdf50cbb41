"""Finishing what the SDK's stdio shutdown leaves behind: the rest of the server's group.

`stdio_client` starts the server in a new session (`start_new_session=True`, so its process
group id is its pid) and on exit closes its stdin, waits 2 s, then SIGTERMs the *group*,
waits 2 s more and SIGKILLs it. But the group is only signalled when the server itself is
slow to exit: a server that exits promptly on EOF leaves its children (a `npx` wrapper's
node, a helper daemon) running. So after the transport is closed, the hub sweeps the group:
SIGTERM, a short grace, SIGKILL. The group id is learnt right after the spawn by finding
the child whose stderr is the pipe the hub created for it. Linux (`/proc`) only; elsewhere
the sweep is skipped and only the SDK's own escalation applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

_PROC = Path("/proc")
_POLL = 0.05


def child_with_stderr(pipe_inode: int) -> int | None:
    """The pid of our direct child whose fd 2 is the pipe with this inode."""
    if not _PROC.is_dir():
        return None
    target = f"pipe:[{pipe_inode}]"
    me = os.getpid()
    for pid in _children(me):
        with contextlib.suppress(OSError):
            if os.readlink(_PROC / str(pid) / "fd" / "2") == target:
                return pid
    return None


async def sweep_group(pgid: int, grace: float = 2.0) -> None:
    """Stop every live process left in the group: SIGTERM, then SIGKILL after `grace`."""
    if not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            _signal_group(pgid, signal.SIGKILL)
            return
        await asyncio.sleep(_POLL)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether a non-zombie member remains; zombies are dead, whoever fails to reap them."""
    if not _PROC.is_dir():
        return False
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields is not None and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _children(pid: int) -> list[int]:
    """Direct children, from the task `children` lists or, failing that, a scan of ppids."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in (_PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError):
                found.update(int(child) for child in (task / "children").read_text().split())
    if found:
        return sorted(found)
    return [
        int(entry.name)
        for entry in _PROC.iterdir()
        if entry.name.isdigit() and (_stat_fields(entry.name) or ("", ""))[1] == str(pid)
    ]


def _stat_fields(pid: str) -> list[str] | None:
    """`state ppid pgrp ...` from /proc/<pid>/stat (the command name may contain spaces)."""
    try:
        stat = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()
