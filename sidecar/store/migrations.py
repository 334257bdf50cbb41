"""Forward-only schema migrations for the SQLite session store.

`MIGRATIONS` is an ordered list of `(version, step)`; a step is SQL text or a
callable taking the connection. Each step runs in its own write transaction
together with the row that records it, so a crash leaves the database at the
previous version, never half-way. A database we did not create, or one written
by a newer sidecar, is refused before anything writes to it: guessing at
someone else's file is how data gets lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Final

from sidecar.domain.errors import StoreError
from sidecar.domain.records import now

Step = str | Callable[[sqlite3.Connection], None]
Migration = tuple[int, Step]

# The name marks a database as ours; a database with tables but without it is foreign.
VERSION_TABLE: Final = "sidecar_schema_version"

_CREATE_VERSION_TABLE: Final = f"""
CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
    version INTEGER PRIMARY KEY,
    applied_at REAL NOT NULL
)
"""

# seq orders sessions by insertion and is the paging cursor; AUTOINCREMENT keeps
# a deleted session's seq from ever naming another one. Messages are append-only
# rows clustered by (session_seq, idx), so a page is one range scan of the key.
_V1: Final = """
CREATE TABLE sessions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    cwd TEXT NOT NULL,
    title TEXT NOT NULL,
    mode TEXT NOT NULL,
    backend TEXT NOT NULL,
    model TEXT,
    status TEXT NOT NULL,
    generation INTEGER NOT NULL,
    last_error TEXT,
    interrupted INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX sessions_status ON sessions (status);
CREATE INDEX sessions_cwd_seq ON sessions (cwd, seq);
CREATE TABLE messages (
    session_seq INTEGER NOT NULL REFERENCES sessions (seq),
    idx INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_seq, idx)
) WITHOUT ROWID;
"""

# v2: fork ancestry, compaction pointers, and the lease of the process running a session.
_V2: Final = """
ALTER TABLE sessions ADD COLUMN forked_from TEXT;
ALTER TABLE sessions ADD COLUMN context_from INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN summary_index INTEGER;
ALTER TABLE sessions ADD COLUMN lease_owner TEXT;
ALTER TABLE sessions ADD COLUMN lease_expires REAL;
CREATE INDEX sessions_lease_owner ON sessions (lease_owner);
"""

# v3: usage totals, consent settings and rules, MCP server definitions, and turn numbers
# (counted per session, and written into the user rows already stored).
_V3: Final = """
ALTER TABLE sessions ADD COLUMN usage_input INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_output INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN approval TEXT NOT NULL DEFAULT 'ask';
ALTER TABLE sessions ADD COLUMN sandbox TEXT;
ALTER TABLE sessions ADD COLUMN rules TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sessions ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET body = json_set(body, '$.turn', numbered.n)
  FROM (SELECT session_seq, idx,
               row_number() OVER (PARTITION BY session_seq ORDER BY idx) AS n
          FROM messages
         WHERE json_valid(body) AND json_extract(body, '$.role') = 'user'
           AND json_extract(body, '$.kind') IS NULL) AS numbered
 WHERE messages.session_seq = numbered.session_seq AND messages.idx = numbered.idx;
UPDATE sessions SET turns = (
  SELECT count(*) FROM messages
   WHERE messages.session_seq = sessions.seq AND json_valid(body)
     AND json_extract(body, '$.role') = 'user' AND json_extract(body, '$.kind') IS NULL);
