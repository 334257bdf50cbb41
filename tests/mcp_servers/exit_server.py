"""A server that dies at start, explaining why on stderr (optionally quoting an env var)."""

import os
import sys

sys.stderr.write("starting up\n")
if len(sys.argv) > 1:
    name = sys.argv[1]
    sys.stderr.write(f"fatal: {name}={os.environ.get(name, '')} was rejected by the backend\n")
else:
    sys.stderr.write("fatal: missing configuration file\n")
sys.exit(3)
