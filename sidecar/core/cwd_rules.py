"""Which working directories a session's commands can run in, checked where a cwd or a
sandbox setting enters (session/new, fork, import, a mode or sandbox change), so a bad
one is refused there as invalid params naming the field, not found out by every
command later as an internal error.

A sandboxed command gets its own /proc, /dev and /sys (`sidecar/agent/sandbox.py: wrap`
refuses to bind a cwd under them), so a session there could run nothing. With the
sandbox off the command sees the host's and the directory is usable.
"""

from __future__ import annotations

import os
from typing import Final

from protocol.values import Mode, Sandbox
from sidecar.domain.errors import InvalidInput
from sidecar.domain.records import effective_sandbox

# The same tops as sidecar/agent/sandbox.py's _NO_CWD_UNDER.
NO_SANDBOXED_CWD_UNDER: Final = ("/proc", "/dev", "/sys")


def check_sandboxable(cwd: str, mode: Mode, sandbox: Sandbox | None, field: str = "cwd") -> None:
    """Raise InvalidInput(field) when commands under `mode` and `sandbox` cannot run in
    `cwd` (resolved: a symlink into /proc counts as /proc)."""
    effective = effective_sandbox(mode, sandbox)
    if effective is Sandbox.OFF:
        return
    real = os.path.realpath(cwd)
    for top in NO_SANDBOXED_CWD_UNDER:
        if real == top or real.startswith(top + "/"):
            where = cwd if real == cwd else f"{cwd} (which is {real})"
            raise InvalidInput(
                field,
                f"{where} is under {top}: a sandboxed command ({effective.value}) gets its "
                f"own {top} and could not run there; choose a project directory, or the "
                "sandbox off",
            )
