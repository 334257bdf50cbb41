"""`python -m sidecar`: the headless sidecar (ACP JSON-RPC on stdio)."""

from sidecar.app import exit_now, main
from sidecar.config import parse_args

exit_now(main(parse_args()))
