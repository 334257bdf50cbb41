"""Scenario 11's tables, targets and plot, from what bench/s11_agents.py measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, fmt_ratio, percentile
from bench.core import ratio as div

KEY = "11"
TITLE = "External ACP agents: through the sidecar vs direct"
PLOT = "s11_agents.png"
NEW_X = 1.1  # session/new through the sidecar at most this many times the direct start
TURN_X = 1.1  # a plain turn through the sidecar at most this many times the direct turn
PREWARM_MS = 300.0  # session/new with a prewarmed agent process, p50
PREWARM_SETTLE = 1.0  # s between prewarmed creations: the warm process is replaced meanwhile
SHARED_X = 0.10  # RSS a session adds to a shared agent process ÷ that process's with one

SIDECAR = "sidecar: agent `scripted` (in bubblewrap)"
DIRECT = "direct: acp SDK client (`connect_to_agent`)"
PIPE = "direct: the bench's pipe client"
BUILTIN = "sidecar: builtin engine (no agent)"
FLOOR = "floor: one stdio round trip (bench/floor.py --asyncio)"
PREWARM = "sidecar `--prewarm scripted`: agent `scripted`"
SHARED = "sidecar: agent `scripted-shared` (`shared_process`), its process tree"
SHARED_DIRECT = "direct: the agent spawned here, sessions on one SDK connection"


@dataclass
class Memory:
    sessions: int = 0
    sidecar_before_kib: int = 0
    sidecar_after_kib: int = 0
    agent_processes: int = 0  # bwrap and the agent, every open session's
    agent_kib: int = 0
    direct_processes: int = 0
    direct_kib: int = 0

    @property
    def growth_kib(self) -> float:
        return (self.sidecar_after_kib - self.sidecar_before_kib) / max(1, self.sessions)

    @property
    def per_session_kib(self) -> float:
        return self.agent_kib / max(1, self.sessions) + self.growth_kib


@dataclass
class Shared:
    """Sessions sharing one agent process: RSS after each of `sessions` opened (index
    k: k + 1 sessions open), the sidecar's too, and the joining sessions' session/new."""

    sessions: int = 0
    processes: int = 0  # most marked processes seen (bwrap, its init, the agent)
    tree_kib: list[int] = field(default_factory=list)
    sidecar_kib: list[int] = field(default_factory=list)
    join_ms: list[float] = field(default_factory=list)  # sessions 2..n through the sidecar
    direct_kib: list[int] = field(default_factory=list)
    direct_join_ms: list[float] = field(default_factory=list)  # sessions 2..n, SDK direct

    @staticmethod
    def added(kib: list[int]) -> float:
        """KiB a session adds, on average, after the first."""
        return (kib[-1] - kib[0]) / (len(kib) - 1) if len(kib) > 1 else float("nan")

    @staticmethod
    def last_added(kib: list[int]) -> float:
        """KiB the last session alone added."""
        return float(kib[-1] - kib[-2]) if len(kib) > 1 else float("nan")

    @staticmethod
    def share(kib: list[int]) -> float:
        """A session's addition ÷ the process's RSS with one session."""
        return div(Shared.added(kib), float(kib[0])) if kib else float("nan")


@dataclass
class Measured:
    new_ms: dict[str, list[float]] = field(default_factory=dict)  # side -> ms per round
    close_ms: dict[str, list[float]] = field(default_factory=dict)
    turn_ms: dict[str, list[float]] = field(default_factory=dict)
    prewarm_ms: list[float] = field(default_factory=list)
    prewarm_state: str = ""  # why prewarm was not measured; "" when it was
    prewarm_processes: int = 0  # most agent processes seen after a close, prewarmed sidecar
    memory: Memory = field(default_factory=Memory)
    shared: Shared = field(default_factory=Shared)
    problems: list[str] = field(default_factory=list)


def p50(values: list[float]) -> float:
    return percentile(values, 50)


def p90(values: list[float]) -> float:
    return percentile(values, 90)


def _cells(values: list[float], base: float) -> list[str]:
    s = Stats.of(values)
    return [fmt(s.p50), fmt(p90(values)), fmt(s.p99), fmt(s.low), fmt(s.high)] + [
        fmt_ratio(div(s.p50, base))
    ]


def _mib(kib: float) -> str:
    return fmt(kib / 1024.0, 1)


def describe(settings: Settings, m: Measured) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    new = {k: p50(v) for k, v in m.new_ms.items()}
    turn = {k: p50(v) for k, v in m.turn_ms.items()}
    warm = p50(m.prewarm_ms) if m.prewarm_ms else float("nan")
    result.tables += [_new_table(m, new), _turn_table(m, turn), _memory_table(m.memory)]
    if m.shared.tree_kib:
        result.tables.append(_shared_table(m.shared, m.memory))
    _targets(result, m, new, turn, warm)
    _shared_target(result, m.shared, m.memory)
    result.plots.append(_plot(settings.out / PLOT, m, warm))
    mem = m.memory
    result.summary = (
        f"session/new {fmt(new[SIDECAR])} ms through the sidecar vs {fmt(new[DIRECT])} ms direct "
        f"({fmt_ratio(div(new[SIDECAR], new[DIRECT]))}); a turn {fmt(turn[SIDECAR], 2)} ms vs "
        f"{fmt(turn[DIRECT], 2)} ms ({fmt_ratio(div(turn[SIDECAR], turn[DIRECT]))}); "
        + (f"prewarmed session/new {fmt(warm)} ms; " if m.prewarm_ms else "prewarm not measured; ")
        + f"{_mib(mem.per_session_kib)} MiB per external session with a process each"
        + (
            f", {_kib(Shared.added(m.shared.tree_kib))} KiB per session sharing one "
            f"({_pct(Shared.share(m.shared.tree_kib))} of the process)"
            if len(m.shared.tree_kib) > 1
            else ""
        )
    )
    result.notes += [f"**Problem:** {p}" for p in list(dict.fromkeys(m.problems))[:10]]
    result.notes += _notes(m, new, turn)
    result.raw = {
        "new_ms": {k: {**Stats.of(v).as_dict(), "p90": p90(v)} for k, v in m.new_ms.items()},
        "close_ms": {k: Stats.of(v).as_dict() for k, v in m.close_ms.items()},
        "turn_ms": {k: {**Stats.of(v).as_dict(), "p90": p90(v)} for k, v in m.turn_ms.items()},
        "prewarm_ms": {**Stats.of(m.prewarm_ms).as_dict(), "p90": p90(m.prewarm_ms)},
        "prewarm_state": m.prewarm_state or "measured",
        "prewarm_most_agent_processes": m.prewarm_processes,
        "memory_kib": {
            **vars(mem),
            "sidecar_growth_per_session": mem.growth_kib,
            "per_external_session": mem.per_session_kib,
        },
        "shared": {
            **vars(m.shared),
            "added_kib": Shared.added(m.shared.tree_kib),
            "last_added_kib": Shared.last_added(m.shared.tree_kib),
            "added_share": Shared.share(m.shared.tree_kib),
            "direct_added_kib": Shared.added(m.shared.direct_kib),
            "direct_added_share": Shared.share(m.shared.direct_kib),
        },
        "ratios_p50": {
            "session_new": div(new[SIDECAR], new[DIRECT]),
            "turn": div(turn[SIDECAR], turn[DIRECT]),
        },
    }
    return result


def _new_table(m: Measured, new: dict[str, float]) -> Table:
    base = new[DIRECT]
    rows = [
        [k, *_cells(m.new_ms[k], base), fmt(p50(m.close_ms[k]))]
        for k in (DIRECT, PIPE, SIDECAR, BUILTIN)
    ]
    if m.prewarm_ms:
        rows.append([PREWARM, *_cells(m.prewarm_ms, base), "--"])
    else:
        rows.append([PREWARM, *["--"] * 6, f"not measured: {m.prewarm_state}"])
    n = len(m.new_ms[DIRECT])
    return Table(
        f"A session's start, ms: through the sidecar, `session/new` written → answered (it "
        f"answers once the agent's `initialize` and `session/new` have); direct, the agent "
        f"spawned → `initialize` → `session/new` answered; {n} rounds, sides shuffled per "
        "round, each session closed before the next (close p50 beside)",
        ["side", "p50 ms", "p90 ms", "p99 ms", "min", "max", "÷ direct SDK", "close p50 ms"],
        rows,
    )


def _turn_table(m: Measured, turn: dict[str, float]) -> Table:
    base = turn[DIRECT]
    rows = [[k, *_cells(m.turn_ms[k], base)] for k in (DIRECT, PIPE, SIDECAR, BUILTIN, FLOOR)]
    rows.append(
        ["added by the host: sidecar − direct SDK (p50s)", fmt(turn[SIDECAR] - base, 2)]
        + ["--"] * 5
    )
    n = len(m.turn_ms[DIRECT])
    return Table(
        f'A plain turn, ms: `session/prompt` "say hi" sent → answered (the agent says "hi"; '
        f'the builtin engine\'s row is "hi" → "Echo: hi"; the floor echoes a prompt of the '
        f"same size); one open session per side, {n} rounds, sides shuffled per round",
        ["side", "p50 ms", "p90 ms", "p99 ms", "min", "max", "÷ direct SDK"],
        rows,
    )


def _memory_table(mem: Memory) -> Table:
    n = mem.sessions
    rows = [
        [f"agent processes of {n} open sidecar sessions (bwrap + the agent)", str(mem.agent_processes), _mib(mem.agent_kib), _mib(mem.agent_kib / max(1, n))],
        [f"the sidecar: {mem.sidecar_before_kib // 1024} MiB with none open → {mem.sidecar_after_kib // 1024} MiB with {n}", "1", _mib(mem.sidecar_after_kib - mem.sidecar_before_kib), _mib(mem.growth_kib)],
        ["**per external session** (agent processes + the sidecar's growth)", "--", "--", _mib(mem.per_session_kib)],
        [f"direct: {n} agents spawned here (the agent alone)", str(mem.direct_processes), _mib(mem.direct_kib), _mib(mem.direct_kib / max(1, n))],
    ]  # fmt: skip
    return Table(
        f"Memory (VmRSS, MiB) with {n} sessions open, each after one turn; processes found "
        "by a marker variable in their environment",
        ["what", "processes", "RSS MiB", "per session MiB"],
        rows,
    )


def _kib(kib: float) -> str:
    return fmt(kib, 0) if kib == kib else "--"


def _pct(share: float) -> str:
    return f"{share:.1%}" if share == share else "--"


def _shared_table(sh: Shared, mem: Memory) -> Table:
    n = sh.sessions
    tree, direct, sidecar = sh.tree_kib, sh.direct_kib, sh.sidecar_kib

    def row(what: str, procs: str, kib: list[int], share: bool = True) -> list[str]:
        return [
            what,
            procs,
            _mib(kib[0]),
            _mib(kib[-1]),
            _kib(Shared.added(kib)),
            _kib(Shared.last_added(kib)),
            _pct(Shared.share(kib)) if share else "--",
        ]

    one_each = mem.agent_kib / max(1, mem.sessions)
    rows = [
        row(SHARED, str(sh.processes), tree),
        row(SHARED_DIRECT, "1", direct),
        [
            f"sidecar: agent `scripted`, a process per session ({mem.sessions} open)",
            str(mem.agent_processes),
            _mib(one_each),
            _mib(mem.agent_kib),
            _kib(one_each),
            "--",
            "100%",
        ],
        row("the sidecar itself, as the shared sessions opened", "1", sidecar, share=False),
    ]
    return Table(
        f"{n} sessions of one agent in one place, opened one after another (each after "
        f"one turn): RSS (VmRSS) of what runs them with 1 and with {n} open; processes "
        f"found by a marker variable in their environment. `session/new` of a session "
        f"joining the live shared process: p50 {fmt(p50(sh.join_ms))} ms (p90 "
        f"{fmt(p90(sh.join_ms))}) through the sidecar; direct, `session/new` on the SDK "
        f"connection: p50 {fmt(p50(sh.direct_join_ms))} ms",
        [
            "what",
            "processes",
            "1 session MiB",
            f"{n} sessions MiB",
            "per added session KiB",
            "the last session added KiB",
            "per added ÷ 1 session",
        ],
        rows,
    )


def _shared_target(result: ScenarioResult, sh: Shared, mem: Memory) -> None:
    if len(sh.tree_kib) < 2:
        return
    share = Shared.share(sh.tree_kib)
    met = share <= SHARED_X
    result.targets.append(
        Target(
            f"RSS a session adds to a shared agent process (mean of sessions 2..{sh.sessions}) "
            "÷ that process tree's RSS with one session",
            f"≤ {SHARED_X:.0%}",
            f"{_pct(share)} ({_kib(Shared.added(sh.tree_kib))} KiB of "
            f"{_mib(sh.tree_kib[0])} MiB; the last session alone "
            f"{_kib(Shared.last_added(sh.tree_kib))} KiB; direct on one connection "
            f"{_pct(Shared.share(sh.direct_kib))}; a process per session: "
            f"{_mib(mem.agent_kib / max(1, mem.sessions))} MiB each)",
            met,
            ""
            if met
            else f"Sessions on the shared process cost {_kib(Shared.added(sh.tree_kib))} KiB "
            f"each where the agent driven directly on one connection costs "
            f"{_kib(Shared.added(sh.direct_kib))} KiB: if the two are near, it is the agent's "
            "own per-session state (the host adds nothing to its process); if the sidecar "
            f"side's tree had more than 3 processes ({sh.processes} seen), sessions did not "
            "share (see the sidecar log: 'shares a process with').",
        )
    )


def _targets(
    result: ScenarioResult, m: Measured, new: dict[str, float], turn: dict[str, float], warm: float
) -> None:
    r_new = div(new[SIDECAR], new[DIRECT])
    result.targets.append(
        Target(
            "session/new of an external agent's session through the sidecar ÷ the agent "
            "started directly (p50)",
            f"≤ {NEW_X:g}×",
            f"{fmt_ratio(r_new)} ({fmt(new[SIDECAR])} vs {fmt(new[DIRECT])} ms)",
            r_new <= NEW_X,
            "" if r_new <= NEW_X else _why_new(new),
        )
    )
    r_turn = div(turn[SIDECAR], turn[DIRECT])
    result.targets.append(
        Target(
            'a plain turn ("say hi") through the sidecar ÷ the same prompt to the agent '
            "directly (p50)",
            f"≤ {TURN_X:g}×",
            f"{fmt_ratio(r_turn)} ({fmt(turn[SIDECAR], 2)} vs {fmt(turn[DIRECT], 2)} ms)",
            r_turn <= TURN_X,
            "" if r_turn <= TURN_X else _why_turn(turn),
        )
    )
    if not m.prewarm_ms:
        result.targets.append(
            Target(
                "session/new with `--prewarm scripted` (p50)",
                f"≤ {PREWARM_MS:g} ms",
                f"not measured: {m.prewarm_state}",
                None,
            )
        )
        return
    result.targets.append(
        Target(
            "session/new with `--prewarm scripted`, same directory (p50)",
            f"≤ {PREWARM_MS:g} ms",
            f"{fmt(warm)} ms (p90 {fmt(p90(m.prewarm_ms))})",
            warm <= PREWARM_MS,
            ""
            if warm <= PREWARM_MS
            else f"A prewarmed start still took {fmt_ratio(div(warm, new[SIDECAR]))} a cold "
            f"one ({fmt(new[SIDECAR])} ms): if near 1×, the warm process was not taken (not "
            f"ready {PREWARM_SETTLE:g} s after the last close on this loaded machine, or not matched to "
            "the directory); see the sidecar log of the prewarm run.",
        )
    )


def _why_new(new: dict[str, float]) -> str:
    extra = new[SIDECAR] - new[DIRECT]
    return (
        f"The sidecar adds {fmt(extra)} ms to a start of {fmt(new[DIRECT])} ms. Its own "
        f"session/new without an agent (the builtin engine, same rounds) is "
        f"{fmt(new[BUILTIN])} ms; the rest is the agent's start inside bubblewrap (new "
        "namespaces and mounts before Python starts: scenario 10's command-start table "
        "prices bwrap's setup) and the extra hop of every request. The agent's own start "
        "(a Python interpreter importing the acp SDK and pydantic) dominates both sides; "
        "`--prewarm` is the remedy for the part the host cannot shrink."
    )


def _why_turn(turn: dict[str, float]) -> str:
    extra = turn[SIDECAR] - turn[DIRECT]
    return (
        f"The sidecar adds {fmt(extra, 2)} ms to a turn of {fmt(turn[DIRECT], 2)} ms: that "
        f"turn is so short that the host's fixed costs dominate. One more pipe hop (the "
        f"floor's round trip alone is {fmt(turn[FLOOR], 2)} ms), and the sidecar's own "
        f"turn around the engine -- the user and agent messages stored (SQLite), events "
        f"and the update relayed -- which the builtin engine's echo turn in the same "
        f"sidecar shows at {fmt(turn[BUILTIN], 2)} ms. A 1.1× ratio leaves "
        f"{fmt(turn[DIRECT] * (TURN_X - 1), 2)} ms for all of that; against a real model "
        "turn (seconds) the same added time is far below 1%."
    )


def _notes(m: Measured, new: dict[str, float], turn: dict[str, float]) -> list[str]:
    notes = [
        "Both sides run the same `python tests/agents/scripted_agent.py` with the same "
        "client capabilities (fs and terminals) and a state dir of its own (it saves each "
        "session there on every turn); through the sidecar it runs in bubblewrap "
        "(sandbox `workspace`), `--no-checkpoints` (scenario 7 prices checkpoints).",
        f"The bench's pipe client to the agent directly (the client the sidecar side is "
        f"driven with) starts it in {fmt(new[PIPE])} ms and turns in {fmt(turn[PIPE], 2)} ms: "
        "the SDK client's own cost is the difference from the SDK row.",
    ]
    if len(m.shared.tree_kib) > 1:
        notes.append(
            f"Sharing: `scripted-shared` is the same agent declared `shared_process`; its "
            f"{m.shared.sessions} sessions (same cwd, same sandbox) ran on "
            f"{m.shared.processes} processes (bwrap, its init, the agent: one tree), each "
            "session its own agent session; a session joining the live process skips "
            f"spawn and `initialize` (`session/new` p50 {fmt(p50(m.shared.join_ms))} ms vs "
            f"{fmt(new[SIDECAR])} ms for a cold start). What a session adds is the agent's "
            "own state for it (a dict entry and a saved JSON file for this agent); real "
            "agents add more (claude-agent-acp runs a Claude Code process per session: "
            "docs/agents.md)."
        )
    if m.prewarm_ms:
        notes.append(
            f"Prewarm: one session first sets the directory; each measured creation comes "
            f"{PREWARM_SETTLE:g} s after the previous session closed; at most {m.prewarm_processes} agent "
            "processes were seen after a close (the warm one's, bounded)."
        )
    else:
        notes.append(f"Prewarm was not measured: {m.prewarm_state}.")
    return notes


def _plot(path: Path, m: Measured, warm: float) -> str:
    new = {k: p50(v) for k, v in m.new_ms.items()}
    turn = {k: p50(v) for k, v in m.turn_ms.items()}
    news = [DIRECT, PIPE, SIDECAR, BUILTIN]
    turns = [DIRECT, PIPE, SIDECAR, BUILTIN, FLOOR]
    mem = m.memory
    n = max(1, mem.sessions)
    memory = [mem.agent_kib / n, mem.growth_kib, mem.per_session_kib, mem.direct_kib / n]
    fig, axes = plt.subplots(1, 5, figsize=(27, 5.2))
    labels = ["direct SDK", "direct pipe", "sidecar", "sidecar, builtin", "sidecar --prewarm"]
    _bars(
        axes[0],
        "session/new → answer (ms)",
        labels,
        {
            "p50": [new[k] for k in news] + [warm],
            "p90": [p90(m.new_ms[k]) for k in news] + [p90(m.prewarm_ms)],
        },
    )
    axes[0].axhline(PREWARM_MS, color="red", ls="--", lw=1, label=f"prewarm target {PREWARM_MS:g}")
    axes[0].legend(fontsize="small")
    _bars(
        axes[1],
        'a turn "say hi" → answer (ms)',
        ["direct SDK", "direct pipe", "sidecar", "sidecar, builtin", "floor"],
        {"p50": [turn[k] for k in turns], "p90": [p90(m.turn_ms[k]) for k in turns]},
    )
    ratios = [div(new[SIDECAR], new[DIRECT]), div(turn[SIDECAR], turn[DIRECT])]
    _bars(axes[2], "sidecar ÷ direct SDK (p50)", ["session/new", "turn"], {"×": ratios})
    axes[2].axhline(NEW_X, color="red", ls="--", lw=1, label=f"target {NEW_X:g}×")
    axes[2].legend(fontsize="small")
    _bars(
        axes[3],
        f"RSS per session, {mem.sessions} open (MiB)",
        ["agent procs", "sidecar growth", "per external session", "direct agent"],
        {"MiB": [v / 1024.0 for v in memory]},
    )
    _shared_plot(axes[4], m.shared, mem)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _shared_plot(ax: Axes, sh: Shared, mem: Memory) -> None:
    """RSS of what runs k sessions of one agent in one place, k = 1..n: one shared process
    through the sidecar, one SDK connection direct, and a process per session (the
    per-session average of the memory run, times k)."""
    ks = list(range(1, len(sh.tree_kib) + 1))
    if ks:
        ax.plot(ks, [v / 1024.0 for v in sh.tree_kib], "o-", label="sidecar, one shared process")
    if sh.direct_kib:
        direct_ks = list(range(1, len(sh.direct_kib) + 1))
        ax.plot(
            direct_ks, [v / 1024.0 for v in sh.direct_kib], "s-", label="direct, one connection"
        )
    if mem.sessions and ks:
        each = mem.agent_kib / mem.sessions / 1024.0
        ax.plot(ks, [each * k for k in ks], "--", label="sidecar, a process per session")
    ax.set_xlabel("sessions open")
    ax.set_ylabel("MiB")
    ax.set_title("RSS of the agent processes vs sessions")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def _bars(ax: Axes, title: str, groups: list[str], series: dict[str, list[float]]) -> None:
    """Grouped bars (linear y); a NaN value draws no bar."""
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + i * width for g, v in enumerate(values) if v == v]
        bars = ax.bar(xs, [v for v in values if v == v], width=width, label=label)
        ax.bar_label(bars, fmt="%.3g", fontsize="x-small")
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize="small")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
