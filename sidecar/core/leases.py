"""Leases: which live sidecar process runs a session, so two never do, across hosts.

A runtime takes the session's lease when it starts (in the same transaction as
its generation), the process renews all its leases together while it lives,
and close releases it. The owner is (host id, pid, process start time). Another
process may take a session over only when the holder is gone: on the same host,
its pid no longer runs (checked together with the start time, so a recycled pid
does not count); on any host, it stopped renewing (frozen, dead, cut off) until
the lease expired. Writes stay fenced by generation, so a holder that comes back
after a takeover cannot write.

Expiry is judged on the store's clock, never this host's: two hosts whose clocks
disagree by an hour must still agree on when a lease ends. `Leases` keeps the
offset between the store's clock and this host's (measured at start and at every
renewal) and applies it to every expiry it writes or compares.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from sidecar.domain.records import LIVE_STATES, SessionRecord
from sidecar.store.base import SessionStore

log = logging.getLogger(__name__)

# Test-only: seconds added to this host's clock as the lease code reads it, to play a
# host whose clock is far off (tests/test_pg_leases.py). Read here and nowhere else.
TEST_CLOCK_OFFSET_ENV: Final = "SIDECAR_TEST_CLOCK_OFFSET"
_MACHINE_ID_FILES: Final = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def _test_clock_offset() -> float:
    text = os.environ.get(TEST_CLOCK_OFFSET_ENV, "").strip()
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"{TEST_CLOCK_OFFSET_ENV} must be a number of seconds, got {text!r}"
        ) from None


_CLOCK_SKEW: Final = _test_clock_offset()


def host_clock(wall: float) -> float:
    """What this host's clock says at wall-clock time `wall` (`domain.records.now()`):
    the same, except under the test-only fake offset."""
    return wall + _CLOCK_SKEW


@cache
def default_host_id() -> str:
    """The host name, with the start of /etc/machine-id when there is one: containers
    often share a host name, and cloned machines a machine id, rarely both."""
    name = socket.gethostname() or "localhost"
    for path in _MACHINE_ID_FILES:
        try:
            machine = Path(path).read_text().strip()
        except OSError:
            continue
        if machine:
            return f"{name}-{machine[:12]}"
    return name


@dataclass(frozen=True, slots=True)
class Owner:
    host: str  # the host id (--host-id): pids are compared only between equal host ids
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


def this_process(host_id: str | None = None) -> Owner:
    return Owner(host_id or default_host_id(), os.getpid(), _start_ticks(os.getpid()) or 0)


def _pid_alive(owner: Owner) -> bool:
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


def describe(owner_text: str | None) -> str:
    owner = Owner.decode(owner_text) if owner_text else None
    return owner.describe() if owner else "an unknown process"


class Leases:
    """This process's side of the lease rules: who we are, how long a lease lasts, the
    store's clock, and what another holder's lease says about a record.

    Every `at` below is a wall-clock reading of this host (`domain.records.now()`); it is
    moved onto the store's clock before it is written or compared."""

    def __init__(self, ttl: float, owner: Owner | None = None) -> None:
        self.ttl = ttl
        self._owner = owner or this_process()
        self.owner = self._owner.encode()
        self.offset = 0.0  # the store's clock minus this host's

    @property
    def host(self) -> str:
        return self._owner.host

    async def sync(self, store: SessionStore) -> float:
        """Measure the store's clock against this host's (the midpoint of the round trip);
        returns the new offset. A failure keeps the last one and is the caller's to log."""
        before = host_clock(time.time())
        theirs = await store.clock()
        after = host_clock(time.time())
        offset = theirs - (before + after) / 2
        if abs(offset - self.offset) > max(self.ttl / 10, 1.0):
            log.info("lease clock: the store's clock is %+.3f s from this host's", offset)
        self.offset = offset
        return offset

    def store_time(self, at: float) -> float:
        return host_clock(at) + self.offset

    def expiry(self, at: float) -> float:
        return self.store_time(at) + self.ttl

    def alive(self, owner_text: str | None) -> bool:
        """False only when we know the holder is gone; a holder on another host counts as
        alive (its lease expiry decides)."""
        if owner_text is None:
            return False
        owner = Owner.decode(owner_text)
        if owner is None:
            return False
        return owner.host != self._owner.host or _pid_alive(owner)

    def gone(self, owner_text: str | None, expires: float | None, at: float) -> bool:
        """May another process take this lease over?"""
        if owner_text is None:
            return True
        if expires is not None and expires < self.store_time(at):
            return True
        return not self.alive(owner_text)

    def holder(self, record: SessionRecord, at: float) -> str | None:
        """Another live sidecar that runs this session right now, if one does."""
        if record.status not in LIVE_STATES or record.lease_owner in (None, self.owner):
            return None
        if self.gone(record.lease_owner, record.lease_expires, at):
            return None
        return describe(record.lease_owner)

    def orphaned(self, record: SessionRecord, at: float) -> bool:
        """Live-looking, but its holder is gone (the caller knows it is not ours)."""
        return self.gone(record.lease_owner, record.lease_expires, at)
