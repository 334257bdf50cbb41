"""Where a worktree operation's time goes: every git process `sidecar.worktrees.manager`
starts, timed.

In this process only (the benchmark's own measuring, never a sidecar under test): the
name `run` that the manager calls git through (`git.run`) is wrapped for the duration,
so one create or one diff can be told apart into its git processes (subcommand and ms)
and what is left (the Python around them: parsing the diff into hunks, copying the
index). The wrapper costs a clock read and an append per process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sidecar.worktrees import git

Call = tuple[str, float]  # git subcommand (its first argument or two), ms


def _name(args: tuple[str, ...]) -> str:
    if not args:
        return "?"
    second = args[1] if len(args) > 1 and not args[1].startswith("-") else ""
    return f"{args[0]} {second}".strip() if args[0] == "worktree" else args[0]


class GitTrace:
    def __init__(self) -> None:
        self._calls: list[Call] = []

    def take(self) -> list[Call]:
        """The calls since the last take."""
        calls, self._calls = self._calls, []
        return calls

    @contextmanager
    def installed(self) -> Iterator[GitTrace]:
        original = git.run

        async def traced(cwd: str, *args: str, **options: Any) -> git.GitResult:
            started = time.perf_counter_ns()
            try:
                return await original(cwd, *args, **options)
            finally:
                self._calls.append((_name(args), (time.perf_counter_ns() - started) / 1e6))

        git.run = traced  # type: ignore[assignment]
        try:
            yield self
        finally:
            git.run = original  # type: ignore[assignment]


def summary(calls: list[Call]) -> str:
    """`worktree add ×1: 812.0 ms; rev-parse ×2: 6.1 ms; ...`, the costliest first."""
    totals: dict[str, list[float]] = {}
    for kind, ms in calls:
        totals.setdefault(kind, []).append(ms)
    rows = sorted(((sum(v), k, len(v)) for k, v in totals.items()), reverse=True)
    return "; ".join(f"{k} ×{n}: {ms:.1f} ms" for ms, k, n in rows)
