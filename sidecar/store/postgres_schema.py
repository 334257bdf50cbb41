"""The PostgreSQL store's schema and its forward-only migrations.

Everything lives in its own schema, `sidecar`, so the store can share a database with
other applications without touching their tables. `MIGRATIONS` is an ordered list of
`(version, SQL)`. All pending steps run in ONE transaction together with the rows that
record them (PostgreSQL's DDL is transactional): a crash leaves the previous version,
never half of one. The transaction first takes an advisory lock, so two sidecars
starting at once on an empty database apply each step once: the second waits, then
finds nothing left to do. A `sidecar` schema with tables but no version table, or one
written by a newer sidecar, is refused before anything writes to it.

Change notifications: a row trigger sends `pg_notify` on the `sidecar_sessions`
channel, in the writing transaction, for every insert, delete and update of a
session's row, except an update that only renews its lease (every few seconds for
every live session: news to nobody). The payload names the session, the database's
time of the change (`changed_at`, also stored, for catching up after a lost
connection), the writer's `application_name` (so a store can skip its own news) and,
since v3, the row's `version` after the change (`SessionRecord.version`; absent for a
deletion).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from psycopg import AsyncConnection

from sidecar.domain.errors import StoreError
from sidecar.domain.records import now

SCHEMA: Final = "sidecar"
VERSION_TABLE: Final = f"{SCHEMA}.schema_version"
CHANNEL: Final = "sidecar_sessions"
# pg_advisory_xact_lock key of schema changes ("sidecar" in ASCII, as a number).
_LOCK_KEY: Final = 0x73_69_64_65_63_61_72

Migration = tuple[int, str]

# Every column of a session row but `seq`, `lease_expires` and `changed_at`: an update
# naming any of these is news (see the trigger).
_NEWS_COLUMNS: Final = (
    "id, cwd, title, mode, backend, model, status, generation, last_error, interrupted,"
    " message_count, created_at, updated_at, forked_from, context_from, summary_index,"
    " lease_owner, usage_input, usage_output, approval, sandbox, rules, mcp_servers, turns"
)

# seq orders sessions by insertion and is the paging cursor (an identity never reused);
# messages are append-only rows keyed (session_seq, idx), so a page is one range scan.
_V1: Final = f"""
CREATE TABLE {SCHEMA}.sessions (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    cwd text NOT NULL,
    title text NOT NULL,
    mode text NOT NULL,
    backend text NOT NULL,
    model text,
    status text NOT NULL,
    generation bigint NOT NULL,
    last_error text,
    interrupted boolean NOT NULL DEFAULT false,
    message_count bigint NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    forked_from text,
    context_from bigint NOT NULL DEFAULT 0,
    summary_index bigint,
    lease_owner text,
    lease_expires double precision,
    usage_input bigint NOT NULL DEFAULT 0,
    usage_output bigint NOT NULL DEFAULT 0,
    approval text NOT NULL DEFAULT 'ask',
    sandbox text,
    rules text NOT NULL DEFAULT '[]',
    mcp_servers text NOT NULL DEFAULT '[]',
    turns bigint NOT NULL DEFAULT 0,
    changed_at double precision NOT NULL DEFAULT 0
);
CREATE INDEX sessions_cwd_seq ON {SCHEMA}.sessions (cwd, seq);
CREATE INDEX sessions_live ON {SCHEMA}.sessions (seq)
    WHERE status IN ('creating', 'idle', 'running', 'closing');
CREATE INDEX sessions_lease_owner ON {SCHEMA}.sessions (lease_owner)
    WHERE lease_owner IS NOT NULL;
