"""`python -m sidecar`: the headless sidecar (ACP JSON-RPC on stdio).

`python -m sidecar migrate --from sqlite:PATH --to postgresql://...` copies a SQLite
store's sessions into PostgreSQL instead (`sidecar/migrate.py`).
"""

import sys

from sidecar.app import exit_now, main
from sidecar.config import parse_args

if sys.argv[1:2] == ["migrate"]:
    from sidecar.migrate import run_cli

    raise SystemExit(run_cli(sys.argv[2:]))
exit_now(main(parse_args()))
