"""Running `git` on a shadow repository: its own GIT_DIR, the session cwd as work tree.

The environment is built from scratch so nothing of the user's git setup applies: no
global or system config (no hooks, filters, fsmonitor or credential helpers of theirs),
no `GIT_*` variable inherited from whoever started the sidecar, literal pathspecs. The
user's repository in the cwd, if there is one, is never read or written: git is only
ever pointed at our GIT_DIR.

Every git child runs with umask 077 (its objects, index, refs and config are private like
every other file of ours) -- except one that writes the work tree (a restore's checkout:
the user's files get the user's umask), which instead keeps the repository's own files
0600 with `core.sharedRepository` -- in a process group of its own, so stopping it (a cancelled call,
a runtime closing: `stop_children`) stops whatever it started too, and no git outlives the
call that ran it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
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


# What every git child (and so every file it creates) is masked with: owner only.
UMASK: Final = 0o077
# Read at a time from a listing that may be cut short (`run_git`'s `records`).
_READ: Final = 64 * 1024

Children = set[asyncio.subprocess.Process]


def git_binary() -> str | None:
    return shutil.which("git")


def environment(git_dir: Path, work_tree: str | None, index: Path | None = None) -> dict[str, str]:
    """None as work tree: for `git init`, which takes the directory as its argument.
    `index`: an index file of its own (a scratch one, leaving the snapshots' alone)."""
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
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


async def run_git(
    git: str,
    git_dir: Path,
    work_tree: str | None,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    ok_codes: tuple[int, ...] = (0,),
    children: Children | None = None,
    records: RecordCap | None = None,
    writes_work_tree: bool = False,
    index: Path | None = None,
) -> bytes:
    """git's stdout; CheckpointError with git's own words when it fails. Run from the work
    tree (a cwd that is gone or unreadable fails here, with a clear reason); with no work
    tree, from the repository's parent directory. `children`: where the running process is
    registered while it runs (so its owner can stop it). `records`: read NUL-terminated
    output only until the cap says stop, then git is stopped (its listing is not needed
    past that point) and what was read is returned. `writes_work_tree`: the call writes
    the user's files (see the module's doc)."""
    process = await _start(
        git, git_dir, work_tree, args, stdin is not None, writes_work_tree, index
    )
    if children is not None:
        children.add(process)
    try:
        if records is None:
            out, err = await process.communicate(stdin)
        else:
            out, err = await _read_records(process, records)
            if records.stopped:
                return out
    except asyncio.CancelledError:
        # Never leave a git process writing to the shadow repository behind us.
        _kill_group(process)
        await _reaped(process)
        raise
    finally:
        if children is not None:
            children.discard(process)
    _check(args, process.returncode, err, ok_codes)
    return out


async def _start(
    git: str,
    git_dir: Path,
    work_tree: str | None,
    args: Sequence[str],
    with_stdin: bool,
    writes_work_tree: bool,
    index: Path | None,
) -> asyncio.subprocess.Process:
    where = work_tree if work_tree is not None else str(git_dir.parent)
    argv = [git]
    for setting in _SETTINGS:
        argv += ["-c", setting]
    if writes_work_tree:
        argv += ["-c", "core.sharedRepository=0600"]
    argv += list(args)
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=where,
            env=environment(git_dir, work_tree, index),
            stdin=asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            umask=-1 if writes_work_tree else UMASK,
            start_new_session=True,  # its own process group: stopped whole
        )
    except FileNotFoundError as exc:
        missing = exc.filename or git
        raise CheckpointError(f"cannot run git in {where}: {missing} does not exist") from None
    except PermissionError:
        raise CheckpointError(f"cannot run git in {where}: permission denied") from None


