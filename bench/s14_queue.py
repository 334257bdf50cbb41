"""Scenario 14: what the durable queue adds to a turn (issue 25, point 1: "queueing adds
<= 1 ms to a turn").

One sidecar over stdio (SQLite, every message durable), one idle session, the offline
model. Two kinds of turn, interleaved in shuffled batches so a noisy neighbour hurts both
alike: a plain `session/prompt`, and the same prompt with `_meta.queue: true`, which goes
through the queue (stored in the record, taken off it by the drain, stored again) and is
answered when its turn ends. Their p50 difference is what queueing costs a turn.
"""

from __future__ import annotations

from bench import plots
from bench.core import ScenarioResult, Settings, Stats, Table, Target, fmt, interleaved
from bench.pipes import PipeClient, initialize, new_session, prompt_params, sidecar_argv

KEY = "14"
TITLE = "The queue: a queued turn vs a plain one"
TARGET_MS = 1.0


def run(settings: Settings) -> ScenarioResult:
    result = ScenarioResult(KEY, TITLE)
    turns = settings.pick(40, 300, 600)
    rng = settings.rng(KEY)
    log = settings.scratch("s14/logs") / "sidecar.log"
    data_dir = settings.scratch("s14/data")
    workspace = settings.scratch("s14/workspace")
    with PipeClient(sidecar_argv(data_dir, "sqlite", "--no-checkpoints"), log) as client:
        initialize(client)
        sid = new_session(client, workspace)["sessionId"]

        def plain() -> float:
            us, answer = client.timed("session/prompt", prompt_params(sid, "hello"))
            assert answer["stopReason"] == "end_turn"
            return us / 1000

        def queued() -> float:
            params = prompt_params(sid, "hello") | {"_meta": {"queue": True}}
            us, answer = client.timed("session/prompt", params)
            assert answer["stopReason"] == "end_turn"
            return us / 1000

        for _ in range(10):  # warm: the first turns load what later ones reuse
            plain()
            queued()
        samples = interleaved(rng, {"plain": plain, "queued": queued}, turns, batch=20)
    a, b = Stats.of(samples["plain"]), Stats.of(samples["queued"])
    added = b.p50 - a.p50
    result.tables.append(
        Table(
            f"A turn over stdio (offline model, SQLite), {turns} of each, interleaved; ms",
            ["turn", "n", "p50", "p99", "max"],
            [
                ["`session/prompt`", str(a.n), fmt(a.p50, 2), fmt(a.p99, 2), fmt(a.high, 2)],
                [
                    "`session/prompt` with `_meta.queue: true`",
                    str(b.n),
                    fmt(b.p50, 2),
                    fmt(b.p99, 2),
                    fmt(b.high, 2),
                ],
            ],
        )
    )
    met = added <= TARGET_MS
    result.targets.append(
        Target(
            "what queueing adds to a turn (p50 difference)",
            f"≤ {TARGET_MS:.0f} ms",
            f"{fmt(added, 2)} ms ({fmt(b.p50, 2)} vs {fmt(a.p50, 2)} ms)",
            met,
            ""
            if met
            else "two unfenced record writes (queued, taken off) and the drain's task hop",
        )
    )
    result.notes.append(
        "A queued turn writes the record twice more than a plain one (the message queued, "
        "then taken off the queue as its turn starts) and starts from the drain task; the "
        "queue is one small JSON column, so neither write grows with the transcript."
    )
    result.plots.append(
        plots.cdfs(
            settings.out / "s14_queue.png",
            {"a turn": {"plain": samples["plain"], "queued": samples["queued"]}},
            "ms",
        )
    )
    result.summary = f"queueing adds {fmt(added, 2)} ms p50 to a {fmt(a.p50, 2)} ms turn"
    result.raw = {"plain_ms": a.as_dict(), "queued_ms": b.as_dict(), "added_ms": added}
    return result
