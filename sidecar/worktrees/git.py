"""Running `git` on the user's repository.

Unlike the checkpoints' shadow repository, this is the user's own repository, so their
config (identity, signing, attributes) applies -- except where it would change what we
parse or make a call wait for a human: fixed settings (`_SETTINGS`) override those, the
environment drops every inherited `GIT_*` variable that could point git elsewhere
(`GIT_DIR`, `GIT_INDEX_FILE`, ... set when the sidecar is started from a hook), and no
call ever prompts, pages or opens an editor. Hooks are off: an agent's commit must not
run the user's pre-commit checks, and a hook that edits the tree mid-merge would defeat
the all-or-nothing merge.

Each git runs in a process group of its own, so a cancelled call stops it and whatever
it started; callers that must not be interrupted halfway (a merge) shield themselves.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sidecar.domain.errors import InvalidState

# Overrides for settings that would change output we parse or make git interactive.
_SETTINGS: Final = (
    "core.quotePath=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "color.ui=never",
    "color.diff=never",
    "color.status=never",
    "color.branch=never",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.algorithm=default",
    "diff.context=3",
    "diff.interHunkContext=0",
    "diff.suppressBlankEmpty=false",
    "diff.colorMoved=no",
    "diff.submodule=short",
    "status.relativePaths=false",
    "status.showUntrackedFiles=normal",
    "submodule.recurse=false",
    "worktree.guessRemote=false",
    "rebase.autoStash=false",
    "rebase.updateRefs=false",
    "rebase.autoSquash=false",
    "merge.autoStash=false",
    "merge.conflictStyle=merge",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
)

# Inherited GIT_* variables kept: who commits, and where the user's own config lives.
_KEPT: Final = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CEILING_DIRECTORIES",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_ASKPASS",
    }
)

_FIXED_ENV: Final = {
    "LC_ALL": "C",
    "LANGUAGE": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_MERGE_AUTOEDIT": "no",
    # Our reads (status) must not take the index lock the user's own git may want.
    "GIT_OPTIONAL_LOCKS": "0",
    # LFS files stay pointers in a session's worktree: no download, no smudge filter.
    "GIT_LFS_SKIP_SMUDGE": "1",
}

_TAIL_LINES: Final = 6
_TAIL_CHARS: Final = 2000


class GitError(InvalidState):
    """A git command failed: what ran, how it exited and the end of what it said (a
    client gets it as -32045 with git's own words: the repository did not allow it)."""

    def __init__(self, argv: Sequence[str], code: int | None, stderr: str) -> None:
        self.argv = tuple(argv)
        self.code = code
        self.stderr = _tail(stderr)
        summary = self.stderr.splitlines()[-1] if self.stderr else f"exit status {code}"
        super().__init__(f"git {self.command} failed ({code}): {summary}")

    @property
    def command(self) -> str:
        """The git subcommand and its arguments, without our `-c` settings."""
        return _command(self.argv)


class GitNotInstalled(GitError):
    def __init__(self) -> None:
        InvalidState.__init__(self, "git is not installed: no `git` found on PATH")
        self.argv = ("git",)
        self.code = None
        self.stderr = ""


@dataclass(frozen=True)
class GitResult:
    code: int
    out: bytes
    err: bytes

    @property
    def text(self) -> str:
        """stdout as text; undecodable bytes replaced (output is shown, never re-applied)."""
        return self.out.decode("utf-8", errors="replace")

    @property
    def stripped(self) -> str:
        return self.text.strip()


def git_binary() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitNotInstalled()
    return found


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT}
    env.update(_FIXED_ENV)
    if extra:
        env.update(extra)
    return env


async def run(
    cwd: str,
    *args: str,
    ok: tuple[int, ...] = (0,),
    env: Mapping[str, str] | None = None,
    config: Sequence[str] = (),
    stdin: bytes | None = None,
) -> GitResult:
    """Run `git ARGS` in `cwd`; GitError unless its exit status is in `ok`. `env`: extra
    variables (GIT_INDEX_FILE for a scratch index); `config`: extra `-c` settings."""
    argv = [git_binary()]
    for setting in (*_SETTINGS, *config):
        argv += ["-c", setting]
    argv += args
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=environment(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: stopped whole
        )
    except FileNotFoundError as exc:
        if exc.filename == argv[0]:
            raise GitNotInstalled() from None
        raise GitError(argv, None, f"{cwd}: no such directory") from None
    except NotADirectoryError:
        raise GitError(argv, None, f"{cwd}: not a directory") from None
    except PermissionError:
        raise GitError(argv, None, f"{cwd}: permission denied") from None
    try:
        out, err = await process.communicate(stdin)
    except asyncio.CancelledError:
        _kill_group(process)
        await process.wait()
        raise
    code = process.returncode
    assert code is not None
    if code not in ok:
        raise GitError(argv, code, err.decode("utf-8", errors="replace"))
    return GitResult(code, out, err)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its group is its pid: start_new_session
    except ProcessLookupError:
        pass  # gone already


def _command(argv: Sequence[str]) -> str:
    """The git subcommand and its arguments, without the binary and our `-c` settings."""
    shown: list[str] = []
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        if arg == "-c":
            skip = True
            continue
        shown.append(arg)
    return " ".join(shown)


def _tail(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return "\n".join(lines[-_TAIL_LINES:])[-_TAIL_CHARS:]
