"""Crash safety: SIGKILL the sidecar at random moments of a random workload, restart, check.

Every round starts a real `python -m sidecar` on one data dir, first checks what the
previous round's crash left behind (`CrashRun.verify`), then runs a seeded random workload
with several requests in flight (creates in every mode and backend, plain, slow and tool
turns, closes, cancels, resumes, deletes, set_mode) and kills the sidecar with SIGKILL at a
random moment. Some rounds kill at a chosen moment instead: while a tool call's command is
running, or while a close is stopping a turn. A ledger of everything the client got a
success response for says what must survive:

- the store opens (the next sidecar answers `initialize`);
- an acknowledged create exists, an acknowledged delete stays gone; a session the client
  never heard of can only come from a create that got no answer (and is empty);
- nothing observed or acknowledged is lost: the transcript read after the previous restart
  is a prefix of the new one, every acknowledged prompt's user message is there (in
  acknowledgement order) followed by the reply the client got, a refused prompt left
  nothing, every user message is one the client sent; mode and generation are ones the
  client was told of (or asked for without an answer);
- nothing is live before anyone resumes: every session is `live: false`, `http: null`,
  `closed` or `error`;
- `interrupted` is true exactly when the transcript ends with the interrupted marker; a
  marker is appended only for a session that had a prompt in flight when the sidecar died,
  right after that prompt's user message; a turn whose user message was stored, that got no
  reply and that the client did not close or cancel, is marked interrupted;
- `messageCount` equals the number of messages `_session/messages` returns;
- sessions can be resumed: a sample each round (every session in the last check), each
  takes one prompt and closes again.

The run is bounded by time, not rounds: CRASH_ROUNDS_SECONDS (default 45) of rounds, then a
final check. The seed is printed; CRASH_SEED replays its choices (the kill lands wherever
the timing puts it, so a replay is close, not identical). A longer local run:

    CRASH_ROUNDS_SECONDS=600 .venv/bin/pytest -s tests/test_crash_recovery.py
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import harness
import pytest
from harness import Sidecar, eventually

from desktop.client import RpcError
from protocol.errors import ErrorCode

ROUNDS_SECONDS = float(os.environ.get("CRASH_ROUNDS_SECONDS") or 45)
SEED = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
MAX_SESSIONS = 14
RESUME_SAMPLE = 3
MODES = ("craft", "plan", "ask")
BACKENDS = ("pipe", "pty")
# A stopped command gets SIGINT, then 1 s later SIGTERM: a close of a command that ignores
# SIGINT stays in `closing` long enough to be killed there.
SIDECAR_ARGS = ("--interrupt-grace", "1", "--kill-grace", "0.5")

pytestmark = pytest.mark.timeout(ROUNDS_SECONDS + 240)

# Refusals a racing client can get. Each is raised before the operation writes anything.
RACE_ERRORS = frozenset(
    {
        ErrorCode.SESSION_NOT_FOUND,
        ErrorCode.SESSION_BUSY,
        ErrorCode.RUNTIME_LIVE,
        ErrorCode.SESSION_NOT_LIVE,
        ErrorCode.INVALID_STATE,
    }
)


def is_marker(message: dict[str, Any]) -> bool:
    return message.get("type") == "marker" and message.get("kind") == "interrupted"


def is_final_reply(message: dict[str, Any]) -> bool:
    return message.get("type") == "assistant" and not message.get("toolCalls")


def describe_process(pid: int) -> str:
    """pid, state, parent and command line (what a survivor was, for the failure)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} state {stat[0]} ppid {stat[1]}: {argv[:200]}"


def last_traceback(log: list[str]) -> str:
    """The last traceback in a log tail with the line before it (what was being done)."""
    starts = [i for i, line in enumerate(log) if line.startswith("Traceback")]
    if not starts:
        return f"(no traceback in the last {len(log)} log lines)"
    begin = max(starts[-1] - 1, 0)
    return "\n".join(log[begin : begin + 60])


def marked_processes(marker: str) -> list[int]:
    return harness.marked_processes("CRASH_MARKER", marker)


@dataclass
class Prompt:
    text: str
    sid: str
    round: int
    outcome: str = "pending"  # pending -> ok | refused | failed | unanswered (sidecar died)
    stop_reason: str | None = None
    response: str | None = None
    ack: int = -1  # order of acknowledgement, over the whole run
    cut: bool = False  # a close or cancel of its session was sent while it was unanswered