CREATE INDEX sessions_changed_at ON {SCHEMA}.sessions (changed_at);
CREATE TABLE {SCHEMA}.messages (
    session_seq bigint NOT NULL REFERENCES {SCHEMA}.sessions (seq) ON DELETE CASCADE,
    idx bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (session_seq, idx)
);
CREATE FUNCTION {SCHEMA}.session_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_id text;
    changed_at double precision := extract(epoch FROM clock_timestamp());
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed_id := OLD.id;
    ELSE
        NEW.changed_at := changed_at;
        changed_id := NEW.id;
    END IF;
    PERFORM pg_notify('{CHANNEL}', json_build_object(
        'session', changed_id, 'at', changed_at,
        'origin', current_setting('application_name'))::text);
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER sessions_changed
    BEFORE INSERT OR DELETE OR UPDATE OF {_NEWS_COLUMNS} ON {SCHEMA}.sessions
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.session_changed();
"""

# v2: archive flag, import origin, listing by last activity, and full-text search over
# titles and transcript text. Words are letters and digits (anything else separates, as
# in SQLite's FTS5 unicode61), lower-cased by the `simple` configuration; a message
# gives its `content` when that is text (cut at 256 KiB: a tsvector has a size limit),
# and a body that is not JSON gives nothing rather than failing the write. The message
# column is generated, so every write path (append, fork, migrate's COPY, the column's
# creation here for the rows already stored) fills it in the writing transaction.
_V2: Final = f"""
ALTER TABLE {SCHEMA}.sessions ADD COLUMN archived boolean NOT NULL DEFAULT false;
ALTER TABLE {SCHEMA}.sessions ADD COLUMN imported_from text;
CREATE INDEX sessions_activity ON {SCHEMA}.sessions (archived, updated_at, seq);
CREATE FUNCTION {SCHEMA}.search_words(words text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_tsvector('simple'::regconfig,
                       regexp_replace(left(words, 262144), '[^[:alnum:]]+', ' ', 'g'));
CREATE FUNCTION {SCHEMA}.message_words(body text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    parsed jsonb;
BEGIN
    BEGIN
        parsed := body::jsonb;
    EXCEPTION WHEN others THEN
        RETURN ''::tsvector;
    END;
    IF jsonb_typeof(parsed -> 'content') IS DISTINCT FROM 'string' THEN
        RETURN ''::tsvector;
    END IF;
    RETURN {SCHEMA}.search_words(parsed ->> 'content');
END
$$;
ALTER TABLE {SCHEMA}.messages ADD COLUMN words tsvector
    GENERATED ALWAYS AS ({SCHEMA}.message_words(body)) STORED;
CREATE INDEX messages_words ON {SCHEMA}.messages USING gin (words);
CREATE INDEX sessions_title_words ON {SCHEMA}.sessions USING gin ({SCHEMA}.search_words(title));
DROP TRIGGER sessions_changed ON {SCHEMA}.sessions;
CREATE TRIGGER sessions_changed
    BEFORE INSERT OR DELETE OR UPDATE OF {_NEWS_COLUMNS}, archived, imported_from
    ON {SCHEMA}.sessions
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.session_changed();
"""

# v3: each record's version (`SessionRecord.version`, bumped by every change the store
# makes), carried by the notification too. The sessions already stored start at 1, as a
# new one does (the SQLite store's v6 says the same).
_V3: Final = f"""
ALTER TABLE {SCHEMA}.sessions ADD COLUMN version bigint NOT NULL DEFAULT 1;
CREATE OR REPLACE FUNCTION {SCHEMA}.session_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_id text;
    changed_version bigint;
    changed_at double precision := extract(epoch FROM clock_timestamp());
BEGIN
    IF TG_OP = 'DELETE' THEN
        changed_id := OLD.id;
    ELSE
        NEW.changed_at := changed_at;
        changed_id := NEW.id;
        changed_version := NEW.version;
    END IF;
    PERFORM pg_notify('{CHANNEL}', json_build_object(
        'session', changed_id, 'at', changed_at,
        'origin', current_setting('application_name'), 'version', changed_version)::text);
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER sessions_changed ON {SCHEMA}.sessions;
CREATE TRIGGER sessions_changed
    BEFORE INSERT OR DELETE OR UPDATE OF {_NEWS_COLUMNS}, archived, imported_from, version
    ON {SCHEMA}.sessions
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.session_changed();
"""

# v4: the session's agent and the external agent's own session id (the SQLite store's
# v7 says the same).
_V4: Final = f"""
ALTER TABLE {SCHEMA}.sessions ADD COLUMN agent text NOT NULL DEFAULT 'builtin';
ALTER TABLE {SCHEMA}.sessions ADD COLUMN agent_session text;
"""

# v5: the session's own git worktree (JSON), as the SQLite store's v8.
_V5: Final = f"ALTER TABLE {SCHEMA}.sessions ADD COLUMN worktree text;"

# v6: the messages waiting for their turn (JSON), as the SQLite store's v9.
_V6: Final = f"ALTER TABLE {SCHEMA}.sessions ADD COLUMN queue text;"

MIGRATIONS: Final[tuple[Migration, ...]] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
)


def latest(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    return migrations[-1][0] if migrations else 0


async def current_version(conn: AsyncConnection[Any], where: str, known: int) -> int:
    """0 for a database without our schema, else the applied version. Raises StoreError
    for a foreign `sidecar` schema or a newer one. Only reads."""
    cur = await conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
        (SCHEMA,),
    )
    names = sorted(str(name) for (name,) in await cur.fetchall())
    if "schema_version" not in names:
        if names:
            raise StoreError(
                f"{where} is not a session store: its schema {SCHEMA!r} holds "
                f"{', '.join(names)} but no schema_version table; refusing to touch it"
            )
        return 0
    cur = await conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}")
    row = await cur.fetchone()
    version = int(row[0]) if row and row[0] is not None else 0
    if version > known:
        raise StoreError(
            f"{where} has schema version {version}, newer than this sidecar knows "
            f"({known}); upgrade the sidecar, the database was left untouched"
        )
    return version


async def migrate(
    conn: AsyncConnection[Any], where: str, migrations: Sequence[Migration] = MIGRATIONS
) -> list[int]:
    """Apply the pending migrations in one transaction under the advisory lock; returns
    the versions applied (none when another sidecar got there first). `conn` must be in
    autocommit mode (the transaction here is the only one)."""
    versions = [version for version, _ in migrations]
    if versions != sorted(set(versions)) or (versions and versions[0] < 1):
        raise ValueError(f"migrations must have increasing versions >= 1, got {versions}")
    known = latest(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        version = await current_version(conn, where, known)
        pending = [(v, step) for v, step in migrations if v > version]
        if not pending:
            return []
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE}"
            " (version integer PRIMARY KEY, applied_at double precision NOT NULL)"
        )
        for step_version, step in pending:
            await conn.execute(step)  # no parameters: one multi-statement script
            await conn.execute(
                f"INSERT INTO {VERSION_TABLE} (version, applied_at) VALUES (%s, %s)",
                (step_version, now()),
            )
    return [v for v, _ in pending]
