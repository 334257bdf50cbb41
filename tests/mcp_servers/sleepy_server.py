"""A hand-written (non-SDK) MCP server speaking 2025-06-18 that is ready at once.

SDK-built servers take seconds to import on a busy machine, too long for tests that run the
sidecar with a short `--mcp-start-timeout`. This one starts in milliseconds and offers:

- `sleep {seconds, marker}`: writes "started" to the marker file, answers after `seconds`
  ("finished"), or on `notifications/cancelled` for its request stops and writes "cancelled";
- `ping {}` (read-only): answers "pong";
- `stats {}`: structured content only (no text mirror), as some servers answer.

`--spawn-child` leaves a sleeping child process behind (it inherits the environment, so a
marker variable finds it), to check that nothing outlives the server's sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

TOOLS = [
    {
        "name": "sleep",
        "description": "Sleep, recording started/finished/cancelled in the marker file.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "marker": {"type": "string"}},
            "required": ["seconds", "marker"],
        },
    },
    {
        "name": "ping",
        "description": "Answer pong.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
    {"name": "stats", "description": "Structured content only.", "inputSchema": {"type": "object"}},
]

_write = threading.Lock()
_sleeping: dict[Any, tuple[threading.Timer, Path]] = {}


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def reply(message_id: Any, result: Any) -> None:
    send({"jsonrpc": "2.0", "id": message_id, "result": result})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def finish(message_id: Any) -> None:
    with _write:
        entry = _sleeping.pop(message_id, None)
    if entry is None:
        return
    entry[1].write_text("finished")
    reply(message_id, text("slept"))


def cancel(message_id: Any) -> None:
    with _write:
        entry = _sleeping.pop(message_id, None)
    if entry is not None:
        entry[0].cancel()
        entry[1].write_text("cancelled")


def call(message_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "ping":
        reply(message_id, text("pong"))
    elif name == "stats":
        reply(message_id, {"content": [], "structuredContent": {"sum": 5, "inputs": [2, 3]}})
    elif name == "sleep":
        marker = Path(str(arguments["marker"]))
        marker.write_text("started")
        timer = threading.Timer(float(arguments["seconds"]), finish, (message_id,))
        with _write:
            _sleeping[message_id] = (timer, marker)
        timer.start()
    else:
        reply(message_id, {**text(f"no tool {name!r}"), "isError": True})


def main() -> None:
    if "--spawn-child" in sys.argv[1:]:
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL
        )
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "notifications/cancelled":
            cancel((message.get("params") or {}).get("requestId"))
            continue
        if "id" not in message or method is None:
            continue
        if method == "initialize":
            reply(
                message["id"],
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "sleepy", "version": "1"},
                },
            )
        elif method == "tools/list":
            reply(message["id"], {"tools": TOOLS})
        elif method == "tools/call":
            call(message["id"], message.get("params") or {})
        elif method == "ping":
            reply(message["id"], {})
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": message["id"], "error": error})
    os._exit(0)  # stdin closed: stop at once, sleeping timers included


if __name__ == "__main__":
    main()
