"""Reaching a PostgreSQL server: the URL, what may be said about it, and its errors.

The password may come from the URL, `PGPASSWORD` or `~/.pgpass` (libpq reads the
last two itself). It is never said: every message names the server as
`host:port/dbname`, and any text that reaches a log or a client passes `redact` first,
so even a libpq message that quotes a piece of a malformed URL cannot carry it.

Timeouts, from one setting (`--db-timeout`, T seconds): a request waits at most T for
a pooled connection, T for a row lock (`lock_timeout`), 2T for a statement
(`statement_timeout`), and 3T in all before it is cut off on our side (a server that
stopped answering). A transaction left idle for 2T (a sidecar frozen mid-write) is
ended by the server, so it cannot hold its row locks forever.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import psycopg
from psycopg import errors
from psycopg.conninfo import conninfo_to_dict

from sidecar.domain.errors import StoreError

SCHEMES: Final = ("postgresql://", "postgres://")
_MASK: Final = "***"


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Database:
    """A validated libpq URL and what may be shown of it."""

    url: str = field(repr=False)
    server: str  # host:port/dbname: the name in every message
    timeout: float  # seconds (see the module docstring)
    secrets: tuple[str, ...] = field(repr=False, default=())

    @classmethod
    def parse(cls, url: str, timeout: float = 10.0) -> Database:
        """Raises StoreError naming what is wrong (never the password)."""
        secrets = _secrets_of(url)
        shown = _redact(url, secrets)
        if not url.startswith(SCHEMES):
            raise StoreError(
                f"invalid database URL {shown!r}: expected postgresql://[user[:password]@]"
                "host[:port]/dbname"
            )
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(
                f"invalid database URL {shown!r}: {_redact(_one_line(str(exc)), secrets)}"
            ) from None
        if params.get("password"):
            secrets = tuple({*secrets, str(params["password"])})
        host = str(params.get("host") or os.environ.get("PGHOST") or "localhost")
        port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
        dbname = str(
            params.get("dbname") or os.environ.get("PGDATABASE") or params.get("user") or ""
        )
        return cls(url, f"{host}:{port}/{dbname}", timeout, secrets)

    def redact(self, text: str) -> str:
        return _redact(text, self.secrets)

    def connect_kwargs(self, application_name: str) -> dict[str, Any]:
        """Connection parameters for every connection the store opens: autocommit (a
        transaction is always explicit), the timeouts, and TCP keepalives so a dead
        peer is noticed by an idle connection too."""
        lock_ms = max(int(self.timeout * 1000), 1)
        options = (
            f"-c lock_timeout={lock_ms} -c statement_timeout={2 * lock_ms}"
            f" -c idle_in_transaction_session_timeout={2 * lock_ms}"
        )
        return {
            "autocommit": True,
            "application_name": application_name,
            "connect_timeout": max(int(self.timeout), 2),
            "options": options,
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 3 * lock_ms,
        }

    def error(self, action: str, exc: BaseException) -> StoreError:
        """A psycopg error (or our own timeout) as the StoreError a client gets."""
        return StoreError(f"cannot {action} session store {self.server}: {self.cause(exc)}")

    def cause(self, exc: BaseException) -> str:
        t = self.timeout
        if isinstance(exc, errors.LockNotAvailable):
            return f"a row it needs is locked by another connection (waited {t:g} s, lock_timeout)"
        if isinstance(exc, errors.QueryCanceled):
            return f"the statement took longer than {2 * t:g} s (statement_timeout)"
        if isinstance(exc, errors.IdleInTransactionSessionTimeout):
            return "the server ended a transaction left idle too long"
        if isinstance(exc, TimeoutError):
            return f"no answer from the server within {3 * t:g} s"
        text = self.redact(_one_line(str(exc))) or type(exc).__name__
        if isinstance(exc, psycopg.OperationalError):
            return f"connection failed: {text}"
        return text


def _secrets_of(url: str) -> tuple[str, ...]:
    """The password in the URL (raw and decoded) and in PGPASSWORD, whatever parses."""
    found: set[str] = set()
    if env := os.environ.get("PGPASSWORD"):
        found.add(env)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        netloc = url
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else ""
    if ":" in userinfo:
        raw = userinfo.split(":", 1)[1]
        found |= {raw, unquote(raw)}
    for match in re.finditer(r"(?:[?&]|\s|^)password=([^&\s]*)", url):
        found |= {match.group(1), unquote(match.group(1))}
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, _MASK)
    return text
