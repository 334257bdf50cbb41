"""A hand-written MCP server that first prints two lines that are not JSON-RPC and quote
its env var `LEAKY_SECRET`, then speaks MCP (2025-06-18, one tool).

The MCP SDK logs each such line with pydantic's parse error, which quotes the input
(`input_value='...'`; a line of 50 characters or more cut to its first 24 and last 23):
the leak the sidecar's log redaction must stop. The second line is long, so the cut falls
inside the secret and only pieces of it are quoted.
"""

import json
import os
import sys

secret = os.environ["LEAKY_SECRET"]
print(f"oops {secret}", flush=True)  # short: quoted whole
print("x" * 10 + secret + "y" * 10, flush=True)  # long: cut inside the secret


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
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "leaky", "version": "1"},
            },
        )
    elif method == "tools/list":
        tool = {"name": "hello", "inputSchema": {"type": "object"}}
        reply(message["id"], {"tools": [tool]})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
