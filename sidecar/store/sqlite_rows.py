"""A `sessions` row and a `SessionRecord`, both ways, and the one place sqlite3 errors
become StoreError: what the SQLite store (sqlite.py) reads and writes, apart from how."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from protocol.values import Approval, Backend, Mode, Sandbox, Status
from sidecar.domain.errors import StoreError
from sidecar.domain.records import SessionRecord

# Record fields in column order; the column for `session_id` is `id`.
FIELDS: Final = (
    "session_id", "cwd", "title", "mode", "backend", "status", "generation",
    "created_at", "updated_at", "model", "last_error", "interrupted", "message_count",
    "forked_from", "context_from", "summary_index", "lease_owner", "lease_expires",
    "usage_input", "usage_output", "approval", "sandbox", "rules", "mcp_servers", "turns",
    "archived", "imported_from", "version", "agent", "agent_session", "worktree",
    "queue",
)  # fmt: skip
INSERT_COLUMNS: Final = ", ".join(FIELDS).replace("session_id", "id")
COLUMNS: Final = "seq, " + INSERT_COLUMNS
SELECT_BY_ID: Final = f"SELECT {COLUMNS} FROM sessions WHERE id = ?"


class _Members(dict[str, Any]):
    """Stored string -> enum member, a dict lookup on the read path; an unknown string
    still raises what the Enum constructor raises."""

    def __init__(self, enum: type[StrEnum]) -> None:
        super().__init__((member.value, member) for member in enum)
        self._enum = enum

    def __missing__(self, key: str) -> Any:
        return self._enum(key)


_STATUS: Final = _Members(Status)
_MODE: Final = _Members(Mode)
_BACKEND: Final = _Members(Backend)
_APPROVAL: Final = _Members(Approval)
_SANDBOX: Final = _Members(Sandbox)
if FIELDS != tuple(field.name for field in dataclasses.fields(SessionRecord)):
    raise RuntimeError("sqlite store: FIELDS must list SessionRecord's fields in order")


def record_of(row: tuple[Any, ...]) -> tuple[int, SessionRecord]:
    """A `sessions` row (selected as COLUMNS) as (seq, record). Positional, in field
    order (checked above): this runs on every read, `get` and each listed session."""
    (
        seq, session_id, cwd, title, mode, backend, status, generation, created_at,
        updated_at, model, last_error, interrupted, message_count, forked_from,
        context_from, summary_index, lease_owner, lease_expires, usage_input, usage_output,
        approval, sandbox, rules, mcp_servers, turns, archived, imported_from, version,
        agent, agent_session, worktree, queue,
    ) = row  # fmt: skip
    return seq, SessionRecord(
        session_id, cwd, title, _MODE[mode], _BACKEND[backend], _STATUS[status], generation,
        created_at, updated_at, model, last_error, bool(interrupted), message_count,
        forked_from, context_from, summary_index, lease_owner, lease_expires, usage_input,
        usage_output, _APPROVAL[approval], None if sandbox is None else _SANDBOX[sandbox],
        rules, mcp_servers, turns, bool(archived), imported_from, version, agent,
        agent_session, worktree, queue,
    )  # fmt: skip


def column_value(value: Any) -> Any:
    if isinstance(value, Status | Mode | Backend | Approval | Sandbox):
        return value.value
    if isinstance(value, bool):
        return int(value)
    return value


def _read_only_hint(path: Path) -> str:
    """SQLite says "unable to open database file" or "readonly database"; say why."""
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return ""
    return " (the file system holding it is mounted read-only)" if read_only else ""


class Boundary:
    """`SqliteSessionStore._boundary`'s context: a class, not a generator, because every
    store call, `get` on the status path included, passes through one."""

    __slots__ = ("_action", "_path")

    def __init__(self, path: Path, action: str) -> None:
        self._path = path
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, sqlite3.Error):
            hint = _read_only_hint(self._path)
            raise StoreError(
                f"cannot {self._action} session store {self._path}: {exc}{hint}"
            ) from exc
