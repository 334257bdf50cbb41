"""`python -m sidecar`: the headless sidecar (ACP JSON-RPC on stdio).

`python -m sidecar migrate --from sqlite:PATH --to postgresql://...` copies a SQLite
store's sessions into PostgreSQL instead (`sidecar/migrate.py`).
"""

import sys

from sidecar import early_probe

if sys.argv[1:2] != ["migrate"]:
    early_probe.start()  # the sandbox self-test, meanwhile the light half is imported

from sidecar.app import exit_now, main  # noqa: E402
from sidecar.config import parse_args  # noqa: E402

if sys.argv[1:2] == ["migrate"]:
    from sidecar.migrate import run_cli

    raise SystemExit(run_cli(sys.argv[2:]))
exit_now(main(parse_args()))
