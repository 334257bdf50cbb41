"""MCP servers as a person types them into the window, and the list the app keeps.

A server is a name and either a command line (`npx -y some-server --flag`, split as a shell
would) or a URL (`https://…`, Streamable HTTP; `sse+https://…` for the older SSE transport).
The saved list lives in the user's config dir (not the sessions database): servers people
use again for new sessions. Env values and headers are not offered here: they may be
secrets, and the window does not keep secrets.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import platformdirs

APP = "acp-session-host"


class BadServer(ValueError):
    """What is wrong with a typed server, in words for the form."""


def to_acp(name: str, target: str) -> dict[str, Any]:
    """A form row as an ACP `mcpServers` entry (the sidecar validates it fully)."""
    name, target = name.strip(), target.strip()
    if not name:
        raise BadServer("an MCP server needs a name")
    if not target:
        raise BadServer(f"MCP server {name!r} needs a command or a URL")
    if target.startswith("sse+http"):
        return {"type": "sse", "name": name, "url": target.removeprefix("sse+"), "headers": []}
    if target.startswith(("http://", "https://")):
        return {"type": "http", "name": name, "url": target, "headers": []}
    try:
        words = shlex.split(target)
    except ValueError as exc:
        raise BadServer(f"MCP server {name!r}: cannot read the command line ({exc})") from None
    return {"name": name, "command": words[0], "args": words[1:], "env": []}


def saved_path() -> Path:
    return Path(platformdirs.user_config_dir(APP)) / "mcp-servers.json"


def load_saved(path: Path | None = None) -> list[dict[str, str]]:
    """The saved servers as `{name, target}` rows (an unreadable file counts as none)."""
    try:
        data = json.loads((path or saved_path()).read_text())
    except (OSError, ValueError):
        return []
    rows = [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
    return [
        {"name": str(r.get("name", "")), "target": str(r.get("target", ""))}
        for r in rows
        if r.get("name") and r.get("target")
    ]


def save(name: str, target: str, path: Path | None = None) -> list[dict[str, str]]:
    """Add (or replace, by name) a saved server; the file is private (0600)."""
    to_acp(name, target)  # refuse what could never work
    path = path or saved_path()
    rows = [r for r in load_saved(path) if r["name"] != name.strip()]
    rows.append({"name": name.strip(), "target": target.strip()})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        json.dump(rows, out, indent=2)
    os.replace(tmp, path)
    return rows
