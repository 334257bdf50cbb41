"""Running `git` on a shadow repository: its own GIT_DIR, the session cwd as work tree.

The environment is built from scratch so nothing of the user's git setup applies: no
global or system config (no hooks, filters, fsmonitor or credential helpers of theirs),
no `GIT_*` variable inherited from whoever started the sidecar, literal pathspecs. The
user's repository in the cwd, if there is one, is never read or written: git is only
ever pointed at our GIT_DIR.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sidecar.domain.errors import CheckpointError

# Config every call carries: nothing here may depend on a file we do not own.
_SETTINGS: Final = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.quotePath=false",
    "core.untrackedCache=true",
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.longpaths=true",
    "gc.auto=0",
    "diff.renames=false",
    "safe.directory=*",
    "advice.addEmbeddedRepo=false",
    "user.name=acp-session-host",
    "user.email=checkpoints@localhost",
)


def git_binary() -> str | None:
    return shutil.which("git")


def environment(git_dir: Path, work_tree: str | None) -> dict[str, str]:
    """None as work tree: for `git init`, which takes the directory as its argument."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(git_dir),  # nothing of the user's ~/.gitconfig
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
    }
    if work_tree is not None:
        env["GIT_DIR"] = str(git_dir)
        env["GIT_WORK_TREE"] = work_tree
    return env


async def run_git(
    git: str,
    git_dir: Path,
    work_tree: str | None,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    ok_codes: tuple[int, ...] = (0,),
) -> bytes:
    """git's stdout; CheckpointError with git's own words when it fails. Run from the work
    tree (a cwd that is gone or unreadable fails here, with a clear reason); with no work
    tree, from the repository's parent directory."""
    where = work_tree if work_tree is not None else str(git_dir.parent)
    argv = [git]
    for setting in _SETTINGS:
        argv += ["-c", setting]
    argv += list(args)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=where,
            env=environment(git_dir, work_tree),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        missing = exc.filename or git
        raise CheckpointError(f"cannot run git in {where}: {missing} does not exist") from None
    except PermissionError:
        raise CheckpointError(f"cannot run git in {where}: permission denied") from None
    try:
        out, err = await process.communicate(stdin)
    except asyncio.CancelledError:
        # Never leave a git process writing to the shadow repository behind us.
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    if process.returncode not in ok_codes:
        detail = err.decode(errors="replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit status {process.returncode}"
        raise CheckpointError(f"git {args[0]} failed: {reason}")
    return out
