"""Scenario 10's tables, targets and plot, from bench/s10_turns.py and s10_direct.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from bench import plots
from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, fmt_ratio, ratio
from bench.s10_direct import BASH, BWRAP, LADDER, MOUNTS, OFF, PID, TRUE, WORKSPACE, WRAPPED
from bench.s10_turns import ASK, ASK_WRITE, AUTO, AUTO_WRITE, MCP, PLAIN, Turn, TurnsRun
from bench.s10_turns import OFF as TURN_OFF

KEY = "10"
TITLE = "New features: approvals, sandbox, MCP"
APPROVAL_MS = 1.0  # the extra time asking may add to a tool call, over the client's answer
SANDBOX_X = 2.0  # a sandboxed `true` at most this many times an unsandboxed one
MCP_X = 2.0  # an MCP call through a turn at most this many times the SDK client's own call


@dataclass
class Measured:
    turns: TurnsRun
    spawn_ms: dict[str, list[float]]  # LADDER name -> ms
    spawn_problems: list[str]


def _p50(values: list[float]) -> float:
    return Stats.of(values).p50


def _ms(values: list[float]) -> list[float]:
    return [v / 1000.0 for v in values]


def _segment(turn: Turn) -> float:
    """µs from the `tool_call` notification to `in_progress`, less this client's own
    answer time: where asking happens, and nothing else of the call does."""
    return turn.in_progress - turn.tool_call - turn.answer_us


def _paired(ask: list[Turn], auto: list[Turn], pick: Callable[[Turn], float]) -> list[float]:
    """Per round (the two ran in the same shuffled round): ask − auto − the answer, ms."""
    return [(pick(a) - pick(b) - a.answer_us) / 1000.0 for a, b in zip(ask, auto, strict=True)]


def describe(settings: Settings, m: Measured) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    t = m.turns.turns
    extra_bash_segment = [
        (_segment(a) - _segment(b)) / 1000.0 for a, b in zip(t[ASK], t[AUTO], strict=True)
    ]
    extra_bash_turn = _paired(t[ASK], t[AUTO], lambda x: x.total)
    extra_write_segment = [
        (_segment(a) - _segment(b)) / 1000.0
        for a, b in zip(t[ASK_WRITE], t[AUTO_WRITE], strict=True)
    ]
    extra_write_turn = _paired(t[ASK_WRITE], t[AUTO_WRITE], lambda x: x.total)
    answers = _ms([x.answer_us for x in t[ASK] + t[ASK_WRITE]])
    result.tables.append(_turn_table(m.turns))
    approval = {
        "`$ true`: tool_call → in_progress, ask − auto − answer": extra_bash_segment,
        "`$ true`: whole turn, ask − auto − answer": extra_bash_turn,
        "`/write`: tool_call → in_progress, ask − auto − answer": extra_write_segment,
        "`/write`: whole turn, ask − auto − answer": extra_write_turn,
        "the client's own answer (read the request → answer written)": answers,
        "floor: one request and answer over stdio (bench/floor.py --asyncio)": _ms(
            m.turns.floor_us
        ),
    }
    result.tables.append(
        Table(
            "Approval round trip: what `session/request_permission` adds to one tool call, ms "
            "(per round, the `ask` call less the `auto` call of the same round, less the "
            "client's own answer time; the client answers at once)",
            ["what", "p50 ms", "p99 ms", "min", "max"],
            [[k, *_cells(v)] for k, v in approval.items()],
        )
    )
    spawn = {name: _p50(m.spawn_ms[name]) for name in LADDER}
    result.tables.append(_spawn_table(m.spawn_ms, spawn))
    span = {kind: _p50(_ms([x.span for x in t[kind]])) for kind in (AUTO, TURN_OFF)}
    peer = _p50(m.turns.peer_ms)
    mcp_span = _p50(_ms([x.span for x in t[MCP]]))
    mcp_extra = _p50(_ms([a.total - b.total for a, b in zip(t[MCP], t[PLAIN], strict=True)]))
    result.tables.append(_mcp_table(m.turns, peer, mcp_span, mcp_extra))
    bash, whole = _p50(extra_bash_turn), _p50(extra_write_turn)
    _targets(result, m, bash, whole, spawn, span, peer, mcp_extra, mcp_span)
    result.plots.append(_plot(settings, m, spawn, span, peer, mcp_span, mcp_extra))
    result.summary = (
        f"asking adds {fmt(bash, 2)} ms to a `$ true` turn ({fmt(whole, 2)} ms to a `/write` "
        f"turn) over the answer; bwrap `true` {fmt(spawn[WORKSPACE])} ms vs bare "
        f"{fmt(spawn[BASH])} ms ({fmt_ratio(ratio(spawn[WORKSPACE], spawn[BASH]))}; bare "
        f"`bwrap … true` {fmt_ratio(ratio(spawn[BWRAP], spawn[TRUE]))} `true`); an MCP "
        f"call adds {fmt(mcp_extra)} ms to a turn vs {fmt(peer)} ms direct "
        f"({fmt_ratio(ratio(mcp_extra, peer))})"
    )
    problems = list(dict.fromkeys(m.turns.problems + m.spawn_problems))
    result.notes += [f"**Problem:** {p}" for p in problems[:10]]
    result.notes += _notes(m, spawn)
    result.raw = {
        "turns_ms": {k: _turn_stats(v) for k, v in t.items()},
        "approval_extra_ms": {k: Stats.of(v).as_dict() for k, v in approval.items()},
        "spawn_ms": {k: Stats.of(v).as_dict() for k, v in m.spawn_ms.items()},
        "mcp_peer_ms": Stats.of(m.turns.peer_ms).as_dict(),
        "mcp_peer_connect_ms": m.turns.peer_connect_ms,
        "mcp_turn_extra_ms": mcp_extra,
        "samples": {k: [asdict(x) for x in v[:3]] for k, v in t.items()},
    }
    return result


def _cells(values: list[float]) -> list[str]:
    s = Stats.of(values)
    return [fmt(s.p50, 2), fmt(s.p99, 2), fmt(s.low, 2), fmt(s.high, 2)]


def _turn_stats(turns: list[Turn]) -> dict[str, dict[str, float]]:
    return {
        "total": Stats.of(_ms([x.total for x in turns])).as_dict(),
        "tool_call_span": Stats.of(_ms([x.span for x in turns if x.span >= 0])).as_dict(),
    }


def _turn_table(run: TurnsRun) -> Table:
    rows = []
    for kind, turns in run.turns.items():
        tool = [x for x in turns if x.tool_call >= 0]
        cells = [kind, *(fmt(v) for v in (Stats.of(_ms([x.total for x in turns])).p50,))]
        cells.append(fmt(Stats.of(_ms([x.total for x in turns])).p99))
        if tool:
            asked = [x for x in tool if x.asked >= 0]
            cells += [
                fmt(_p50(_ms([x.span for x in tool])), 2),
                fmt(_p50(_ms([x.asked - x.tool_call for x in asked])), 2) if asked else "--",
                fmt(_p50(_ms([x.in_progress - x.answered for x in asked])), 2) if asked else "--",
                fmt(_p50(_ms([_segment(x) for x in tool])), 2),
                fmt(_p50(_ms([x.completed - x.in_progress for x in tool])), 2),
            ]
        else:
            cells += ["--"] * 5
        rows.append(cells)
    n = len(next(iter(run.turns.values())))
    return Table(
        f"Turns over stdio, one sidecar (`--no-checkpoints`), one session per row, {n} rounds "
        "in a shuffled order; ms from the `session/prompt` write, and between the messages "
        "the client read",
        ["turn", "p50 ms", "p99 ms", "tool_call → completed", "tool_call → asked"]
        + ["answered → in_progress", "tool_call → in_progress − answer", "in_progress → completed"],
        rows,
    )


_STEP = {BASH: TRUE, BWRAP: TRUE, PID: BWRAP, MOUNTS: PID, WRAPPED: MOUNTS, WORKSPACE: WRAPPED}


def _spawn_table(samples: dict[str, list[float]], spawn: dict[str, float]) -> Table:
    rows = []
    for name in LADDER:
        s = Stats.of(samples[name])
        base = _STEP.get(name)
        step = f"+{fmt(s.p50 - spawn[base], 2)} (over: {base})" if base else "--"
        rows.append(
            [name, fmt(s.p50, 2), fmt(s.p99, 2), fmt_ratio(ratio(s.p50, spawn[TRUE]))]
            + [fmt_ratio(ratio(s.p50, spawn[BASH])), step]
        )
    n = len(samples[TRUE])
    return Table(
        f"Command start, `true` spawned and waited for (subprocess.run, a new session), ms, "
        f"{n} of each in shuffled interleaved batches; each bwrap row adds one part of "
        "what sidecar/agent/sandbox.py `wrap` runs",
        ["argv", "p50 ms", "p99 ms", "÷ true", "÷ bash -c true", "p50 ms added"],
        rows,
    )


def _mcp_table(run: TurnsRun, peer: float, span: float, extra: float) -> Table:
    t = run.turns
    mcp, plain = _p50(_ms([x.total for x in t[MCP]])), _p50(_ms([x.total for x in t[PLAIN]]))
    rows = [
        ["peer: the MCP SDK client's call_tool (echo), direct", fmt(peer, 2), "1.00×"],
        ["a turn calling it (`/mcp bench echo`), prompt → answer", fmt(mcp, 2), fmt_ratio(ratio(mcp, peer))],
        ["a plain turn (`hi`) in the same session", fmt(plain, 2), fmt_ratio(ratio(plain, peer))],
        ["what the call adds to a turn (per round: MCP turn − plain turn)", fmt(extra, 2), fmt_ratio(ratio(extra, peer))],
        ["the call inside the turn: tool_call → completed", fmt(span, 2), fmt_ratio(ratio(span, peer))],
        ["overhead over the direct call: added − direct", fmt(extra - peer, 2), "--"],
    ]  # fmt: skip
    return Table(
        f"An MCP tool call (bench/s10_mcp_server.py over stdio, one copy per side), ms, p50 of "
        f"{len(run.peer_ms)} rounds interleaved with the turns; the peer connected in "
        f"{fmt(run.peer_connect_ms)} ms",
        ["what", "p50 ms", "÷ direct call"],
        rows,
    )


def _targets(
    result: ScenarioResult,
    m: Measured,
    seg: float,
    whole: float,
    spawn: dict[str, float],
    span: dict[str, float],
    peer: float,
    mcp_extra: float,
    mcp_span: float,
) -> None:
    t = m.turns.turns
    for name, value in (("`$ true`", seg), ("`/write`", whole)):
        result.targets.append(
            Target(
                f"approval round trip, {name}: whole turn, ask − auto − the client's answer (p50)",
                f"≤ {APPROVAL_MS:g} ms",
                f"{fmt(value, 2)} ms",
                value <= APPROVAL_MS,
                ""
                if value <= APPROVAL_MS
                else _why_approval(t, value, _p50(_ms(m.turns.floor_us))),
            )
        )
    agent = ratio(span[AUTO], span[TURN_OFF])
    result.targets.append(
        Target(
            "`$ true` through the bash tool: sandbox workspace ÷ off (tool_call → completed)",
            f"≤ {SANDBOX_X:g}×",
            fmt_ratio(agent),
            agent <= SANDBOX_X,
            "" if agent <= SANDBOX_X else "Both run in bubblewrap; see the command-start table.",
        )
    )
    bare = ratio(spawn[WORKSPACE], spawn[BASH])
    result.targets.append(
        Target(
            "`true` sandboxed (the bash tool's bwrap argv, workspace) ÷ unsandboxed "
            "(`bash -c true`)",
            f"≤ {SANDBOX_X:g}×",
            fmt_ratio(bare),
            bare <= SANDBOX_X,
            "" if bare <= SANDBOX_X else _why_sandbox(spawn),
        )
    )
    value = ratio(mcp_extra, peer)
    result.targets.append(
        Target(
            "MCP tool call through a turn (MCP turn − plain turn) ÷ the SDK client's direct call",
            f"≤ {MCP_X:g}×",
            f"{fmt_ratio(value)} ({mcp_extra - peer:+.2f} ms over {fmt(peer, 2)} ms)",
            value <= MCP_X,
            ""
            if value <= MCP_X
            else f"Inside the turn the call itself (tool_call → completed) takes "
            f"{fmt(mcp_span, 2)} ms ({fmt_ratio(ratio(mcp_span, peer))} the direct call); the "
            "rest is the turn's second model step and its transcript writes.",
        )
    )


def _why_approval(t: dict[str, list[Turn]], extra: float, floor: float) -> str:
    after = _p50(_ms([x.in_progress - x.answered for x in t[ASK_WRITE]]))
    return (
        f"Asking is one more JSON-RPC round trip over the pipes, the other way round, and "
        f"its floor alone (a request and its answer to bench/floor.py's asyncio echo, same "
        f"rounds) is {fmt(floor, 2)} ms here: the extra is {fmt_ratio(ratio(extra, floor))} "
        f"that. In a `/write` call `in_progress` follows the answer by {fmt(after, 2)} ms. A "
        "profile of 300 asked against 300 unasked `/write` turns (cProfile, same sidecar "
        "build) counts per asked call ~7 more event-loop iterations, one more write "
        "syscall and one more line read and routed (sidecar/acp/stdio.py to the waiting "
        "future, then `ApprovalDesk._ask` resuming through its `_ask_client` task), and "
        "no new hot function: the cost is the wake-ups of a round trip on a loaded "
        "2-core host, which the target leaves no room for at this load."
    )


def _why_sandbox(spawn: dict[str, float]) -> str:
    steps = [
        (
            f"bwrap itself (`--ro-bind / / true`) {fmt(spawn[BWRAP] - spawn[TRUE], 1)} ms over `true`"
        ),
        f"its PID namespace {fmt(spawn[PID] - spawn[BWRAP], 1)} ms",
        f"the workspace mounts, IPC namespace and dropped capabilities "
        f"{fmt(spawn[MOUNTS] - spawn[PID], 1)} ms",
        f"the /bin/sh and env shims {fmt(spawn[WRAPPED] - spawn[MOUNTS], 1)} ms",
        f"bash {fmt(spawn[WORKSPACE] - spawn[WRAPPED], 1)} ms",
    ]
    return (
        "The cost is bubblewrap's own setup, which no sidecar code path controls: "
        + "; ".join(steps)
        + f". Even `off` (PID namespace only, the host's filesystem) takes "
        f"{fmt(spawn[OFF])} ms. A new mount and PID namespace per command is the price of "
        "the containment guarantee; what would remove it from every command but the first "
        "is one long-lived sandbox per session (a small init inside it forking each command "
        "on request), keeping the per-command kill of the namespace by other means."
    )


def _notes(m: Measured, spawn: dict[str, float]) -> list[str]:
    t = m.turns.turns
    auto = _p50(_ms([x.span for x in t[AUTO]]))
    late = _p50(_ms([x.tool_call for x in t[AUTO]])) - _p50(_ms([x.tool_call for x in t[ASK]]))
    return [
        "The approval figure is the difference between two whole turns of the same round, "
        "one asked and one not, on the same sidecar, less the client's answer (its read of "
        "the request, JSON parse and reply write), measured. The tool_call → in_progress "
        "segment is no measure of asking for `$ true`: unasked, the `tool_call` and "
        "`in_progress` notifications reach the client together only after the command's "
        "processes are spawned (their writes go out only after it, as the arrival times "
        f"show: the unasked `tool_call` arrives {fmt(late, 1)} ms later into the turn, p50), "
        "while an asked call's `tool_call` goes out as it waits for the answer. For `/write` "
        "(no process) the segment holds the ask alone.",
        f"Through the bash tool a `$ true` call takes {fmt(auto)} ms (tool_call → completed, "
        f"sandbox workspace) against {fmt(spawn[WORKSPACE])} ms for the same bwrap argv "
        f"spawned here: {fmt_ratio(ratio(auto, spawn[WORKSPACE]))}. Around the process the "
        "pipe backend (sidecar/agent/backends/pipe.py `run_command`) starts a second one, "
        "the watchdog `sh` (groups.py `Watchdog`), scans every /proc/N/stat once after the "
        "exit (`group_alive`: milliseconds on a busy host), and when bwrap's init is still "
        "dying then, stops the group in 20 ms polls (`stop_group`); then the tool result's "
        "events and transcript write.",
        "`sandbox: off` still runs every command in bubblewrap (its own PID namespace: no "
        "process may outlive it), so the through-the-agent ratio is workspace's mounts over "
        "off's; the bwrap cost itself is the command-start table's.",
    ]


def _plot(
    settings: Settings,
    m: Measured,
    spawn: dict[str, float],
    span: dict[str, float],
    peer: float,
    mcp_span: float,
    mcp_extra: float,
) -> str:
    t = m.turns.turns
    answer = _p50(_ms([x.answer_us for x in t[ASK] + t[ASK_WRITE]]))
    extra = [
        _p50(_paired(t[ASK], t[AUTO], lambda x: x.total)),
        _p50(_paired(t[ASK_WRITE], t[AUTO_WRITE], lambda x: x.total)),
        answer,
        _p50(_ms(m.turns.floor_us)),
    ]
    ladder = [name.split(" (")[0].removeprefix("floor: ")[:34] for name in LADDER]
    return plots.bar_panels(
        settings.out / "s10_features.png",
        {
            "Approval: what asking adds (p50 ms)": (
                ["$ true turn: ask − auto − answer", "/write turn: ask − auto − answer",
                 "the client's answer", "floor: a stdio round trip"],
                {"ms": [max(v, 1e-3) for v in extra]},
                "ms (log)",
            ),
            "Command start (p50 ms)": (ladder, {"spawned here": [spawn[n] for n in LADDER]}, "ms (log)"),
            "Through the agent (p50 ms)": (
                ["$ true call, workspace", "$ true call, off", "MCP: direct", "MCP: in the turn",
                 "MCP: added to a turn"],
                {"ms": [span[AUTO], span[TURN_OFF], peer, mcp_span, mcp_extra]},
                "ms (log)",
            ),
        },
    )  # fmt: skip
