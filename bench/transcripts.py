"""Seeded transcripts and stored sessions, written with the sidecar's own SqliteSessionStore.

Building a data dir before a sidecar starts is how the benchmarks get 1,000 stored
sessions or a 100,000-message transcript in seconds: the rows are exactly what the
real store writes (its `insert`, `append_message`, `fork` and `update`), only
without a turn per pair of messages.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from protocol.values import Backend, Mode
from sidecar.domain.records import SessionRecord, SessionState, iso
from sidecar.store.blocking import BlockingStore, blocking
from sidecar.store.sqlite import SqliteSessionStore

WORDS = (
    "build test file module error fix function class import return value config path "
    "sidecar session store message window listener token queue event stream loop task "
    "the a of to and in is it that for on with as this be are from or by"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def messages(rng: random.Random, count: int) -> Iterator[dict[str, Any]]:
    """Turns as the agent loop stores them: mostly user/assistant pairs, one in five a
    tool turn (assistant tool call, tool result, assistant answer)."""
    made = 0
    while made < count:
        stamp = iso(time.time())
        turn: list[dict[str, Any]] = [
            {"role": "user", "content": _text(rng, 4, 40), "createdAt": stamp}
        ]
        if rng.random() < 0.2:
            call_id = f"call_{rng.getrandbits(48):012x}"
            command = f"ls {rng.choice(WORDS)}"
            arguments = json.dumps({"command": command})
            turn += [
                {"role": "assistant", "content": "", "createdAt": stamp,
                 "tool_calls": [{"id": call_id, "type": "function",
                                 "function": {"name": "bash", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": call_id, "name": "bash", "exitCode": 0,
                 "content": _text(rng, 10, 80), "createdAt": stamp},
            ]  # fmt: skip
        turn.append({"role": "assistant", "content": _text(rng, 8, 80), "createdAt": stamp})
        yield from turn[: count - made]
        made += len(turn)


def record(cwd: Path, title: str, status: SessionState = SessionState.IDLE) -> SessionRecord:
    stamp = time.time()
    return SessionRecord(
        session_id=f"sess_{uuid.uuid4().hex}",
        cwd=str(cwd),
        title=title,
        mode=Mode.CRAFT,
        backend=Backend.PIPE,
        status=status,
        generation=1,
        created_at=stamp,
        updated_at=stamp,
        model="offline-echo",
    )


def open_store(path: Path) -> tuple[BlockingStore, Callable[[], None]]:
    """The real SQLite store, driven synchronously (set-up code runs outside any loop)."""
    return blocking(lambda: SqliteSessionStore(path))


def add_session(store: BlockingStore, rng: random.Random, cwd: Path, title: str, count: int) -> str:
    """A closed session with `count` messages, as a sidecar would have left it."""
    new = record(cwd, title)
    store.insert(new)
    for message in messages(rng, count):
        store.append_message(new.session_id, 1, message)
    store.update(new.session_id, 1, status=SessionState.CLOSED.value)
    return new.session_id


def fork_closed(store: BlockingStore, source_id: str, cwd: Path, title: str, upto: int) -> str:
    """A closed copy of the first `upto` messages of a stored session (the store's fork)."""
    copy = record(cwd, title, SessionState.CLOSED)
    store.fork(source_id, copy, upto)
    return copy.session_id


def stored_sessions(
    data_dir: Path, rng: random.Random, cwd: Path, count: int, each: int = 6
) -> list[str]:
    """A data dir holding `count` closed sessions of `each` messages."""
    data_dir.mkdir(parents=True, exist_ok=True)
    store, close = open_store(data_dir / "sessions.db")
    try:
        return [add_session(store, rng, cwd, f"Stored session {i}", each) for i in range(count)]
    finally:
        close()