@dataclass
class Tracked:
    """What the client knows of one session."""

    sid: str
    mode: str  # the last acknowledged mode
    generation: int  # the last acknowledged or observed generation
    live: bool = False  # the client's belief, for picking actions
    reserved: bool = False  # used by a scripted kill this round; workers leave it alone
    deleted: bool = False  # delete acknowledged
    delete_unanswered: bool = False
    modes_asked: list[str] = field(default_factory=list)  # set_mode values not answered
    resumes_unanswered: int = 0
    cutting: int = 0  # closes and cancels in flight
    turn_started: bool = False  # a prompt was answered this round (so interrupted was reset)
    interrupted: bool = False  # as last observed
    transcript: list[dict[str, Any]] = field(default_factory=list)  # as last observed
    prompts: list[Prompt] = field(default_factory=list)


@dataclass
class Round:
    number: int
    kind: str  # random | tool | close
    creates_sent: int = 0
    creates_answered: int = 0
    in_flight_at_kill: set[str] = field(default_factory=set)  # sessions with a prompt unanswered
    scripted: tuple[str, str] | None = None  # (session id, prompt text) of a scripted kill
    scripted_tasks: list[asyncio.Future[None]] = field(default_factory=list)
    close_answered_before_kill: bool = False


class CrashRun:
    def __init__(self, data_dir: Path, workspace: Path) -> None:
        self.data_dir = data_dir
        self.workspace = workspace
        self.rng = random.Random(SEED)
        self.marker = uuid.uuid4().hex
        self.sessions: dict[str, Tracked] = {}
        self.prompts: dict[str, Prompt] = {}
        self.stats: Counter[str] = Counter()
        self.problems: list[str] = []
        self.round = Round(0, "none")
        self._tokens = itertools.count(1)
        self._acks = itertools.count()

    # ---- helpers ---------------------------------------------------------------------------

    def where(self) -> str:
        return f"[seed {SEED}, round {self.round.number} ({self.round.kind})]"

    def fail(self, message: str) -> NoReturn:
        raise AssertionError(f"{self.where()} {message}")

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)

    def unexpected(self, action: str, error: BaseException, sidecar: Sidecar | None = None) -> None:
        problem = f"{action}: {error!r}"
        if sidecar is not None and isinstance(error, RpcError) and error.code == -32603:
            # An internal error is a bug: keep the sidecar's traceback with it (the log
            # rolls on, and the sidecar may be killed before the run ends).
            problem += "\n" + last_traceback(list(sidecar.client.stderr_tail))
        self.problems.append(problem)

    async def start(self) -> Sidecar:
        try:
            return await Sidecar.start(
                self.data_dir, *SIDECAR_ARGS, env={"CRASH_MARKER": self.marker}
            )
        except (ConnectionError, TimeoutError, RpcError) as exc:
            self.fail(f"the store did not open after the crash: initialize failed with {exc!r}")

    def track(self, summary: dict[str, Any], *, live: bool) -> Tracked:
        tracked = Tracked(
            sid=summary["sessionId"],
            mode=summary["mode"],
            generation=summary["generation"],
            live=live,
        )
        self.sessions[tracked.sid] = tracked
        return tracked

    def pool(self) -> list[Tracked]:
        return [
            t
            for t in self.sessions.values()
            if not (t.deleted or t.delete_unanswered or t.reserved)
        ]

    def new_prompt(self, tracked: Tracked, text: str) -> Prompt:
        assert text not in self.prompts
        prompt = Prompt(text, tracked.sid, self.round.number, cut=tracked.cutting > 0)
        self.prompts[text] = prompt
        tracked.prompts.append(prompt)
        return prompt

    async def transcript(self, sidecar: Sidecar, sid: str, count: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            page = await sidecar.messages(sid, offset=len(messages), limit=1000)
            self.check(
                page["total"] == count,
                f"{sid}: _session/messages says total {page['total']}, the summary says "
                f"messageCount {count}",
            )
            messages.extend(page["messages"])
            if not page["messages"]:
                return messages

    async def list_all(self, sidecar: Sidecar) -> dict[str, dict[str, Any]]:
        listed: dict[str, dict[str, Any]] = {}
        params: dict[str, Any] = {}
        while True:
            page = await sidecar.call("session/list", params)
            for entry in page["sessions"]:
                listed[entry["sessionId"]] = entry["_meta"]
            if "nextCursor" not in page:
                return listed
            params = {"cursor": page["nextCursor"]}

    # ---- the workload ----------------------------------------------------------------------

    async def worker(self, sidecar: Sidecar, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.step(sidecar)
                await asyncio.sleep(self.rng.uniform(0, 0.03))
            except ConnectionError:  # the sidecar is gone: this worker's round is over
                return
            except TimeoutError as exc:
                self.unexpected("a request got no answer in time", exc)
                return

    async def step(self, sidecar: Sidecar) -> None:
        pool = self.pool()
        live = [t for t in pool if t.live]
        idle = [t for t in live if not any(p.outcome == "pending" for p in t.prompts)]
        busy = [t for t in live if t not in idle]
        closed = [t for t in pool if not t.live]
        choices: list[tuple[str, float]] = [("read", 0.5)]
        if len(pool) < MAX_SESSIONS:
            choices.append(("create", 3))
        if idle:
            choices += [("prompt", 8), ("set_mode", 1)]
        if busy:
            choices += [("prompt_busy", 0.5), ("cancel", 0.7)]
        if live:
            choices.append(("close", 2))
        if closed:
            choices += [("resume", 3), ("delete", 1.5 if len(pool) > 5 else 0.3)]
        action = self.rng.choices([c for c, _ in choices], [w for _, w in choices])[0]
        pick = self.rng.choice
        if action == "create":
            await self.create(sidecar)
        elif action == "prompt":
            await self.prompt(sidecar, pick(idle))
        elif action == "prompt_busy":
            await self.prompt(sidecar, pick(busy))
        elif action == "set_mode":
            await self.set_mode(sidecar, pick(idle))
        elif action == "cancel":
            await self.cut(sidecar, pick(busy), "session/cancel")
        elif action == "close":
            await self.cut(sidecar, pick(live), "session/close")
        elif action == "resume":
            await self.resume(sidecar, pick(closed))
        elif action == "delete":
            await self.delete(sidecar, pick(closed))
        else:
            await self.read(sidecar, pool)

    async def create(self, sidecar: Sidecar, *, mode: str | None = None) -> Tracked | None:
        mode = mode or self.rng.choice(MODES)
        backend = self.rng.choice(BACKENDS)
        self.round.creates_sent += 1
        try:
            summary = await sidecar.new_session(
                self.workspace, mode=mode, backend=backend, title=f"round {self.round.number}"
            )
        except RpcError as exc:
            self.round.creates_answered += 1
            if exc.code == ErrorCode.RUNTIME_FAILED:  # the record stays, in error
                sid = exc.data["sessionId"]
                self.sessions[sid] = Tracked(sid, mode, 1)
            self.unexpected("session/new", exc, sidecar)
            return None
        self.round.creates_answered += 1
        self.stats["sessions created"] += 1
        return self.track(summary, live=True)

    def prompt_text(self) -> str:
        token = f"r{self.round.number}t{next(self._tokens)}"
        kind = self.rng.choices(["echo", "tool", "tool_sleep", "slow"], [4, 3, 1, 2])[0]
        return {
            "echo": f"hello {token}",
            "tool": f"$ echo {token}",
            "tool_sleep": f"$ sleep 0.3; echo done {token}",
            "slow": f"/sleep 0.5 {token}",
        }[kind]

    async def prompt(self, sidecar: Sidecar, tracked: Tracked, text: str | None = None) -> None:
        prompt = self.new_prompt(tracked, text or self.prompt_text())
        params = {"sessionId": tracked.sid, "prompt": [{"type": "text", "text": prompt.text}]}
        try:
            result = await sidecar.call("session/prompt", params)
        except RpcError as exc:
            if exc.code in RACE_ERRORS:
                prompt.outcome = "refused"
                self.stats["prompts refused"] += 1
            else:
                prompt.outcome = "failed"
                self.unexpected(f"session/prompt {prompt.text!r}", exc, sidecar)
            if exc.code == ErrorCode.SESSION_NOT_LIVE:
                tracked.live = False
            return
        prompt.outcome = "ok"
        prompt.stop_reason = result["stopReason"]
        prompt.response = result["_meta"]["response"]
        prompt.ack = next(self._acks)
        tracked.turn_started = True
        self.stats["turns acknowledged"] += 1

    async def cut(self, sidecar: Sidecar, tracked: Tracked, method: str) -> None:
        """session/close or session/cancel: may end a turn without a reply."""
        tracked.cutting += 1
        for prompt in tracked.prompts:
            if prompt.outcome == "pending":
                prompt.cut = True
        try:
            await sidecar.call(method, {"sessionId": tracked.sid})
        except RpcError as exc:
            if exc.code not in RACE_ERRORS:
                self.unexpected(method, exc, sidecar)
            return
        finally:
            tracked.cutting -= 1
        if method == "session/close":
            tracked.live = False
            self.stats["closes acknowledged"] += 1

    async def resume(self, sidecar: Sidecar, tracked: Tracked) -> None:
        tracked.resumes_unanswered += 1
        try:
            result = await sidecar.call(
                "session/resume", {"sessionId": tracked.sid, "cwd": str(self.workspace)}
            )
        except RpcError as exc:
            if exc.code != ErrorCode.RUNTIME_FAILED:  # that one may have begun a generation
                tracked.resumes_unanswered -= 1
            if exc.code == ErrorCode.RUNTIME_LIVE:
                tracked.live = True
            if exc.code not in RACE_ERRORS:
                self.unexpected("session/resume", exc, sidecar)
            return
        tracked.resumes_unanswered -= 1
        tracked.generation = max(tracked.generation, result["_meta"]["generation"])
        tracked.live = True
        self.stats["resumes acknowledged"] += 1

    async def delete(self, sidecar: Sidecar, tracked: Tracked) -> None:
        tracked.delete_unanswered = True
        try:
            await sidecar.call("session/delete", {"sessionId": tracked.sid})
        except RpcError as exc:
            tracked.delete_unanswered = False
            if exc.code == ErrorCode.RUNTIME_LIVE:
                tracked.live = True
            if exc.code not in RACE_ERRORS:
                self.unexpected("session/delete", exc, sidecar)
            return
        tracked.delete_unanswered = False
        tracked.deleted = True
        self.stats["deletes acknowledged"] += 1

    async def set_mode(self, sidecar: Sidecar, tracked: Tracked) -> None:
        mode = self.rng.choice(MODES)
        tracked.modes_asked.append(mode)
        try:
            await sidecar.call("session/set_mode", {"sessionId": tracked.sid, "modeId": mode})
        except RpcError as exc:
            tracked.modes_asked.remove(mode)
            if exc.code not in RACE_ERRORS:
                self.unexpected("session/set_mode", exc, sidecar)
            return
        tracked.modes_asked.remove(mode)
        tracked.mode = mode
        self.stats["set_mode acknowledged"] += 1

    async def read(self, sidecar: Sidecar, pool: list[Tracked]) -> None:
        try:
            if pool and self.rng.random() < 0.7:
                tracked = self.rng.choice(pool)
                await sidecar.status(tracked.sid)
                await sidecar.messages(tracked.sid)
            else:
                await self.list_all(sidecar)
        except RpcError as exc:
            if exc.code != ErrorCode.SESSION_NOT_FOUND:  # a delete may have raced the read
                self.unexpected("read", exc, sidecar)

    # ---- scripted kill moments -------------------------------------------------------------

    async def running_command(self, sidecar: Sidecar, name: str, command: str) -> Tracked:
        """A reserved session whose turn is running `command` (which writes `name` first)."""
        # craft: the command writes its pid file, which plan mode's read-only sandbox refuses.
        tracked = await self.create(sidecar, mode="craft")
        assert tracked is not None, self.problems
        tracked.reserved = True
        text = f"$ echo $$ > {name}; {command}"
        turn = asyncio.ensure_future(self.prompt(sidecar, tracked, text))
        self.round.scripted_tasks.append(turn)
        self.round.scripted = (tracked.sid, text)

        def tool_call(method: str, params: dict[str, Any]) -> bool:
            return (
                method == "session/update"
                and params.get("sessionId") == tracked.sid
                and params["update"].get("sessionUpdate") == "tool_call"
            )

        await sidecar.wait_for(tool_call)
        self.check(
            await eventually(lambda: (self.workspace / name).exists(), 20),
            f"the command of {text!r} never started",
        )
        self.check(not turn.done(), f"{text!r} ended before the kill: {self.prompts[text]}")
        return tracked

    async def arrange_tool_kill(self, sidecar: Sidecar) -> None:
        name = f"tool-{self.round.number}.pid"
        await self.running_command(sidecar, name, f"sleep 5; echo finished {name}")

    async def arrange_close_kill(self, sidecar: Sidecar) -> None:
        # The command ignores SIGINT, so the close waits --interrupt-grace before SIGTERM.
        name = f"close-{self.round.number}.pid"
        tracked = await self.running_command(sidecar, name, "trap '' INT; sleep 5")
        close = asyncio.ensure_future(self.cut(sidecar, tracked, "session/close"))
        self.round.scripted_tasks.append(close)
        await sidecar.wait_state(tracked.sid, "closing")
        self.round.close_answered_before_kill = close.done()

    # ---- one round -------------------------------------------------------------------------

    async def run_round(self, sidecar: Sidecar, number: int, kind: str) -> None:
        self.round = Round(number, kind)
        stop = asyncio.Event()
        workers = [
            asyncio.ensure_future(self.worker(sidecar, stop)) for _ in range(self.rng.randint(2, 5))
        ]
        if kind == "tool":
            await self.arrange_tool_kill(sidecar)
        elif kind == "close":
            await self.arrange_close_kill(sidecar)
        elif self.rng.random() < 0.15:
            await asyncio.sleep(self.rng.uniform(0, 0.05))  # while the first requests land
        else:
            await asyncio.sleep(self.rng.uniform(0.05, 2.0))
        stop.set()
        self.round.in_flight_at_kill = {
            p.sid for p in self.prompts.values() if p.outcome == "pending"
        }
        sidecar.sigkill()
        if self.round.in_flight_at_kill:
            self.stats["kills during a turn"] += 1
        await asyncio.wait_for(sidecar.client.process.wait(), 10)
        await asyncio.wait_for(asyncio.gather(*workers), 20)
        # The scripted turn and close end with the sidecar (ConnectionError).
        await asyncio.gather(*self.round.scripted_tasks, return_exceptions=True)
        # Each command's watchdog stops its process group once the sidecar is gone.
        # A loaded machine may take a while to run the watchdogs: wait generously.
        await eventually(lambda: marked_processes(self.marker) == [], timeout=15)
        survivors = [describe_process(pid) for pid in marked_processes(self.marker)]
        self.reap_orphans()
        self.check(not survivors, f"processes outlived the killed sidecar: {survivors}")
        await sidecar.wait_exit()
        for prompt in self.prompts.values():
            if prompt.outcome == "pending":
                prompt.outcome = "unanswered"
                self.stats["prompts unanswered at the kill"] += 1
        self.check(not self.problems, f"unexpected errors during the workload: {self.problems}")

    def reap_orphans(self) -> None:
        """Stop what carries this run's marker: after a failure, the sidecar itself or
        commands that outlived it (counted; the check above fails the run)."""
        for pid in marked_processes(self.marker):
            self.stats["processes that outlived a killed sidecar"] += 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    # ---- checks after a restart ------------------------------------------------------------

    async def verify(self, sidecar: Sidecar, *, resume_all: bool = False) -> None:
        listed = await self.list_all(sidecar)
        for tracked in list(self.sessions.values()):
            sid = tracked.sid
            if tracked.deleted:
                self.check(sid not in listed, f"{sid}: deleted (acknowledged) but listed again")
                with pytest.raises(RpcError) as gone:
                    await sidecar.status(sid)
                self.check(
                    gone.value.code == ErrorCode.SESSION_NOT_FOUND,
                    f"{sid}: deleted (acknowledged) but _session/status says {gone.value!r}",
                )
            elif tracked.delete_unanswered:
                tracked.delete_unanswered = False
                tracked.deleted = sid not in listed
            else:
                self.check(
                    sid in listed,
                    f"{sid}: its create (or an earlier check) was acknowledged, but it is gone",
                )
        strangers = [sid for sid in listed if sid not in self.sessions]
        unanswered = self.round.creates_sent - self.round.creates_answered
        self.check(
            len(strangers) <= unanswered,
            f"{len(strangers)} unknown sessions after the restart, but only {unanswered} "
            f"creates went unanswered: {strangers}",
        )
        for sid in strangers:
            summary = listed[sid]
            self.check(
                summary["messageCount"] == 0 and summary["interrupted"] is False,
                f"{sid}: a session from an unanswered create has history: {summary}",
            )
            self.track(summary, live=False)
            self.stats["sessions from unanswered creates"] += 1

        to_resume: list[Tracked] = []
        for sid, entry in listed.items():
            tracked = self.sessions[sid]
            if await self.check_session(sidecar, tracked, entry):
                to_resume.append(tracked)
        rest = [t for sid in listed if (t := self.sessions[sid]) not in to_resume]
        if resume_all:
            to_resume += rest
        else:
            to_resume += self.rng.sample(rest, min(RESUME_SAMPLE, len(rest)))
        await asyncio.gather(*(self.resume_check(sidecar, t) for t in to_resume))

    async def check_session(
        self, sidecar: Sidecar, tracked: Tracked, entry: dict[str, Any]
    ) -> bool:
        """Check one session after a restart; True if it must be resumed (noteworthy)."""
        sid = tracked.sid
        status = await sidecar.status(sid)
        self.check(status == entry, f"{sid}: session/list {entry} != _session/status {status}")
        self.check(
            status["live"] is False and status["http"] is None,
            f"{sid}: shown live right after a restart, before any resume: {status}",
        )
        self.check(
            status["status"] in ("closed", "error"),
            f"{sid}: status {status['status']!r} right after a restart (expected closed/error)",
        )
        self.check(
            status["mode"] in {tracked.mode, *tracked.modes_asked},
            f"{sid}: mode {status['mode']!r}, but the last acknowledged mode is "
            f"{tracked.mode!r} (unanswered set_mode: {tracked.modes_asked})",
        )
        low, high = tracked.generation, tracked.generation + tracked.resumes_unanswered
        self.check(
            low <= status["generation"] <= high,
            f"{sid}: generation {status['generation']}, expected {low}..{high}",
        )
        messages = await self.transcript(sidecar, sid, status["messageCount"])
        self.check(
            len(messages) == status["messageCount"],
            f"{sid}: messageCount {status['messageCount']} but _session/messages returned "
            f"{len(messages)} messages",
        )
        known = tracked.transcript
        self.check(
            messages[: len(known)] == known,
            f"{sid}: messages read after an earlier restart were lost or rewritten:\n"
            f"before: {known}\nnow:    {messages}",
        )
        self.check_prompts(tracked, messages)
        noteworthy = self.check_interrupted(tracked, status, messages)
        if self.round.scripted and self.round.scripted[0] == sid:
            self.check_scripted(status, messages)
            noteworthy = True
        tracked.transcript = messages
        tracked.interrupted = status["interrupted"]
        tracked.generation = status["generation"]
        tracked.resumes_unanswered = 0
        tracked.mode = status["mode"]
        tracked.modes_asked.clear()
        tracked.live = tracked.reserved = tracked.turn_started = False
        return noteworthy or status["status"] == "error"

    def check_prompts(self, tracked: Tracked, messages: list[dict[str, Any]]) -> None:
        sid = tracked.sid
        users = [(i, m["text"]) for i, m in enumerate(messages) if m["type"] == "user"]
        index = {text: i for i, text in users}
        self.check(len(index) == len(users), f"{sid}: a user message is stored twice: {users}")
        for _, text in users:
            prompt = self.prompts.get(text)
            self.check(
                prompt is not None and prompt.sid == sid,
                f"{sid}: user message {text!r} was never sent to this session",
            )
        starts = sorted(index.values())
        for prompt in tracked.prompts:
            if prompt.outcome == "refused":
                self.check(
                    prompt.text not in index,
                    f"{sid}: the refused prompt {prompt.text!r} left a user message",
                )
            elif (
                prompt.text in index
                and prompt.outcome == "unanswered"
                and prompt.round == self.round.number
            ):
                self.stats["unanswered prompts whose user message was stored"] += 1
            if prompt.outcome != "ok":
                continue
            self.check(
                prompt.text in index,
                f"{sid}: the acknowledged prompt {prompt.text!r} (reply {prompt.response!r}) "
                f"is missing from the transcript {messages}",
            )
            if prompt.stop_reason != "end_turn":
                continue
            start = index[prompt.text]
            end = next((s for s in starts if s > start), len(messages))
            self.check(
                any(
                    is_final_reply(m) and m["text"] == prompt.response
                    for m in messages[start + 1 : end]
                ),
                f"{sid}: the acknowledged reply {prompt.response!r} to {prompt.text!r} is "
                f"missing: {messages[start:end]}",
            )
        acked = sorted((p for p in tracked.prompts if p.outcome == "ok"), key=lambda p: p.ack)
        order = [index[p.text] for p in acked]
        self.check(
            order == sorted(order),
            f"{sid}: acknowledged prompts stored out of order: {[p.text for p in acked]}",
        )

    def check_interrupted(
        self, tracked: Tracked, status: dict[str, Any], messages: list[dict[str, Any]]
    ) -> bool:
        sid = tracked.sid
        interrupted = status["interrupted"]
        ends_with_marker = bool(messages) and is_marker(messages[-1])
        self.check(
            interrupted == ends_with_marker,
            f"{sid}: interrupted={interrupted} but the transcript "
            f"{'ends' if ends_with_marker else 'does not end'} with the interrupted marker: "
            f"{messages[-3:]}",
        )
        new_markers = [
            i for i, m in enumerate(messages) if is_marker(m) and i >= len(tracked.transcript)
        ]
        in_flight = sid in self.round.in_flight_at_kill
        self.check(
            len(new_markers) <= 1 and (in_flight or not new_markers),
            f"{sid}: {len(new_markers)} interrupted markers appended by one restart, with "
            f"{'a' if in_flight else 'no'} prompt in flight at the kill: {messages}",
        )
        if not in_flight:
            expected = False if tracked.turn_started else tracked.interrupted
            self.check(
                interrupted == expected,
                f"{sid}: interrupted={interrupted}, expected {expected}: no prompt was in "
                f"flight at the kill",
            )
        users = [i for i, m in enumerate(messages) if m["type"] == "user"]
        if new_markers:
            self.stats["interrupted sessions found"] += 1
            last_user = messages[users[-1]]["text"] if users else None
            prompt = self.prompts.get(last_user or "")
            self.check(
                prompt is not None
                and prompt.round == self.round.number
                and prompt.outcome == "unanswered",
                f"{sid}: flagged interrupted, but the user message before the marker "
                f"({last_user!r}) is not the prompt that was in flight at the kill: "
                f"{messages[-4:]}. A kill between the `running` write and the user-message "
                f"write (two transactions in SessionRuntime._start_turn) would do this.",
            )
        if users:
            last = users[-1]
            answered = any(is_final_reply(m) for m in messages[last + 1 :])
            prompt = self.prompts[messages[last]["text"]]
            excused = prompt.cut or prompt.stop_reason == "cancelled"
            if not answered and not excused and status["status"] != "error":
                self.check(
                    interrupted and ends_with_marker,
                    f"{sid}: the turn {prompt.text!r} has no reply, was not closed or "
                    f"cancelled, yet the session is not marked interrupted: "
                    f"{status} {messages[last:]}",
                )
            if new_markers and answered:
                self.stats["markers after a complete reply"] += 1
        return bool(new_markers)

    def check_scripted(self, status: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        assert self.round.scripted is not None
        sid, text = self.round.scripted
        if self.round.kind == "tool":
            self.check(
                status["interrupted"] is True and status["status"] == "closed",
                f"{sid}: killed while `{text}` ran, but not closed+interrupted: {status}",
            )
            tail = messages[-3:]
            self.check(
                len(tail) == 3
                and tail[0] == {**tail[0], "type": "user", "text": text}
                and tail[1]["type"] == "assistant"
                and bool(tail[1].get("toolCalls"))
                and is_marker(tail[2]),
                f"{sid}: killed while `{text}` ran; expected user, assistant tool call, "
                f"marker at the end, got {tail}",
            )
            self.stats["kills while a command ran"] += 1
        else:
            self.check(
                status["status"] == "closed" and status["interrupted"] is False,
                f"{sid}: killed while closing (only `running` is flagged interrupted), got "
                f"{status}",
            )
            users = [m for m in messages if m["type"] == "user"]
            self.check(
                bool(users) and users[-1]["text"] == text and not is_marker(messages[-1]),
                f"{sid}: killed while closing during {text!r}; transcript {messages[-3:]}",
            )
            if not self.round.close_answered_before_kill:
                self.stats["kills during a close"] += 1

    async def resume_check(self, sidecar: Sidecar, tracked: Tracked) -> None:
        sid = tracked.sid
        try:
            result = await sidecar.call(
                "session/resume", {"sessionId": sid, "cwd": str(self.workspace)}
            )
        except RpcError as exc:
            self.fail(f"{sid}: resume after the restart failed: {exc!r}")
        summary = result["_meta"]
        self.check(
            summary["status"] == "idle"
            and summary["live"] is True
            and summary["generation"] == tracked.generation + 1
            and summary["messageCount"] == len(tracked.transcript),
            f"{sid}: resumed as {summary}, expected idle, live, generation "
            f"{tracked.generation + 1}, {len(tracked.transcript)} messages",
        )
        prompt = self.new_prompt(tracked, f"check r{self.round.number} {sid}")
        try:
            reply = await sidecar.prompt(sid, prompt.text)
        except RpcError as exc:
            self.fail(f"{sid}: a prompt after resuming failed: {exc!r}")
        prompt.outcome, prompt.ack = "ok", next(self._acks)
        prompt.stop_reason, prompt.response = reply["stopReason"], reply["_meta"]["response"]
        self.check(
            (prompt.stop_reason, prompt.response) == ("end_turn", f"Echo: {prompt.text}"),
            f"{sid}: the first turn after resuming answered {reply}",
        )
        after = await sidecar.status(sid)
        self.check(
            after["status"] == "idle" and after["interrupted"] is False,
            f"{sid}: after a turn: {after}",
        )
        closed = (await sidecar.call("session/close", {"sessionId": sid}))["_meta"]
        self.check(
            closed["status"] == "closed" and closed["live"] is False,
            f"{sid}: close after the check: {closed}",
        )
        messages = await self.transcript(sidecar, sid, closed["messageCount"])
        self.check(
            messages[: len(tracked.transcript)] == tracked.transcript
            and [(m["type"], m["text"]) for m in messages[len(tracked.transcript) :]]
            == [("user", prompt.text), ("assistant", prompt.response)],
            f"{sid}: transcript after resume + one turn: {messages[len(tracked.transcript) - 2 :]}",
        )
        tracked.transcript = messages
        tracked.generation += 1
        tracked.interrupted = False
        self.stats["resumes checked"] += 1

    # ---- the whole run ---------------------------------------------------------------------

    async def run(self) -> str:
        began = time.monotonic()
        kinds = {1: "tool", 2: "close"}
        number = 0
        longest = 0.0
        sidecar = await self.start()
        while True:
            round_began = time.monotonic()
            number += 1
            kind = kinds.get(number % 6 if number > 6 else number, "random")
            self.stats[f"{kind} rounds"] += 1
            await self.run_round(sidecar, number, kind)
            sidecar = await self.start()
            await self.verify(sidecar)
            longest = max(longest, time.monotonic() - round_began)
            if time.monotonic() - began + longest > ROUNDS_SECONDS:
                break
        # The last check: every session resumes, then a clean stop.
        self.round = Round(number + 1, "final")
        await self.verify(sidecar, resume_all=True)
        self.check(
            await sidecar.close() == 0, f"clean exit failed: {list(sidecar.client.stderr_tail)}"
        )
        alive = [t for t in self.sessions.values() if not t.deleted]
        lines = [
            f"crash recovery: seed {SEED} (CRASH_SEED to replay), {number} rounds in "
            f"{time.monotonic() - began:.1f} s, {len(alive)} sessions at the end",
            *(f"  {name}: {count}" for name, count in sorted(self.stats.items())),
        ]
        return "\n".join(lines)


async def test_sigkill_at_random_moments_loses_nothing_acknowledged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    with capsys.disabled():
        print(f"\ncrash recovery: seed {SEED}, {ROUNDS_SECONDS:g} s of rounds")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    run = CrashRun(tmp_path / "data", workspace)
    try:
        report = await run.run()
    except BaseException:
        print(f"crash recovery: seed {SEED}, stats so far {dict(run.stats)}")
        raise
    finally:
        run.reap_orphans()
    record_property("crash_recovery", report)
    with capsys.disabled():
        print(f"\n{report}")
