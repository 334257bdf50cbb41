"""Placeholder until the desktop issue lands: says so instead of pretending."""

import sys


def main() -> int:
    print("the desktop window is not built yet; run `python -m sidecar`", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
