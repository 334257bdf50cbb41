"""A hand-written (non-SDK) MCP server speaking 2025-06-18, with some invalid tool schemas.

Servers not built on an SDK are where malformed tool definitions come from; the client must
keep the good tools and skip the bad ones.
"""

import json
import sys

TOOLS = [
    {"name": "good", "description": "fine", "inputSchema": {"type": "object"}},
    {"name": "announce", "description": "adds a tool", "inputSchema": {"type": "object"}},
    {"name": "array_schema", "inputSchema": {"type": "array"}},
    {"name": "bad_properties", "inputSchema": {"type": "object", "properties": 5}},
    {"name": "bad_property", "inputSchema": {"type": "object", "properties": {"a": 3}}},
    {"name": "no_schema"},
    {"name": "weird name/with spaces", "inputSchema": {"type": "object"}},
]


def reply(message_id: object, result: object) -> None:
    print(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}), flush=True)


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        reply(
            message["id"],
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    elif method == "tools/list":
        reply(message["id"], {"tools": TOOLS})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "announce":
            TOOLS.append({"name": "announced", "inputSchema": {"type": "object"}})
            notice = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            print(json.dumps(notice), flush=True)
        reply(message["id"], {"content": [{"type": "text", "text": f"called {name}"}]})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
