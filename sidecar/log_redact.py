"""Secrets never in a log line, including a library's own.

Our code keeps secrets out of what it writes, but libraries quote what they were given:
the MCP SDK logs a server's malformed stdout line inside pydantic's parse error
(`input_value='…'`), and a server echoes its env there. So every record is masked at
the last moment, where it is written: a `logging.Filter` on each of the root logger's
handlers (every library's records propagate there) replaces each value the registry
(`sidecar/domain/redaction.py: SECRETS`) knows with `[redacted]`, in the formatted
message (msg with its args), the exception's traceback text and the stack text.

What is registered, and where: the provider API keys and any password in `--base-url`,
the PostgreSQL password (`--database-url`, `PGPASSWORD`) here at start-up; MCP server env
and header values when a runtime is made (`core/mcp_tools.py`); each runtime's HTTP
bearer token while it lives (`core/runtime.py`). Values shorter than six characters are
not masked (see `redaction.py`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import unquote, urlsplit

from sidecar.domain.redaction import SECRETS, SecretRegistry

# The environment variables whose values are secrets wherever they appear.
SECRET_ENV: Final = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PGPASSWORD")
_PASSWORD_PARAM: Final = re.compile(r"(?:[?&]|\s|^)password=([^&\s]*)")
_TRACEBACKS: Final = logging.Formatter()


class RedactingFilter(logging.Filter):
    """Masks the registry's secrets in a record before any handler formats it."""

    def __init__(self, registry: SecretRegistry) -> None:
        super().__init__("")
        self._registry = registry

    def filter(self, record: logging.LogRecord) -> bool:
        if not len(self._registry):
            return True
        redact = self._registry.redact
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - arguments that do not format: logging would
            # print them raw to stderr (Handler.handleError); drop them instead.
            message = f"{record.msg!s} [arguments that could not be formatted left out]"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install(registry: SecretRegistry = SECRETS) -> None:
    """Put the filter on every handler of the root logger (once each); call it right
    after logging is configured."""
    for handler in logging.getLogger().handlers:
        for existing in handler.filters:
            if isinstance(existing, RedactingFilter):
                break
        else:
            handler.addFilter(RedactingFilter(registry))


def url_passwords(url: str | None) -> list[str]:
    """The password of a URL (`scheme://user:pw@host`, raw and decoded) or of libpq's
    `password=` parameter, whatever parses."""
    if not url:
        return []
    found: list[str] = []
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        found += [password, unquote(password)]
    for match in _PASSWORD_PARAM.finditer(url):
        found += [match.group(1), unquote(match.group(1))]
    return found


def configured_secrets(urls: Iterable[str | None], environ: Mapping[str, str]) -> list[str]:
    """The start-up secrets: the keys in the environment and the passwords in the URLs."""
    values = [environ.get(name, "") for name in SECRET_ENV]
    for url in urls:
        values += url_passwords(url)
    return [value for value in values if value]


def register_configured(
    database_url: str | None, base_url: str | None, registry: SecretRegistry = SECRETS
) -> None:
    """Register what the configuration holds (`python -m sidecar` calls it at start)."""
    env_urls = (os.environ.get("SIDECAR_DATABASE_URL"), os.environ.get("OPENAI_BASE_URL"))
    urls = (database_url, base_url, *env_urls, os.environ.get("ANTHROPIC_BASE_URL"))
    registry.add(*configured_secrets(urls, os.environ))
