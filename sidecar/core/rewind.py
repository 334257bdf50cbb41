"""Rewind: the working tree, the conversation, or both, back to before a turn.

The conversation part works like compaction: one marker appended to the transcript and
the record's context pointer moved to it, in one write. The marker says which ranges of
the transcript (the rewound turns) the provider context leaves out; nothing is deleted,
the later entries stay stored and readable, and resume and fork rebuild the same
context from the marker. The code part is the checkpoints' (`sidecar/core/checkpointing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from protocol.values import RewindScope
from sidecar.agent.context import PageReader
from sidecar.core.checkpointing import TurnCheckpoints
from sidecar.core.parts import RecordWriter
from sidecar.core.views import RewindOutcome
from sidecar.domain.errors import InvalidInput
from sidecar.domain.records import SessionRecord
from sidecar.domain.transcript import Entry, MarkerEntry, MarkerKind, Skip, UserEntry

PROBE: Final = 64  # entries read per step of the search for a turn


class RewindOwner(RecordWriter, Protocol):
    """The runtime as a rewind sees it: its record's one writer, and its checkpoints."""

    @property
    def checkpoints(self) -> TurnCheckpoints: ...


class RewindHost(Protocol):
    """What a rewind uses of the turn runner that holds the lock (`TurnRunner`)."""

    @property
    def runtime(self) -> RewindOwner: ...

    async def read_entries(self, offset: int, limit: int) -> list[Entry]: ...

    def forget_context(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ContextState:
    """Where a provider context starts, which summary it opens with, what it leaves out."""

    pointer: int | None  # the marker that defines it (None: the whole transcript)
    context_from: int
    summary_index: int | None
    skips: tuple[Skip, ...]


async def _first_user(read: PageReader, start: int, end: int) -> tuple[int, int] | None:
    """(index, turn) of the first numbered user entry in [start, end)."""
    offset = start
    while offset < end:
        page = await read(offset, min(PROBE, end - offset))
        if not page:
            return None
        for index, entry in enumerate(page, start=offset):
            if isinstance(entry, UserEntry) and entry.turn is not None:
                return index, entry.turn
        offset += len(page)
    return None


async def locate_turn(read: PageReader, total: int, turn: int) -> int | None:
    """The transcript index of turn `turn`'s user message, by binary search (turn numbers
    rise with the index): a few reads, whatever the transcript's length."""
    low, high = 0, total
    while low < high:
        middle = (low + high) // 2
        found = await _first_user(read, middle, high)
        if found is None or found[1] >= turn:
            high = middle
        else:
            low = found[0] + 1
    found = await _first_user(read, low, total)
    return found[0] if found is not None and found[1] == turn else None


async def _marker(read: PageReader, index: int) -> MarkerEntry | None:
    found = await read(index, 1)
    return found[0] if found and isinstance(found[0], MarkerEntry) else None


async def context_at(read: PageReader, record: SessionRecord, index: int) -> ContextState:
    """The provider context as it was when the entry at `index` was appended: walk the
    context markers back (each names the one before it) to the last one older than it."""
    pointer = record.summary_index
    marker = None
    while pointer is not None:
        marker = await _marker(read, pointer)
        if marker is None:
            pointer = None
        elif pointer < index:
            break
        else:
            pointer = marker.previous
    if pointer is None or marker is None:
        return ContextState(None, 0, None, ())
    summary = pointer if marker.kind is MarkerKind.COMPACTION else marker.summary_index
    return ContextState(pointer, marker.context_from or 0, summary, marker.skips)


async def rewind_conversation(runner: RewindHost, turn: int) -> int:
    """The model's context restarts before `turn`; returns the marker's index."""
    runtime = runner.runtime
    record = await runtime.stored()
    read = runner.read_entries
    start = await locate_turn(read, record.message_count, turn)
    if start is None:
        raise InvalidInput("turn", f"turn {turn} is not in the transcript")
    state = await context_at(read, record, start)
    index = record.message_count
    last = record.turns
    rewound = f"turn {turn}" if last == turn else f"turns {turn}-{last}"
    marker = MarkerEntry(
        MarkerKind.REWIND,
        f"[conversation rewound to before turn {turn}: {rewound} stay in the transcript "
        "but the model no longer sees them]",
        state.context_from,
        summary_index=state.summary_index,
        skips=(*state.skips, (start, index)),
        previous=record.summary_index,
    )
    await runtime.write(append=marker, context_from=state.context_from, summary_index=index)
    runner.forget_context()  # rebuilt from the marker on the next model call
    return index


async def rewind(
    runner: RewindHost,
    turn: int | None,
    scope: RewindScope,
    *,
    force: bool,
    dry_run: bool,
) -> RewindOutcome:
    """Under the turn lock (the caller's). Code first: if it fails nothing else changed."""
    runtime = runner.runtime
    code = None
    if scope in (RewindScope.CODE, RewindScope.BOTH):
        code = await runtime.checkpoints.rewind(
            turn, runtime.record.turns, force=force, dry_run=dry_run
        )
    marker = None
    if scope in (RewindScope.CONVERSATION, RewindScope.BOTH) and not dry_run:
        assert turn is not None
        marker = await rewind_conversation(runner, turn)
    return RewindOutcome(scope, turn, code, marker, dry_run)
