"""Faults between hosts on one PostgreSQL database: three real sidecars (host ids alpha,
beta, gamma), a seeded random workload on shared sessions, and faults at random moments.

The workload: a few workers send create, prompt, resume, close, delete and reads to
random sidecars about random sessions (so most requests race another host). Between
the operations, in a shuffled order, come the faults:

- SIGKILL of a sidecar that holds sessions, often with a turn in flight; it is started
  again under the same host id (its reconciliation takes back what it held at once:
  same host, dead pid);
- SIGSTOP of a holder, often in the middle of a slow turn, until another host takes the
  session over (only the lease's expiry on the database's clock allows that), then
  SIGCONT and a prompt to the woken, superseded holder;
- `pg_ctl restart` of the database while requests are in flight;
- `pg_terminate_backend` of every connection the sidecars have.

A ledger of what the clients got a success answer for says what must hold, checked
while the run goes on (from the store's rows, read over a connection of the test's
own) and at the end (through the sidecars):

- never two runtimes for one generation: every `live: true` seen anywhere (results,
  status, list entries, `_session/state`) names one process per (session, generation),
  and a live row's lease owner is that process; at the end, after the faults, at most
  one sidecar calls a session live and it is the row's holder, as `heldBy` on the
  others says;
- nothing acknowledged lost: an acknowledged create exists unless a delete was sent,
  an acknowledged delete stays deleted (on every sidecar and in the rows), every
  acknowledged prompt's text is in its session's transcript, in acknowledgement order,
  followed by the reply the client got; every user message is one sent to that session;
- no write from a superseded holder: the prompt sent to a woken holder after the
  takeover is refused and never stored, and the reply of the turn it was running when
  it froze never lands;
- a store error (-32046) only while a fault is on (or shortly after: a frozen holder's
  transaction keeps its row locks until the server ends it), never otherwise; every
  session left can be closed, resumed elsewhere and prompted.

Bounded by operations (PG_CHAOS_OPERATIONS, default 240), not time. The seed is printed;
PG_CHAOS_SEED replays the choices (where a kill lands is up to the timing, so a replay
is close, not identical).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pg_sidecars
import psycopg
import pytest
from harness import Sidecar, eventually
from pg_server import PgServer
from test_crash_recovery import RACE_ERRORS, is_final_reply

from desktop.client import RpcError
from protocol.errors import ErrorCode

SEED = int(os.environ.get("PG_CHAOS_SEED") or random.SystemRandom().randrange(1 << 32))
OPERATIONS = int(os.environ.get("PG_CHAOS_OPERATIONS") or 240)
HOSTS = ("alpha", "beta", "gamma")
TTL = 2.0  # --lease-ttl: a frozen holder is taken over after this, on the database's clock
DB_TIMEOUT = 2.0  # --db-timeout: a lock waits this long; a frozen transaction ends at 2x
# A store error is excused this long after a fault ends (reconnects, locks of a frozen
# transaction, leases that ran out while the database was away).
AFTERMATH = 3 * DB_TIMEOUT + TTL + 2.0
MAX_SESSIONS = 9
WORKERS = 3
CALL_WAIT = 60.0  # a request may wait out a frozen sidecar or a restarting database
FAULTS = ("kill", "kill", "freeze", "freeze", "freeze", "restart database", "terminate backends")
SIDECAR_ARGS = ("--lease-ttl", f"{TTL:g}", "--db-timeout", f"{DB_TIMEOUT:g}")

pytestmark = pytest.mark.timeout(420)


@dataclass
class Slot:
    """One host: its sidecar process now (replaced when killed and started again)."""

    host: str
    sidecar: Sidecar
    up: bool = True  # running and not stopped: workers may send to it
    seen_upto: int = 0  # notifications already looked at


@dataclass
class Prompt:
    text: str
    sid: str
    host: str
    outcome: str = "pending"  # pending -> ok | refused | failed | unanswered
    stop_reason: str | None = None
    response: str | None = None  # the reply the client got (checked for an end_turn)
    ack: int = -1


@dataclass
class Tracked:
    """What the clients know of one session."""

    sid: str
    holder: str | None  # the host believed to run it (for picking actions)
    reserved: bool = False  # a fault is using it; workers leave it alone
    deleted: bool = False  # a delete was acknowledged
    deletes_sent: int = 0  # deletes without a clear refusal: it may be gone
    prompts: list[Prompt] = field(default_factory=list)
    # Texts a superseded holder tried to write: they must never be stored.
    fenced: list[str] = field(default_factory=list)

    @property
    def maybe_gone(self) -> bool:
        return self.deleted or self.deletes_sent > 0


class ChaosRun:
    def __init__(self, root: Path, workspace: Path, server: PgServer, dbname: str) -> None:
        self.root = root
        self.workspace = workspace
        self.server = server
        self.dbname = dbname
        self.url = server.url_for(dbname)
        self.rng = random.Random(SEED)
        self.slots: dict[str, Slot] = {}
        self.sessions: dict[str, Tracked] = {}
        self.prompts: dict[str, Prompt] = {}
        # (session, generation) -> (host, pid) of the one process that ran it.
        self.claims: dict[tuple[str, int], tuple[str, int]] = {}
        self.stats: Counter[str] = Counter()
        self.problems: list[str] = []
        self.operations = 0
        self.creates_unanswered = 0
        self.fault_on = 0
        self.fault_ended = -1e9
        self.rows: list[str] = []  # every stored message text, as last read
        self.closed = False
        self.history: dict[str, list[Any]] = {}  # live claims seen per session, for messages
        self._tokens = itertools.count(1)
        self._acks = itertools.count()

    # ---- helpers ---------------------------------------------------------------------------

    def fail(self, message: str) -> NoReturn:
        raise AssertionError(f"[seed {SEED}, operation {self.operations}] {message}")

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)

    def token(self) -> str:
        return f"t{next(self._tokens)}"

    def excused(self) -> bool:
        """Is a store error to be expected now?"""
        return self.fault_on > 0 or time.monotonic() - self.fault_ended < AFTERMATH

    @contextlib.asynccontextmanager
    async def fault(self, name: str):  # type: ignore[no-untyped-def]
        self.fault_on += 1
        self.stats[f"fault: {name}"] += 1
        try:
            yield
        finally:
            self.fault_on -= 1
            self.fault_ended = time.monotonic()

    def unexpected(self, action: str, error: BaseException) -> None:
        if isinstance(error, RpcError) and error.code == ErrorCode.STORE_ERROR:
            if self.excused():
                self.stats["store errors during a fault"] += 1
                return
        self.problems.append(f"[operation {self.operations}] {action}: {error!r}")

    async def call(self, slot: Slot, method: str, params: dict[str, Any]) -> Any:
        sidecar = slot.sidecar
        result = await asyncio.wait_for(sidecar.client.request(method, params), CALL_WAIT)
        self.observe_result(slot, sidecar, result)
        return result

    def up_slots(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.up]

    async def start(self, host: str) -> Sidecar:
        return await pg_sidecars.start(self.root, self.url, host, *SIDECAR_ARGS)

    # ---- one process per generation ----------------------------------------------------------

    def claim(self, host: str, pid: int, summary: dict[str, Any], where: str) -> None:
        if not summary.get("live"):
            return
        key = (summary["sessionId"], int(summary["generation"]))
        holder = self.claims.setdefault(key, (host, pid))
        seen = (self.operations, host, pid, where, key[1], summary.get("status"))
        self.history.setdefault(key[0], []).append(seen)
        self.check(
            holder == (host, pid),
            f"{key[0]} generation {key[1]} is live in pid {pid} on {host} ({where}) and was "
            f"live in pid {holder[1]} on {holder[0]}: two runtimes for one generation"
            + "".join(f"\n  {h}" for h in self.history[key[0]]),
        )

    def observe_result(self, slot: Slot, sidecar: Sidecar, result: Any) -> None:
        if not isinstance(result, dict):
            return
        summaries = [result, result.get("_meta")]
        summaries += [entry.get("_meta") for entry in result.get("sessions", [])]
        for summary in summaries:
            if isinstance(summary, dict) and "sessionId" in summary and "live" in summary:
                self.claim(slot.host, sidecar.pid, summary, "a result")

    def observe_notifications(self) -> None:
        for slot in self.slots.values():
            seen = slot.sidecar.seen
            for method, params in seen[slot.seen_upto :]:
                if method == "_session/state" and "live" in params:
                    self.claim(slot.host, slot.sidecar.pid, params, "_session/state")
            slot.seen_upto = len(seen)

    # ---- the workload ----------------------------------------------------------------------

    def pool(self) -> list[Tracked]:
        return [t for t in self.sessions.values() if not (t.deleted or t.reserved)]

    async def worker(self) -> None:
        while self.operations < OPERATIONS:
            slots = self.up_slots()
            if not slots:
                await asyncio.sleep(0.05)
                continue
            self.operations += 1
            try:
                await self.step(self.rng.choice(slots))
            except ConnectionError:
                self.stats["requests cut off by a kill"] += 1
            except TimeoutError as exc:
                self.problems.append(f"a request got no answer in {CALL_WAIT} s: {exc!r}")
            await asyncio.sleep(self.rng.uniform(0, 0.02))

    async def step(self, slot: Slot) -> None:
        pool = self.pool()
        mine = [t for t in pool if t.holder == slot.host]
        idle = [t for t in mine if not any(p.outcome == "pending" for p in t.prompts)]
        free = [t for t in pool if t.holder is None]
        choices: list[tuple[str, float]] = [("read", 1.0)]
        if len(pool) < MAX_SESSIONS:
            choices.append(("create", 2.0))
        if idle:
            choices.append(("prompt", 6.0))
        if mine:
            choices.append(("close", 2.0))
        if free:
            choices += [("resume", 3.0), ("delete", 0.7)]
        if pool:
            # Any session, any host: mostly refused (held elsewhere, not live here).
            choices += [("prompt anywhere", 1.0), ("resume anywhere", 1.0)]
        action = self.rng.choices([c for c, _ in choices], [w for _, w in choices])[0]
        pick = self.rng.choice
        if action == "create":
            await self.create(slot)
        elif action == "prompt":
            await self.prompt(slot, pick(idle), self.prompt_text())
        elif action == "prompt anywhere":
            await self.prompt(slot, pick(pool), f"hello {self.token()}")
        elif action == "close":
            await self.close(slot, pick(mine))
        elif action == "resume":
            await self.resume(slot, pick(free))
        elif action == "resume anywhere":
            await self.resume(slot, pick(pool))
        elif action == "delete":
            await self.delete(slot, pick(free))
        else:
            await self.read(slot, pool)

    def prompt_text(self) -> str:
        token = self.token()
        if self.rng.random() < 0.2:
            return f"/sleep 0.3 {token}"
        return f"hello {token}"

    async def create(self, slot: Slot) -> Tracked | None:
        try:
            result = await self.call(
                slot,
                "session/new",
                {"cwd": str(self.workspace), "mcpServers": [], "_meta": {"title": slot.host}},
            )
        except (RpcError, ConnectionError, TimeoutError) as exc:
            self.creates_unanswered += 1  # it may exist, or not
            if isinstance(exc, RpcError):
                self.unexpected("session/new", exc)
                return None
            raise
        tracked = Tracked(result["_meta"]["sessionId"], slot.host)
        self.sessions[tracked.sid] = tracked
        self.stats["creates acknowledged"] += 1
        return tracked

    async def prompt(self, slot: Slot, tracked: Tracked, text: str) -> Prompt:
        prompt = Prompt(text, tracked.sid, slot.host)
        self.prompts[text] = prompt
        tracked.prompts.append(prompt)
        params = {"sessionId": tracked.sid, "prompt": [{"type": "text", "text": text}]}
        try:
            result = await self.call(slot, "session/prompt", params)
        except RpcError as exc:
            prompt.outcome = "refused" if exc.code in RACE_ERRORS else "failed"
            if exc.code == ErrorCode.SESSION_NOT_LIVE and tracked.holder == slot.host:
                tracked.holder = None
            if exc.code not in RACE_ERRORS:
                self.unexpected(f"session/prompt {text!r}", exc)
            self.stats["prompts refused"] += 1
            return prompt
        except (ConnectionError, TimeoutError):
            prompt.outcome = "unanswered"
            raise
        prompt.outcome = "ok"
        prompt.stop_reason = result["stopReason"]
        prompt.response = result["_meta"]["response"]
        prompt.ack = next(self._acks)
        self.stats["prompts acknowledged"] += 1
        return prompt

    async def close(self, slot: Slot, tracked: Tracked) -> None:
        try:
            await self.call(slot, "session/close", {"sessionId": tracked.sid})
        except RpcError as exc:
            if exc.code == ErrorCode.SESSION_NOT_LIVE and tracked.holder == slot.host:
                tracked.holder = None
            if exc.code not in RACE_ERRORS:
                self.unexpected("session/close", exc)
            return
        if tracked.holder == slot.host:
            tracked.holder = None
        self.stats["closes acknowledged"] += 1

    async def resume(self, slot: Slot, tracked: Tracked) -> dict[str, Any] | None:
        try:
            result = await self.call(
                slot, "session/resume", {"sessionId": tracked.sid, "cwd": str(self.workspace)}
            )
        except RpcError as exc:
            if exc.code == ErrorCode.SESSION_NOT_FOUND:
                self.vanished(tracked, "session/resume")
            elif exc.code not in RACE_ERRORS:
                self.unexpected("session/resume", exc)
            return None
        tracked.holder = slot.host
        self.stats["resumes acknowledged"] += 1
        summary: dict[str, Any] = result["_meta"]
        return summary

    async def delete(self, slot: Slot, tracked: Tracked) -> None:
        tracked.deletes_sent += 1
        try:
            await self.call(slot, "session/delete", {"sessionId": tracked.sid})
        except RpcError as exc:
            if exc.code == ErrorCode.SESSION_NOT_FOUND:
                self.vanished(tracked, "session/delete")
                return
            if exc.code in RACE_ERRORS:
                tracked.deletes_sent -= 1  # refused before anything was deleted
            else:  # a store error may come after the commit: it may be gone
                self.unexpected("session/delete", exc)
            return
        tracked.deleted = True
        self.stats["deletes acknowledged"] += 1

    def vanished(self, tracked: Tracked, action: str) -> None:
        self.check(
            tracked.maybe_gone,
            f"{tracked.sid}: {action} says it does not exist, but no delete was ever sent",
        )
        tracked.deleted = True

    async def read(self, slot: Slot, pool: list[Tracked]) -> None:
        try:
            if pool and self.rng.random() < 0.6:
                await self.call(slot, "_session/status", {"sessionId": self.rng.choice(pool).sid})
            else:
                await self.call(slot, "session/list", {})
        except RpcError as exc:
            if exc.code != ErrorCode.SESSION_NOT_FOUND:
                self.unexpected("read", exc)

    # ---- the faults ------------------------------------------------------------------------

    async def faults(self) -> None:
        planned = list(FAULTS)
        self.rng.shuffle(planned)
        for number, name in enumerate(planned, 1):
            due = OPERATIONS * number / (len(planned) + 1) + self.rng.uniform(-5, 5)
            while self.operations < due:
                await asyncio.sleep(0.05)
            if name == "kill":
                await self.kill()
            elif name == "freeze":
                await self.freeze()
            elif name == "restart database":
                async with self.fault(name):
                    await asyncio.to_thread(self.server.restart)
            else:
                async with self.fault(name):
                    killed = await asyncio.to_thread(self.server.terminate_backends, self.dbname)
                    self.stats["backends terminated"] += killed

    def holders(self) -> list[tuple[Slot, Tracked]]:
        return [
            (slot, t)
            for t in self.pool()
            if t.holder is not None and (slot := self.slots[t.holder]).up
        ]

    async def a_held_session(self) -> tuple[Slot, Tracked] | None:
        held = self.holders()
        if held:
            return self.rng.choice(held)
        for _ in range(3):
            slot = self.rng.choice(self.up_slots())
            tracked = await self.create(slot)
            if tracked is not None:
                return slot, tracked
        return None

    async def slow_turn(self, slot: Slot, tracked: Tracked) -> tuple[Prompt, asyncio.Task[Any]]:
        """A turn that is still running when the fault lands (its user message stored)."""
        text = f"/sleep 4 {self.token()}"
        task = asyncio.ensure_future(self.prompt(slot, tracked, text))
        await asyncio.sleep(0)  # the task registers its prompt and sends it
        prompt = self.prompts[text]
        await eventually(lambda: any(text in row for row in self.rows), timeout=5)
        return prompt, task

    async def kill(self) -> None:
        found = await self.a_held_session()
        if found is None:
            self.problems.append("no session to kill a holder of")
            return
        slot, tracked = found
        async with self.fault("kill"):
            tracked.reserved = True
            turn = None
            if self.rng.random() < 0.6 and not any(p.outcome == "pending" for p in tracked.prompts):
                await self.refresh_rows()
                _, turn = await self.slow_turn(slot, tracked)
            slot.up = False
            old = slot.sidecar
            old.sigkill()
            await old.wait_exit()
            if turn is not None:
                with contextlib.suppress(ConnectionError):
                    await turn
            for prompt in self.prompts.values():
                if prompt.outcome == "pending" and prompt.host == slot.host:
                    prompt.outcome = "unanswered"
            for t in self.sessions.values():
                if t.holder == slot.host:
                    t.holder = None
            self.observe_notifications()
            slot.sidecar = await self.start(slot.host)
            slot.seen_upto = 0
            slot.up = True
            tracked.reserved = False

    async def freeze(self) -> None:
        found = await self.a_held_session()
        if found is None:
            self.problems.append("no session to freeze the holder of")
            return
        frozen, tracked = found
        others = [s for s in self.up_slots() if s is not frozen]
        taker = self.rng.choice(others)
        async with self.fault("freeze"):
            tracked.reserved = True
            turn: tuple[Prompt, asyncio.Task[Any]] | None = None
            if self.rng.random() < 0.7 and not any(p.outcome == "pending" for p in tracked.prompts):
                await self.refresh_rows()
                turn = await self.slow_turn(frozen, tracked)
            frozen.up = False
            os.kill(frozen.sidecar.pid, signal.SIGSTOP)
            reply = None
            if turn is not None:
                reply = f"Slept 4 s. {turn[0].text.rsplit(' ', 1)[1]}"
                await self.refresh_rows()
                if turn[0].outcome != "pending" or reply in self.rows:
                    reply = None  # the stop came too late: the turn had ended
            summary = None
            try:
                summary = await self.take_over(taker, tracked)
                if summary is not None and reply is not None:
                    # Taken over before the frozen turn could write its reply: it never may.
                    tracked.fenced.append(reply)
                if summary is not None:
                    await self.prompt(taker, tracked, f"hello {self.token()} after the takeover")
            finally:
                os.kill(frozen.sidecar.pid, signal.SIGCONT)
            if summary is not None:
                # The woken holder, superseded: a prompt now must be refused, unstored.
                late = f"late write {self.token()} from the superseded holder"
                tracked.fenced.append(late)
                prompt = await self.prompt(frozen, tracked, late)
                self.check(
                    prompt.stop_reason != "end_turn",
                    f"{tracked.sid}: pid {frozen.sidecar.pid} on {frozen.host} was taken over "
                    f"by {taker.host} (generation {summary['generation']}) yet accepted a "
                    f"prompt after waking: {prompt}",
                )
                self.stats[f"late prompts to a superseded holder: {prompt.outcome}"] += 1
            if turn is not None:
                with contextlib.suppress(RpcError):
                    await asyncio.wait_for(turn[1], CALL_WAIT)
                if summary is not None and reply is not None:
                    self.check(
                        turn[0].stop_reason != "end_turn",
                        f"{tracked.sid}: the turn the frozen holder ran was acknowledged "
                        f"after the takeover: {turn[0]}",
                    )
            frozen.up = True
            tracked.reserved = False

    async def take_over(self, taker: Slot, tracked: Tracked) -> dict[str, Any] | None:
        """Resume on `taker` until the frozen holder's lease has run out (bounded)."""
        deadline = time.monotonic() + 30 * TTL
        while time.monotonic() < deadline:
            try:
                result = await self.call(
                    taker,
                    "session/resume",
                    {"sessionId": tracked.sid, "cwd": str(self.workspace)},
                )
            except RpcError as exc:
                self.check(
                    exc.code in (ErrorCode.RUNTIME_LIVE, ErrorCode.STORE_ERROR),
                    f"{tracked.sid}: taking over from a frozen holder failed: {exc!r}",
                )
                self.stats[f"takeover attempts refused ({ErrorCode(exc.code).name})"] += 1
                await asyncio.sleep(0.3)
                continue
            tracked.holder = taker.host
            self.stats["takeovers of a frozen holder"] += 1
            summary: dict[str, Any] = result["_meta"]
            return summary
        self.problems.append(f"{tracked.sid}: never taken over from its frozen holder")
        return None

    # ---- checks while it runs: the store's rows ----------------------------------------------

    async def refresh_rows(self) -> dict[str, dict[str, Any]] | None:
        """The rows as the store holds them now, or None while the database is away."""
        try:
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=3
            ) as conn:
                cur = await conn.execute(
                    "SELECT s.id, s.status, s.generation, s.lease_owner,"
                    " coalesce(array_agg(m.body ORDER BY m.idx)"
                    "   FILTER (WHERE m.body IS NOT NULL), '{}')"
                    " FROM sidecar.sessions s LEFT JOIN sidecar.messages m"
                    " ON m.session_seq = s.seq GROUP BY s.id, s.status, s.generation,"
                    " s.lease_owner"
                )
                found = await cur.fetchall()
        except psycopg.Error:
            return None
        rows = {
            sid: {
                "status": status,
                "generation": int(gen),
                "owner": json.loads(owner) if owner else None,
                "bodies": [json.loads(body) for body in bodies],
            }
            for sid, status, gen, owner, bodies in found
        }
        self.rows = [body["content"] for row in rows.values() for body in row["bodies"]]
        return rows

    async def sampler(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await self.check_rows()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.4)

    async def check_rows(self) -> None:
        # What was acknowledged before the read is what the read must show.
        acked = [p for p in self.prompts.values() if p.outcome == "ok"]
        deleted = [t.sid for t in self.sessions.values() if t.deleted]
        self.observe_notifications()
        rows = await self.refresh_rows()
        if rows is None:
            self.stats["row checks skipped (database away)"] += 1
            return
        self.stats["row checks"] += 1
        for sid in deleted:
            self.check(sid not in rows, f"{sid}: deleted (acknowledged) but its row is back")
        for sid, row in rows.items():
            owner = row["owner"]
            if row["status"] in ("creating", "idle", "running", "closing") and owner:
                holder = self.claims.get((sid, row["generation"]))
                self.check(
                    holder in (None, (owner["host"], owner["pid"])),
                    f"{sid}: the row says generation {row['generation']} is held by pid "
                    f"{owner['pid']} on {owner['host']}, but pid {holder and holder[1]} on "
                    f"{holder and holder[0]} called it live",
                )
            tracked = self.sessions.get(sid)
            if tracked is None:
                continue
            texts = [body["content"] for body in row["bodies"]]
            for text in tracked.fenced:
                self.check(
                    text not in texts, f"{sid}: a superseded holder's write was stored: {text!r}"
                )
        for prompt in acked:
            tracked = self.sessions[prompt.sid]
            if tracked.maybe_gone:
                continue
            self.check(prompt.sid in rows, f"{prompt.sid}: acknowledged, but its row is gone")
            texts = [body["content"] for body in rows[prompt.sid]["bodies"]]
            self.check(
                prompt.text in texts
                and (prompt.stop_reason != "end_turn" or prompt.response in texts),
                f"{prompt.sid}: the acknowledged prompt {prompt} "
                f"is not in the stored transcript {texts}",
            )

    # ---- the run -----------------------------------------------------------------------------

    async def run(self) -> str:
        began = time.monotonic()
        for host in HOSTS:  # one at a time: on a loaded machine each is ready sooner
            self.slots[host] = Slot(host, await self.start(host))
        done = asyncio.Event()
        sampler = asyncio.create_task(self.sampler(done))
        try:
            faults = asyncio.create_task(self.faults())
            await asyncio.gather(*(self.worker() for _ in range(WORKERS)))
            await faults
        finally:
            done.set()
            await sampler
        self.check(not self.problems, f"unexpected errors during the run: {self.problems}")
        workload = time.monotonic() - began
        await self.verify()
        await self.close_all()
        alive = [t for t in self.sessions.values() if not t.deleted]
        lines = [
            f"pg chaos: seed {SEED} (PG_CHAOS_SEED to replay), {self.operations} operations "
            f"in {workload:.1f} s, checks {time.monotonic() - began - workload:.1f} s, "
            f"{len(alive)} sessions at the end",
            *(f"  {name}: {count}" for name, count in sorted(self.stats.items())),
        ]
        return "\n".join(lines)

    async def close_all(self) -> None:
        if self.closed:
            return
        self.closed = True
        for slot in self.slots.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(slot.sidecar.pid, signal.SIGCONT)
        codes = await asyncio.gather(
            *(slot.sidecar.close() for slot in self.slots.values()), return_exceptions=True
        )
        self.check(all(code == 0 for code in codes), f"a sidecar did not stop cleanly: {codes}")

    # ---- checks at the end -------------------------------------------------------------------

    async def statuses(self, sid: str) -> dict[str, dict[str, Any] | None]:
        found: dict[str, dict[str, Any] | None] = {}
        for host, slot in self.slots.items():
            try:
                found[host] = await self.call(slot, "_session/status", {"sessionId": sid})
            except RpcError as exc:
                self.check(exc.code == ErrorCode.SESSION_NOT_FOUND, f"{sid} on {host}: {exc!r}")
                found[host] = None
        return found

    async def one_holder(self, sid: str) -> str | None:
        """The host running `sid` once the superseded ones let go (at most one, agreed)."""
        found: dict[str, dict[str, Any] | None] = {}

        async def settled() -> bool:
            # One holder at most, and the others naming it: a holder whose renewal just
            # failed (its pool busy on a loaded machine) is named again once it renews.
            nonlocal found
            found = await self.statuses(sid)
            live = [host for host, s in found.items() if s and s["live"]]
            if len(live) != 1:
                return len(live) == 0
            holder = self.slots[live[0]]
            named = f"pid {holder.sidecar.pid} on {holder.host}"
            return all(
                s is None or s["heldBy"] == named for h, s in found.items() if h != holder.host
            )

        deadline = time.monotonic() + 6 * TTL + AFTERMATH
        while not await settled() and time.monotonic() < deadline:
            await asyncio.sleep(0.3)
        live = [host for host, s in found.items() if s and s["live"]]
        self.check(len(live) <= 1, f"{sid}: live on {live} at once: {found}")
        if not live:
            return None
        holder = self.slots[live[0]]
        for host, status in found.items():
            if host != holder.host and status is not None:
                self.check(
                    status["heldBy"] == f"pid {holder.sidecar.pid} on {holder.host}",
                    f"{sid}: live on {holder.host}, but {host} says heldBy {status['heldBy']}",
                )
        return holder.host

    async def transcript(self, slot: Slot, sid: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            page = await self.call(
                slot, "_session/messages", {"sessionId": sid, "offset": len(messages), "limit": 500}
            )
            messages += page["messages"]
            if not page["messages"]:
                self.check(page["total"] == len(messages), f"{sid}: total {page}")
                return messages

    def check_transcript(self, tracked: Tracked, messages: list[dict[str, Any]]) -> None:
        sid = tracked.sid
        users = [(i, m["text"]) for i, m in enumerate(messages) if m["type"] == "user"]
        index = {text: i for i, text in users}
        self.check(len(index) == len(users), f"{sid}: a user message is stored twice: {users}")
        for _, text in users:
            sent = self.prompts.get(text)
            self.check(
                sent is not None and sent.sid == sid,
                f"{sid}: user message {text!r} was never sent to this session",
            )
        every_text = [m.get("text") for m in messages]
        for text in tracked.fenced:
            self.check(text not in every_text, f"{sid}: a superseded write was stored: {text!r}")
        acked = sorted((p for p in tracked.prompts if p.outcome == "ok"), key=lambda p: p.ack)
        starts = sorted(index.values())
        for prompt in acked:
            self.check(
                prompt.text in index,
                f"{sid}: the acknowledged prompt {prompt.text!r} is missing: {messages}",
            )
            if prompt.stop_reason != "end_turn":
                continue  # cancelled (a close on another worker): no reply to look for
            start = index[prompt.text]
            end = next((s for s in starts if s > start), len(messages))
            self.check(
                any(
                    is_final_reply(m) and m["text"] == prompt.response for m in messages[start:end]
                ),
                f"{sid}: the acknowledged reply {prompt.response!r} to {prompt.text!r} is "
                f"missing: {messages[start:end]}",
            )
        # A turn answered `cancelled` after a takeover was stored before it: only replies
        # the client got must follow the order of their answers.
        acked = [p for p in acked if p.stop_reason == "end_turn"]
        order = [index[p.text] for p in acked]
        self.check(
            order == sorted(order),
            f"{sid}: acknowledged prompts stored out of order: "
            f"{[(index[p.text], p) for p in acked]}",
        )

    async def verify(self) -> None:
        reader = self.slots[HOSTS[0]]
        await self.check_rows()
        rows = await self.refresh_rows()
        self.check(rows is not None, "the database is not back")
        assert rows is not None
        strangers = [sid for sid in rows if sid not in self.sessions]
        self.check(
            len(strangers) <= self.creates_unanswered,
            f"{len(strangers)} unknown sessions, but only {self.creates_unanswered} creates "
            f"went unanswered: {strangers}",
        )
        for sid in strangers:
            self.sessions[sid] = Tracked(sid, None)
        for tracked in list(self.sessions.values()):
            sid = tracked.sid
            statuses = await self.statuses(sid)
            if tracked.deleted:
                self.check(
                    all(s is None for s in statuses.values()) and sid not in rows,
                    f"{sid}: deleted (acknowledged) but still there: {statuses}",
                )
                continue
            if sid not in rows:
                self.check(tracked.maybe_gone, f"{sid}: created (acknowledged) but gone")
                tracked.deleted = True
                continue
            holder = await self.one_holder(sid)
            self.check_transcript(tracked, await self.transcript(reader, sid))
            await self.carry_on(tracked, holder)

    async def carry_on(self, tracked: Tracked, holder: str | None) -> None:
        """Close it where it runs, resume it on another host, one turn, close."""
        sid = tracked.sid
        if holder is not None:
            await self.call(self.slots[holder], "session/close", {"sessionId": sid})
        elsewhere = self.rng.choice([h for h in HOSTS if h != holder])
        slot = self.slots[elsewhere]
        summary = await self.resume(slot, tracked)
        self.check(summary is not None and summary["live"], f"{sid}: cannot resume on {elsewhere}")
        prompt = await self.prompt(slot, tracked, f"final check {self.token()}")
        self.check(
            prompt.outcome == "ok" and prompt.response == f"Echo: {prompt.text}",
            f"{sid}: the last turn on {elsewhere}: {prompt}",
        )
        await self.call(slot, "session/close", {"sessionId": sid})
        self.check_transcript(tracked, await self.transcript(slot, sid))
        self.stats["sessions carried on elsewhere"] += 1


async def test_three_hosts_under_faults_lose_nothing_and_never_run_a_session_twice(
    tmp_path: Path,
    workspace: Path,
    pg_server: PgServer,
    pg_database: str,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> None:
    with capsys.disabled():
        print(f"\npg chaos: seed {SEED}, {OPERATIONS} operations")
    run = ChaosRun(tmp_path, workspace, pg_server, pg_database)
    try:
        report = await run.run()
    except BaseException:
        print(f"pg chaos: seed {SEED}, stats so far {dict(run.stats)}")
        for slot in run.slots.values():  # what the sidecars logged, for the failure
            print(f"---- {slot.host} pid {slot.sidecar.pid}")
            print(pg_sidecars.log_of(slot.sidecar)[-20000:])
        raise
    finally:
        if run.slots and not run.closed:
            with contextlib.suppress(Exception):
                await run.close_all()
    record_property("pg_chaos", report)
    with capsys.disabled():
        print(f"\n{report}")


async def test_a_close_the_database_cut_short_does_not_keep_the_session_leased(
    tmp_path: Path, workspace: Path, pg_server: PgServer, pg_database: str
) -> None:
    """Found by the run above: a close whose writes failed (the database was away) released
    the runtime, but its lease was renewed on for as long as the sidecar lived, so no host
    could resume the session. Now the renewal closes such a session and lets go."""
    url = pg_server.url_for(pg_database)
    alpha = await pg_sidecars.start(tmp_path, url, "alpha", *SIDECAR_ARGS)
    beta = await pg_sidecars.start(tmp_path, url, "beta", *SIDECAR_ARGS)
    try:
        sid = (await alpha.new_session(workspace))["sessionId"]
        await alpha.prompt(sid, "before")
        await asyncio.to_thread(pg_server.pause)
        try:
            with pytest.raises(RpcError) as failed:
                await alpha.call("session/close", {"sessionId": sid})
            assert failed.value.code == ErrorCode.STORE_ERROR
        finally:
            await asyncio.to_thread(pg_server.restart)

        # Its next lease renewal finds a lease with no runtime and closes the session.
        async def closed() -> bool:
            with contextlib.suppress(RpcError):  # the pool may still be reconnecting
                return (await alpha.status(sid))["status"] == "closed"
            return False

        for _ in range(int(20 * TTL)):
            if await closed():
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError(f"{sid} stayed leased: {await beta.status(sid)}")
        resume = {"sessionId": sid, "cwd": str(workspace)}
        taken = (await beta.call("session/resume", resume))["_meta"]
        assert taken["generation"] == 2 and taken["live"] is True
        assert (await beta.prompt(sid, "after"))["stopReason"] == "end_turn"
        texts = [m["text"] for m in (await alpha.messages(sid))["messages"]]
        assert texts == ["before", "Echo: before", "after", "Echo: after"]
        assert (await alpha.status(sid))["heldBy"] == f"pid {beta.pid} on beta"
    finally:
        await alpha.close()
        await beta.close()
