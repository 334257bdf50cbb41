"""What every scenario shares: settings, statistics, machine facts and result shapes."""

from __future__ import annotations

import os
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    seed: int
    size: str  # small | full
    smoke: bool
    out: Path
    work: Path  # scratch space: data dirs, workspaces, child logs

    def pick(self, smoke: T, small: T, full: T) -> T:
        """The value for this run's size."""
        if self.smoke:
            return smoke
        return full if self.size == "full" else small

    def rng(self, scenario: str) -> random.Random:
        """A generator per scenario, so running a subset picks the same values."""
        return random.Random(f"{self.seed}:{scenario}")

    def scratch(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Stats:
    """A sample in one unit (µs or ms, as named by whoever made it)."""

    n: int
    p50: float
    p99: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        return cls(
            len(values),
            percentile(values, 50),
            percentile(values, 99),
            min(values, default=float("nan")),
            max(values, default=float("nan")),
        )

    def as_dict(self) -> dict[str, float]:
        return {"n": self.n, "p50": self.p50, "p99": self.p99, "min": self.low, "max": self.high}


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def fmt(value: float, digits: int = 1) -> str:
    """Numbers for tables: whole numbers from 100 up, `digits` decimals below."""
    if value != value:  # NaN
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def fmt_ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}×"


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """`with stopwatch() as t:` ... `t[0]` is the elapsed seconds afterwards."""
    box: list[float] = []
    started = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - started)


def timed_us(fn: Callable[[], object]) -> float:
    started = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - started) / 1000.0


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]


@dataclass
class Target:
    name: str
    goal: str
    measured: str
    met: bool | None  # None: not measured (skipped)
    why: str = ""  # the cause and the fix, when not met


@dataclass
class ScenarioResult:
    key: str
    title: str
    summary: str = ""
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None  # a traceback: the benchmark itself broke
    raw: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def python() -> str:
    return sys.executable


def interleaved(
    rng: random.Random, probes: dict[str, Callable[[], float]], n: int, batch: int = 50
) -> dict[str, list[float]]:
    """`n` samples from every probe, taken in batches in a shuffled order per round, so a
    noisy neighbour hurts every side of a ratio alike instead of whichever ran then."""
    samples: dict[str, list[float]] = {name: [] for name in probes}
    names = list(probes)
    while any(len(values) < n for values in samples.values()):
        rng.shuffle(names)
        for name in names:
            take = min(batch, n - len(samples[name]))
            samples[name].extend(probes[name]() for _ in range(take))
    return samples
