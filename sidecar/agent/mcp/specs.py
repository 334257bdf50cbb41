"""MCP server definitions as the agent sees them, parsed from ACP's `mcpServers` wire shape.

ACP clients send servers in three shapes (stdio has no `type`; `"stdio"` is accepted too):

    {"name", "command", "args": [str], "env": [{"name", "value"}]}
    {"type": "http", "name", "url", "headers": [{"name", "value"}]}
    {"type": "sse",  "name", "url", "headers": [{"name", "value"}]}

Parsing happens once, at the protocol edge, so the hub only ever sees validated, immutable
specs; a bad entry is reported with the path of the offending field (`mcpServers.1.command`)
so the client can show the user exactly what to fix. Error reasons never quote env or header
values: those are where secrets live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal
from urllib.parse import urlsplit

Transport = Literal["stdio", "http", "sse"]

SERVER_NAME_PATTERN: re.Pattern[str] = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
"""Server names become the prefix of public tool names (`<server>__<tool>`, at most 64
characters, `[A-Za-z0-9_-]`), so they must use that alphabet and leave room for the tool."""

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 token
_ENV_NAME_FORBIDDEN = ("=", "\0")


class InvalidServers(ValueError):
    """An `mcpServers` entry does not have the ACP shape; `field` is the path to fix."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server the agent spawns and talks to over its stdin/stdout."""

    transport: ClassVar[Transport] = "stdio"
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server reached over MCP Streamable HTTP."""

    transport: ClassVar[Transport] = "http"
    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SseServer:
    """A server reached over the legacy HTTP+SSE transport."""

    transport: ClassVar[Transport] = "sse"
    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()


McpServerSpec = StdioServer | HttpServer | SseServer


def secret_values(spec: McpServerSpec) -> tuple[str, ...]:
    """The strings that must never reach a status or a log: env and header values, URL
    credentials and query values. Used to scrub messages that quote server output."""
    values: list[str] = []
    if isinstance(spec, StdioServer):
        values.extend(value for _, value in spec.env)
    else:
        values.extend(value for _, value in spec.headers)
        parts = urlsplit(spec.url)
        if parts.password:
            values.append(parts.password)
        for pair in parts.query.split("&"):
            values.append(pair.partition("=")[2])
    return tuple(values)


def parse_servers(raw: list[object]) -> list[McpServerSpec]:
    """Validate ACP `mcpServers` and return domain specs; raise `InvalidServers` on the first
    bad field. Missing `args`/`env`/`headers` are read as empty (clients differ there)."""
    if not isinstance(raw, list):
        raise InvalidServers("mcpServers", "must be an array")
    specs: list[McpServerSpec] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(raw):
        path = f"mcpServers.{index}"
        spec = _parse_one(path, item)
        if spec.name in first_index:
            other = first_index[spec.name]
            raise InvalidServers(
                f"{path}.name", f"duplicate server name {spec.name!r} (also mcpServers.{other})"
            )
        first_index[spec.name] = index
        specs.append(spec)
    return specs


def _parse_one(path: str, item: object) -> McpServerSpec:
    if not isinstance(item, dict):
        raise InvalidServers(path, "must be an object")
    kind = item.get("type", "stdio")
    if kind not in ("stdio", "http", "sse"):
        raise InvalidServers(f"{path}.type", "must be 'http', 'sse', or absent for stdio")
    name = _parse_name(f"{path}.name", item.get("name"))
    if kind == "stdio":
        command = _string(f"{path}.command", item.get("command"))
        if not command.strip():
            raise InvalidServers(f"{path}.command", "must not be empty")
        args = tuple(
            _string(f"{path}.args.{i}", arg)
            for i, arg in enumerate(_array(f"{path}.args", item.get("args", [])))
        )
        env = _pairs(f"{path}.env", item.get("env", []), header=False)
        return StdioServer(name=name, command=command, args=args, env=env)
    url = _parse_url(f"{path}.url", item.get("url"))
    headers = _pairs(f"{path}.headers", item.get("headers", []), header=True)
    if kind == "http":
        return HttpServer(name=name, url=url, headers=headers)
    return SseServer(name=name, url=url, headers=headers)


def _parse_name(path: str, value: object) -> str:
    name = _string(path, value)
    if not name:
        raise InvalidServers(path, "must not be empty")
    if not SERVER_NAME_PATTERN.match(name):
        raise InvalidServers(
            path, "must be 1-32 characters of letters, digits, '_' or '-' (it prefixes tool names)"
        )
    return name


def _parse_url(path: str, value: object) -> str:
    url = _string(path, value)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise InvalidServers(path, "is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidServers(path, "must be an http:// or https:// URL")
    if not parts.hostname:
        raise InvalidServers(path, "must include a host")
    if any(ch.isspace() for ch in url):
        raise InvalidServers(path, "must not contain whitespace")
    return url


def _pairs(path: str, value: object, *, header: bool) -> tuple[tuple[str, str], ...]:
    """Parse `[{name, value}]`; values are checked but never quoted in errors."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(_array(path, value)):
        entry_path = f"{path}.{i}"
        if not isinstance(entry, dict):
            raise InvalidServers(entry_path, "must be an object with 'name' and 'value'")
        key = _string(f"{entry_path}.name", entry.get("name"))
        val = _string(f"{entry_path}.value", entry.get("value"))
        if not key:
            raise InvalidServers(f"{entry_path}.name", "must not be empty")
        if header and not _HEADER_NAME.match(key):
            raise InvalidServers(f"{entry_path}.name", "is not a valid HTTP header name")
        if not header and any(ch in key for ch in _ENV_NAME_FORBIDDEN):
            raise InvalidServers(f"{entry_path}.name", "must not contain '=' or NUL")
        forbidden = ("\r", "\n", "\0") if header else ("\0",)
        if any(ch in val for ch in forbidden):
            what = "CR, LF or NUL" if header else "NUL"
            raise InvalidServers(f"{entry_path}.value", f"must not contain {what} characters")
        folded = key.lower() if header else key
        if folded in seen:
            raise InvalidServers(f"{entry_path}.name", f"duplicate name {key!r}")
        seen.add(folded)
        pairs.append((key, val))
    return tuple(pairs)


def _string(path: str, value: object) -> str:
    if value is None:
        raise InvalidServers(path, "is required")
    if not isinstance(value, str):
        raise InvalidServers(path, f"must be a string, not {_json_type(value)}")
    if "\0" in value:
        raise InvalidServers(path, "must not contain NUL characters")
    return value


def _array(path: str, value: object) -> list[object]:
    if not isinstance(value, list):
        raise InvalidServers(path, f"must be an array, not {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
