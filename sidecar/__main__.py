"""`python -m sidecar`: the headless sidecar (ACP JSON-RPC on stdio)."""

from sidecar.app import main
from sidecar.config import parse_args

raise SystemExit(main(parse_args()))
