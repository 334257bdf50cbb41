"""Leases: which live sidecar process runs a session, so two never do.

A runtime takes the session's lease when it starts (in the same transaction as
its generation), the process renews all its leases together while it lives,
and close releases it. Another process may take a session over only when the
holder is gone: its pid no longer runs on this host (checked together with the
process start time, so a recycled pid does not count), or it stopped renewing
(frozen, or on another host) until the lease expired. Writes stay fenced by
generation, so a holder that comes back after a takeover cannot write.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from functools import cache

from sidecar.domain.records import LIVE_STATES, SessionRecord


@dataclass(frozen=True, slots=True)
class Owner:
    host: str
    pid: int
    start: int  # process start time in clock ticks since boot (0 where unknown)

    def encode(self) -> str:
        return json.dumps({"host": self.host, "pid": self.pid, "start": self.start})

    @classmethod
    def decode(cls, text: str) -> Owner | None:
        try:
            data = json.loads(text)
            return cls(str(data["host"]), int(data["pid"]), int(data["start"]))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _start_ticks(pid: int) -> int | None:
    """The process's start time (field 22 of /proc/PID/stat), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return None
    except OSError:
        return 0
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields and fields[0] == b"Z":
        return None  # a zombie has stopped running
    return int(fields[19]) if len(fields) > 19 else 0


@cache
def this_process() -> Owner:
    return Owner(socket.gethostname(), os.getpid(), _start_ticks(os.getpid()) or 0)


def is_alive(owner_text: str | None) -> bool:
    """False only when we know the holder is gone; a holder on another host counts as
    alive (its lease expiry decides)."""
    if owner_text is None:
        return False
    owner = Owner.decode(owner_text)
    if owner is None:
        return False
    if owner.host != this_process().host:
        return True
    if not os.path.isdir("/proc"):
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    start = _start_ticks(owner.pid)
    return start is not None and (owner.start == 0 or start == owner.start)


def holder_gone(owner_text: str | None, expires: float | None, now: float) -> bool:
    """May another process take this lease over?"""
    if owner_text is None:
        return True
    if expires is not None and expires < now:
        return True
    return not is_alive(owner_text)


def describe(owner_text: str | None) -> str:
    owner = Owner.decode(owner_text) if owner_text else None
    return owner.describe() if owner else "an unknown process"


class Leases:
    """This process's side of the lease rules: who we are, how long a lease lasts, and
    what another holder's lease says about a record."""

    def __init__(self, ttl: float, owner: Owner | None = None) -> None:
        self.ttl = ttl
        self.owner = (owner or this_process()).encode()

    def expiry(self, at: float) -> float:
        return at + self.ttl

    def holder(self, record: SessionRecord, at: float) -> str | None:
        """Another live sidecar that runs this session right now, if one does."""
        if record.status not in LIVE_STATES or record.lease_owner in (None, self.owner):
            return None
        if holder_gone(record.lease_owner, record.lease_expires, at):
            return None
        return describe(record.lease_owner)

    @staticmethod
    def orphaned(record: SessionRecord, at: float) -> bool:
        """Live-looking, but its holder is gone (the caller knows it is not ours)."""
        return holder_gone(record.lease_owner, record.lease_expires, at)