def _check(args: Sequence[str], code: int | None, err: bytes, ok_codes: tuple[int, ...]) -> None:
    if code not in ok_codes:
        detail = err.decode(errors="replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit status {code}"
        raise CheckpointError(f"git {args[0]} failed: {reason}")


class Conversation:
    """A git that answers one line per request on its stdin (`mktree --batch`)."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        args: Sequence[str],
        errors: asyncio.Future[bytes],
    ) -> None:
        self._process = process
        self._args = args
        self._errors = errors  # its stderr, read to the end alongside

    async def ask_all(self, requests: Sequence[bytes]) -> list[bytes]:
        """Several requests at once, their answers in order (written while they are read:
        neither side waits on a full pipe)."""
        assert self._process.stdin is not None
        stdin = self._process.stdin

        async def send() -> None:
            try:
                for request in requests:
                    stdin.write(request)
                    await stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # git is gone: its own words come with the missing answers

        sending = asyncio.ensure_future(send())
        try:
            answers = [await self._answer() for _ in requests]
        except BaseException:
            sending.cancel()
            raise
        await sending
        return answers

    async def _answer(self) -> bytes:
        assert self._process.stdout is not None
        line = await self._process.stdout.readline()
        if not line.endswith(b"\n"):
            await self._process.wait()
            _check(self._args, self._process.returncode, await self._errors, ())
        return line.rstrip(b"\n")


@asynccontextmanager
async def converse_git(
    git: str,
    git_dir: Path,
    work_tree: str,
    args: Sequence[str],
    *,
    children: Children | None = None,
) -> AsyncIterator[Conversation]:
    """A git kept running for several requests (each answered before the next is
    written), stopped with its process group when the block is left early; at the end
    its exit is checked like `run_git`'s."""
    process = await _start(git, git_dir, work_tree, args, True, False, None)
    if children is not None:
        children.add(process)
    errors = asyncio.ensure_future(_stderr(process))
    done = False
    try:
        yield Conversation(process, args, errors)
        assert process.stdin is not None
        process.stdin.close()
        await _reaped(process)
        done = True
    finally:
        if not done:
            _kill_group(process)
            await _reaped(process)
        if children is not None:
            children.discard(process)
        err = await errors
    _check(args, process.returncode, err, (0,))


async def _stderr(process: asyncio.subprocess.Process) -> bytes:
    assert process.stderr is not None
    return await process.stderr.read()


class RecordCap:
    """When to stop reading a NUL-separated listing: `counts(record)` says whether a record
    counts, and reading stops once more than `limit` did (`stopped` then says so)."""

    def __init__(self, limit: int, counts: Callable[[bytes], bool]) -> None:
        self.limit = limit
        self.counts = counts
        self.counted = 0
        self.stopped = False


async def _read_records(process: asyncio.subprocess.Process, cap: RecordCap) -> tuple[bytes, bytes]:
    assert process.stdout is not None and process.stderr is not None
    errors = asyncio.ensure_future(process.stderr.read())
    taken: list[bytes] = []
    pending = b""
    while True:
        chunk = await process.stdout.read(_READ)
        if not chunk:
            break
        *whole, pending = (pending + chunk).split(b"\0")
        for record in whole:
            taken.append(record + b"\0")
            if cap.counts(record):
                cap.counted += 1
                if cap.counted > cap.limit:
                    cap.stopped = True
                    break
        if cap.stopped:
            _kill_group(process)
            break
    await _reaped(process)
    err = await errors
    return b"".join(taken) + (b"" if cap.stopped else pending), err


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its group is its pid: start_new_session
    except ProcessLookupError:
        pass  # gone already


async def _reaped(process: asyncio.subprocess.Process) -> None:
    """Wait for a git that was stopped (or ended). Its stdout is read to the end first:
    asyncio's `wait` returns only once every pipe is closed, and a pipe nobody reads stays
    paused, never closed."""
    if process.stdout is not None:
        while await process.stdout.read(_READ):
            pass
    await process.wait()


def stop_children(children: Children) -> None:
    """Stop every registered git (and what it started) at once; their calls then fail."""
    for process in list(children):
        _kill_group(process)
