"""`python -m sidecar migrate --from sqlite:PATH --to postgresql://...`: move sessions up.

Copies every session of a SQLite store into a PostgreSQL one: the record as stored
(settings, rules, MCP server definitions, usage, compaction and rewind pointers,
generation) and its whole transcript, one transaction per session, then reads it back
to verify the counts. Idempotent and resumable: a session already there with the same
counts is skipped, so a run cut off anywhere is simply run again. A session already
there with other counts (used on PostgreSQL since, say) is left alone and reported.

A session that is live in a running sidecar (its lease holder alive) is not copied:
its next writes would go to SQLite. Close it (or stop that sidecar) and run again. One
left live by a sidecar that is gone is copied closed, as start-up reconciliation would
have left it (interrupted, with the marker, if a turn was running).

Files: each session's checkpoints (a shadow git repository) and spooled command output
live in the data dir, not in the database. They stay where they are: a sidecar on this
host started with `--data-dir` set to the SQLite store's directory finds them.
`--copy-files-to DIR` also copies them into another data dir (missing ones only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from sidecar.core.leases import Leases
from sidecar.domain import changes as change
from sidecar.domain.errors import SessionNotFound, StoreError
from sidecar.domain.records import LIVE_STATES, SessionRecord, now
from sidecar.store.base import INTERRUPTED_MARKER, ListCursor
from sidecar.store.postgres import PostgresSessionStore
from sidecar.store.sqlite import SqliteSessionStore

PAGE: Final = 1000
# Per-session directories of the data dir (checkpoints; spooled command output).
SESSION_DIRS: Final = ("checkpoints", "output")
_LEASE_TTL: Final = 15.0  # only used to judge leases; nothing is taken


@dataclass
class Tally:
    copied: int = 0
    present: int = 0
    live: int = 0
    differing: int = 0
    failed: int = 0

    @property
    def complete(self) -> bool:
        return self.live == self.differing == self.failed == 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sidecar migrate",
        description="Copy every session of a SQLite store into a PostgreSQL store.",
    )
    parser.add_argument(
        "--from", dest="source", required=True, help="sqlite:PATH of the sessions.db to copy"
    )
    parser.add_argument(
        "--to",
        dest="target",
        default=os.environ.get("SIDECAR_DATABASE_URL"),
        help="the PostgreSQL libpq URL (env SIDECAR_DATABASE_URL; the password may also "
        "come from PGPASSWORD or ~/.pgpass)",
    )
    parser.add_argument(
        "--copy-files-to",
        type=Path,
        default=None,
        help="also copy each session's checkpoints and spooled output into this data dir",
    )
    parser.add_argument("--db-timeout", type=float, default=10.0)
    args = parser.parse_args(argv)
    if not args.source.startswith("sqlite:") or not args.source[len("sqlite:") :]:
        parser.error(f"--from must be sqlite:PATH, got {args.source!r}")
    if not args.target:
        parser.error("--to is required (or SIDECAR_DATABASE_URL)")
    return args


async def _bodies(source: SqliteSessionStore, record: SessionRecord) -> AsyncIterator[str]:
    """The transcript as stored JSON texts, read in pages (never all of it at once)."""
    for offset in range(0, record.message_count, PAGE):
        for row in await source.messages(record.session_id, offset, PAGE):
            yield json.dumps(row)


async def _with_marker(source: SqliteSessionStore, record: SessionRecord) -> AsyncIterator[str]:
    async for body in _bodies(source, record):
        yield body
    yield json.dumps(INTERRUPTED_MARKER)


async def _all_records(source: SqliteSessionStore) -> list[SessionRecord]:
    """Oldest first, so the target lists them in the same order."""
    records: list[SessionRecord] = []
    cursor: ListCursor | None = None
    while True:
        page, cursor = await source.list_page(cursor=cursor, limit=PAGE, archived=None)
        records += page
        if cursor is None:
            return records[::-1]


class Migration:
    def __init__(
        self,
        source: SqliteSessionStore,
        target: PostgresSessionStore,
        out: TextIO,
        files_to: Path | None,
    ) -> None:
        self.source = source
        self.target = target
        self.out = out
        self.files_from = source.path.parent
        self.files_to = files_to
        self.leases = Leases(_LEASE_TTL)
        self.tally = Tally()
        self.files_copied = 0
        self.files_present = 0

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    async def run(self) -> Tally:
        await self.leases.sync(self.source)
        records = await _all_records(self.source)
        self.say(
            f"{len(records)} session(s) in {self.source.path}; copying to {self.target.server}"
        )
        for number, record in enumerate(records, 1):
            prefix = f"[{number}/{len(records)}] {record.session_id}"
            try:
                self.say(f"{prefix}: {await self.one(record)}")
            except StoreError as exc:
                self.tally.failed += 1
                self.say(f"{prefix}: FAILED: {exc}")
            self.copy_files(record.session_id)
        return self.tally

    async def one(self, record: SessionRecord) -> str:
        bodies = _bodies(self.source, record)
        note = ""
        if record.status in LIVE_STATES:
            holder = self.leases.holder(record, now())
            if holder is not None:
                self.tally.live += 1
                return f"LIVE in {holder}: not copied; close it there and run migrate again"
            # Its sidecar is gone: copied as start-up reconciliation would leave it.
            original = record
            record, was_running = change.closed_orphan(record, now())
            if was_running:
                record = change.appended(record, record.updated_at)
                bodies = _with_marker(self.source, original)
            note = " (its sidecar is gone: copied closed"
            note += ", turn interrupted)" if was_running else ")"
        try:
            there = await self.target.get(record.session_id)
        except SessionNotFound:
            there = None
        if there is not None:
            stored = await self.target.count_messages(record.session_id)
            if there.message_count == record.message_count == stored:
                self.tally.present += 1
                return f"already there ({stored} messages), skipped"
            self.tally.differing += 1
            return (
                f"DIFFERS: {there.message_count} messages there, {record.message_count} here; "
                "left alone (it was used after an earlier copy?)"
            )
        if not await self.target.import_session(record, bodies):
            self.tally.present += 1  # another migrate run got there first
            return "already there (copied meanwhile), skipped"
        await self.verify(record)
        self.tally.copied += 1
        return f"copied {record.message_count} messages{note}"

    async def verify(self, record: SessionRecord) -> None:
        stored = await self.target.get(record.session_id)
        rows = await self.target.count_messages(record.session_id)
        if stored != record or rows != record.message_count:
            raise StoreError(
                f"verification failed: {rows} rows and record {stored} stored, "
                f"expected {record.message_count} rows and {record}"
            )

    def copy_files(self, session_id: str) -> None:
        for kind in SESSION_DIRS:
            found = self.files_from / kind / session_id
            if not found.is_dir():
                continue
            self.files_present += 1
            if self.files_to is None:
                continue
            dest = self.files_to / kind / session_id
            if dest.exists():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                shutil.copytree(found, dest, symlinks=True)
            except (OSError, shutil.Error) as exc:
                self.tally.failed += 1
                self.say(f"  {session_id}: cannot copy its {kind} to {dest}: {exc}")
                continue
            self.files_copied += 1

    def summary(self) -> None:
        t = self.tally
        self.say(
            f"done: {t.copied} copied, {t.present} already there, {t.live} live (not copied), "
            f"{t.differing} differing, {t.failed} failed"
        )
        dirs = " and ".join(f"{self.files_from / kind}" for kind in SESSION_DIRS)
        if self.files_to is None:
            self.say(
                f"files: {self.files_present} session folder(s) (checkpoints, spooled output) "
                f"stay in {dirs}; start the PostgreSQL sidecar on this host with --data-dir "
                f"{self.files_from} to keep them, or run again with --copy-files-to DIR"
            )
        else:
            self.say(
                f"files: {self.files_copied} session folder(s) copied to {self.files_to}, "
                f"{self.files_present - self.files_copied} already there or not copied"
            )
        if not t.complete:
            self.say("not complete: fix what is reported above and run migrate again")


async def migrate(path: Path, args: argparse.Namespace, out: TextIO) -> int:
    try:
        source = SqliteSessionStore(path)
    except StoreError as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 1
    try:
        target = await PostgresSessionStore.open(
            args.target, timeout=args.db_timeout, pool_size=2, role="migrate"
        )
    except StoreError as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        await source.close()
        return 1
    try:
        migration = Migration(source, target, out, args.copy_files_to)
        tally = await migration.run()
        migration.summary()
    finally:
        await target.close()
        await source.close()
    return 0 if tally.complete else 1


def run_cli(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse(argv)
    path = Path(args.source[len("sqlite:") :]).expanduser()
    if not path.is_file():  # SqliteSessionStore would create an empty one
        print(f"migrate: no SQLite session store at {path}", file=sys.stderr)
        return 1
    return asyncio.run(migrate(path, args, sys.stdout))
