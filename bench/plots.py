"""PNG plots with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

Series = Mapping[str, Sequence[float]]


def _save(fig: Figure, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _cdf_axes(ax: Axes, title: str, series: Series, unit: str) -> None:
    for label, values in series.items():
        ordered = sorted(values)
        if not ordered:
            continue
        fraction = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, fraction, where="post", label=label)
    ax.set_xscale("log")
    ax.set_title(title)
    ax.set_xlabel(unit)
    ax.set_ylabel("fraction of requests ≤ x")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")


def cdfs(path: Path, panels: Mapping[str, Series], unit: str) -> str:
    """One latency CDF panel per entry, side by side, log x."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items(), strict=True):
        _cdf_axes(ax, title, series, unit)
    return _save(fig, path)


def lines(
    path: Path,
    panels: Mapping[str, tuple[Sequence[float], Series, str]],
    xlabel: str,
    *,
    logx: bool = True,
    logy: bool = False,
) -> str:
    """One panel per entry: (x values, {label: y values}, y label)."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (title, (xs, series, ylabel)) in zip(axes[0], panels.items(), strict=True):
        for label, ys in series.items():
            ax.plot(list(xs)[: len(ys)], list(ys), marker="o", label=label)
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0 if not logy else None)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, path)


def grouped_bars(path: Path, title: str, groups: Sequence[str], series: Series, ylabel: str) -> str:
    """Bars per group (e.g. operation), one bar per series (e.g. store)."""
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 2), 4.2))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, list(values), width=width, label=label)
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(list(groups))
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


BarPanel = tuple[Sequence[str], Series, str]  # groups, {label: one value per group}, y label


def bar_panels(path: Path, panels: Mapping[str, BarPanel], *, logy: bool = True) -> str:
    """Grouped bars, one panel per entry; a NaN value draws no bar."""
    widths = [0.65 * len(groups) + 2 for groups, _, _ in panels.values()]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(sum(widths), 4.8), squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )  # fmt: skip
    for ax, (title, (groups, series, ylabel)) in zip(axes[0], panels.items(), strict=True):
        width = 0.8 / max(1, len(series))
        for i, (label, values) in enumerate(series.items()):
            xs = [g + i * width for g, v in enumerate(values) if v == v]
            ax.bar(xs, [v for v in values if v == v], width=width, label=label)
        ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))])
        ax.set_xticklabels(list(groups), rotation=25, ha="right", fontsize="small")
        if logy:
            ax.set_yscale("log")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, path)
