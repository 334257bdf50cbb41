"""Where a checkpoint operation's time goes: every git process the sidecar starts, timed.

In this process only (the benchmark's own measuring, never a sidecar under test): the
names `run_git` and `converse_git` (a git kept for several requests: `mktree --batch`)
that sidecar/checkpoints/shadow.py calls through are wrapped for the duration, so each
snapshot, rewind or turn end can be told apart into its git processes (command and ms)
and what is left (the sidecar's Python around them, the watch's look in a thread). The
wrapper costs a clock read and an append per process.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from sidecar.checkpoints import shadow

Call = tuple[str, float]  # git subcommand, ms
RunGit = Callable[..., Awaitable[bytes]]
ConverseGit = Callable[..., AbstractAsyncContextManager[Any]]
_WRAPPED = "run_git"  # the names shadow.py starts every git process through
_CONVERSED = "converse_git"
# The options that tell one use of a subcommand from another in shadow.py.
_TELLING = frozenset(
    {
        "--others",
        "--modified",
        "--name-only",
        "--raw",
        "-p",
        "--stdin",
        "--batch",
        "--index-info",
        "--pathspec-from-file=-",
    }
)


def _name(args: Sequence[str]) -> str:
    return " ".join([args[0], *(a for a in args[1:] if a in _TELLING)]) if args else "?"


class GitTrace:
    def __init__(self) -> None:
        self._calls: list[Call] = []

    def take(self) -> list[Call]:
        """The calls since the last take."""
        calls, self._calls = self._calls, []
        return calls

    @contextmanager
    def installed(self) -> Iterator[GitTrace]:
        original: RunGit = getattr(shadow, _WRAPPED)

        async def traced(
            git: str,
            git_dir: Path,
            work_tree: str | None,
            args: Sequence[str],
            **options: Any,  # run_git's keyword options, passed through as they are
        ) -> bytes:
            started = time.perf_counter_ns()
            try:
                return await original(git, git_dir, work_tree, args, **options)
            finally:
                self._calls.append((_name(args), (time.perf_counter_ns() - started) / 1e6))

        conversing: ConverseGit = getattr(shadow, _CONVERSED)

        @asynccontextmanager
        async def traced_conversation(
            git: str, git_dir: Path, work_tree: str, args: Sequence[str], **options: Any
        ) -> AsyncIterator[Any]:
            started = time.perf_counter_ns()
            try:
                async with conversing(git, git_dir, work_tree, args, **options) as talk:
                    yield talk
            finally:
                self._calls.append((_name(args), (time.perf_counter_ns() - started) / 1e6))

        setattr(shadow, _WRAPPED, traced)
        setattr(shadow, _CONVERSED, traced_conversation)
        try:
            yield self
        finally:
            setattr(shadow, _WRAPPED, original)
            setattr(shadow, _CONVERSED, conversing)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def processes(samples: list[list[Call]]) -> float:
    """Git processes per operation (median over the samples)."""
    return _median([len(calls) for calls in samples])


def in_git_ms(samples: list[list[Call]]) -> float:
    return _median([sum(ms for _, ms in calls) for calls in samples])


def by_command(samples: list[list[Call]], top: int | None = None) -> str:
    """`add ×2: 63.1 ms; checkout ×1: 14.7 ms; ...`, the costliest first (medians over the
    samples of each command's count and summed ms per operation)."""
    kinds = {kind for calls in samples for kind, _ in calls}
    rows = []
    for kind in kinds:
        count = _median([sum(1 for k, _ in calls if k == kind) for calls in samples])
        ms = _median([sum(t for k, t in calls if k == kind) for calls in samples])
        rows.append((ms, f"{kind} ×{count:g}: {ms:.1f} ms"))
    rows.sort(reverse=True)
    return "; ".join(text for _, text in rows[:top])