"""

# The text a transcript row gives the search index: its `content` when that is text
# (`store.search.row_text`). Rows are only ever inserted and deleted, and a contentless
# FTS5 table is told what it indexed when a row goes, so both triggers compute the same.
_ROW_TEXT: Final = (
    "CASE WHEN json_valid({b}) AND json_type({b}, '$.content') = 'text'"
    " THEN json_extract({b}, '$.content') ELSE '' END"
)
# A message's search rowid: its session's seq in the high bits, its index in the low 32.
_ROWID: Final = "{r}.session_seq * 4294967296 + {r}.idx"

# v4: archive flag, import origin, listing by last activity, and full-text search over
# titles and transcript text (FTS5, contentless, kept in step by triggers inside each
# writing transaction; existing rows indexed once, here).
_V4: Final = f"""
ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN imported_from TEXT;
CREATE INDEX sessions_activity ON sessions (archived, updated_at, seq);
CREATE VIRTUAL TABLE transcript_search USING fts5(
    text, content='', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE title_search USING fts5(
    title, content='', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER transcript_search_add AFTER INSERT ON messages
WHEN new.idx < 4294967296 BEGIN
    INSERT INTO transcript_search (rowid, text)
    VALUES ({_ROWID.format(r="new")}, {_ROW_TEXT.format(b="new.body")});
END;
CREATE TRIGGER transcript_search_remove AFTER DELETE ON messages
WHEN old.idx < 4294967296 BEGIN
    INSERT INTO transcript_search (transcript_search, rowid, text)
    VALUES ('delete', {_ROWID.format(r="old")}, {_ROW_TEXT.format(b="old.body")});
END;
CREATE TRIGGER transcript_search_change AFTER UPDATE OF body ON messages
WHEN old.idx < 4294967296 BEGIN
    INSERT INTO transcript_search (transcript_search, rowid, text)
    VALUES ('delete', {_ROWID.format(r="old")}, {_ROW_TEXT.format(b="old.body")});
    INSERT INTO transcript_search (rowid, text)
    VALUES ({_ROWID.format(r="new")}, {_ROW_TEXT.format(b="new.body")});
END;
CREATE TRIGGER title_search_add AFTER INSERT ON sessions BEGIN
    INSERT INTO title_search (rowid, title) VALUES (new.seq, new.title);
END;
CREATE TRIGGER title_search_change AFTER UPDATE OF title ON sessions BEGIN
    INSERT INTO title_search (title_search, rowid, title) VALUES ('delete', old.seq, old.title);
    INSERT INTO title_search (rowid, title) VALUES (new.seq, new.title);
END;
CREATE TRIGGER title_search_remove AFTER DELETE ON sessions BEGIN
    INSERT INTO title_search (title_search, rowid, title) VALUES ('delete', old.seq, old.title);
END;
INSERT INTO title_search (rowid, title) SELECT seq, title FROM sessions;
INSERT INTO transcript_search (rowid, text)
    SELECT {_ROWID.format(r="messages")}, {_ROW_TEXT.format(b="body")} FROM messages
    WHERE idx < 4294967296;
"""

# v5: transcript rows are indexed for search in batches, off the writing transaction.
# FTS5 writes a new index segment for every transaction that adds to it, which made the
# index ~40% of a turn's store time; now a row insert only queues its search rowid in
# `search_pending` (a b-tree insert), and `SqliteSessionStore` indexes the queue a batch per
# transaction, soon after the writes and always before a search reads the index. A row
# that goes (or changes) is taken out of the index only if it was indexed; a queued one
# only leaves the queue (a contentless table must never be told to delete what it lacks).
_INDEXED_OLD: Final = (
    "NOT EXISTS (SELECT 1 FROM search_pending WHERE id = " + _ROWID.format(r="old") + ")"
)
_V5: Final = f"""
CREATE TABLE search_pending (id INTEGER PRIMARY KEY);
DROP TRIGGER transcript_search_add;
DROP TRIGGER transcript_search_remove;
DROP TRIGGER transcript_search_change;
CREATE TRIGGER transcript_search_add AFTER INSERT ON messages
WHEN new.idx < 4294967296 BEGIN
    INSERT OR IGNORE INTO search_pending (id) VALUES ({_ROWID.format(r="new")});
END;
CREATE TRIGGER transcript_search_remove AFTER DELETE ON messages
WHEN old.idx < 4294967296 BEGIN
    INSERT INTO transcript_search (transcript_search, rowid, text)
    SELECT 'delete', {_ROWID.format(r="old")}, {_ROW_TEXT.format(b="old.body")}
    WHERE {_INDEXED_OLD};
    DELETE FROM search_pending WHERE id = {_ROWID.format(r="old")};
END;
CREATE TRIGGER transcript_search_change AFTER UPDATE OF body ON messages
WHEN old.idx < 4294967296 BEGIN
    INSERT INTO transcript_search (transcript_search, rowid, text)
    SELECT 'delete', {_ROWID.format(r="old")}, {_ROW_TEXT.format(b="old.body")}
    WHERE {_INDEXED_OLD};
    INSERT OR IGNORE INTO search_pending (id) VALUES ({_ROWID.format(r="new")});
END;
"""
# One batch of the queue into the index (the caller deletes the batch from the queue in
# the same transaction): the rows' text as the triggers above compute it.
INDEX_PENDING: Final = (
    "INSERT INTO transcript_search (rowid, text)"
    f" SELECT p.id, {_ROW_TEXT.format(b='m.body')} FROM search_pending AS p"
    " JOIN messages AS m ON m.session_seq = p.id >> 32 AND m.idx = p.id & 4294967295"
    " WHERE p.id <= ?"
)

# v6: each record's version (`SessionRecord.version`, bumped by every change the store
# makes). The sessions already stored start at 1, as a new one does: the number orders a
# session's summaries from now on; no summary of the old file carried one to compare with.
_V6: Final = "ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 1;"

# v7: the session's agent (`builtin`, our loop, for every session stored before) and the
# external agent's own session id (`agent/external`).
_V7: Final = """
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'builtin';
ALTER TABLE sessions ADD COLUMN agent_session TEXT;
"""

# v8: the session's own git worktree (JSON), when it was made in one.
_V8: Final = "ALTER TABLE sessions ADD COLUMN worktree TEXT;"

# v9: the messages waiting for their turn (JSON), when there are any.
_V9: Final = "ALTER TABLE sessions ADD COLUMN queue TEXT;"

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
    (7, _V7),
    (8, _V8),
    (9, _V9),
)


def latest(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return migrations[-1][0] if migrations else 0


def split_sql(script: str) -> list[str]:
    """Split a script into statements. `executescript` would commit the open
    transaction first, so each statement is executed on its own instead;
    `complete_statement` keeps `;` inside strings and trigger bodies intact."""
    statements: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \t\r\n;"):
        raise ValueError(f"incomplete SQL statement in migration: {pending.strip()!r}")
    return statements


def current_version(conn: sqlite3.Connection, where: str, known: int) -> int:
    """Read-only check of what `conn` holds: 0 for an empty database, else the
    applied version. Raises StoreError for a foreign or newer database."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
        )
    ]
    if VERSION_TABLE not in names:
        if names:
            raise StoreError(
                f"{where} is not a session store: it holds {', '.join(sorted(names))} "
                f"but no {VERSION_TABLE} table; refusing to touch it"
            )
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    version = int(row[0]) if row and row[0] is not None else 0
    if version > known:
        raise StoreError(
            f"{where} has schema version {version}, newer than this sidecar knows "
            f"({known}); upgrade the sidecar, the file was left untouched"
        )
    return version


