"""A server that writes non-JSON to stdout and never speaks MCP; exits when stdin closes."""

import sys

print("Welcome to the junk server, this is not JSON", flush=True)
for _line in sys.stdin:
    print("still not json", flush=True)
