"""Benchmarks for the sidecar and the desktop app: `python -m bench --help`.

Every scenario measures the sidecar side by side with a floor (the least any process
could do over the same kind of pipe, socket or window) and, where one exists, a peer,
in the same run: the machine is shared and noisy, so only ratios measured together
and medians with spreads are reported, never absolute times compared between runs.
See bench/README.md.
"""