def pending(
    conn: sqlite3.Connection, where: str, migrations: Sequence[Migration] = MIGRATIONS
) -> list[Migration]:
    """The migrations not yet applied. Only reads."""
    version = current_version(conn, where, latest(migrations))
    return [m for m in migrations if m[0] > version]


def migrate(
    conn: sqlite3.Connection,
    atomic: Callable[[], AbstractContextManager[object]],
    where: str,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> list[int]:
    """Apply pending migrations, each in one write transaction with its version
    row. The version is re-read under the write lock, so two processes opening
    the same new file do not both apply a step. Returns the versions applied."""
    versions = [version for version, _ in migrations]
    if versions != sorted(set(versions)) or (versions and versions[0] < 1):
        raise ValueError(f"migrations must have increasing versions >= 1, got {versions}")
    known = latest(migrations)
    applied: list[int] = []
    for version, step in pending(conn, where, migrations):
        with atomic():
            if current_version(conn, where, known) >= version:
                continue
            conn.execute(_CREATE_VERSION_TABLE)
            if isinstance(step, str):
                for statement in split_sql(step):
                    conn.execute(statement)
            else:
                step(conn)
            conn.execute(
                f"INSERT INTO {VERSION_TABLE} (version, applied_at) VALUES (?, ?)",
                (version, now()),
            )
        applied.append(version)
    return applied
