"""Compaction: older turns become a provider-written summary in the context.

The summary is appended to the transcript as a compaction marker and the record points
at it, in one transaction, so resume and fork rebuild the same context without reading
the whole transcript. The stored transcript stays whole and pageable.
"""

from __future__ import annotations

from typing import Protocol

from sidecar.agent.context import COMPACTION_PROMPT, ProviderContext
from sidecar.agent.providers.base import Provider, Usage
from sidecar.core.parts import RecordWriter
from sidecar.core.views import CompactionOutcome
from sidecar.domain.events import Compacted, SessionEvent
from sidecar.domain.transcript import MarkerEntry, MarkerKind


class CompactionHost(Protocol):
    """What a compaction uses of the turn that runs it (`TurnRunner`)."""

    @property
    def provider(self) -> Provider: ...

    @property
    def runtime(self) -> RecordWriter: ...

    def add_usage(self, usage: Usage | None, context_window: int | None) -> None: ...

    def publish(self, event: SessionEvent) -> None: ...


async def compact(
    host: CompactionHost, context: ProviderContext, keep_turns: int
) -> CompactionOutcome:
    """Summarize everything before the last `keep_turns` turns (the caller holds the lock)."""
    keep_from = context.split_point(keep_turns)
    if keep_from is None:
        return CompactionOutcome(compacted=False, reason="nothing older than the turns kept")
    reply = await host.provider.complete(
        [
            {"role": "system", "content": COMPACTION_PROMPT},
            {"role": "user", "content": context.render_before(keep_from)},
        ],
        [],
        lambda _delta: None,
    )
    host.add_usage(reply.usage, host.provider.context_window)
    summary = reply.text.strip() or "(the provider returned an empty summary)"
    runtime = host.runtime
    # The runtime is the session's one writer and holds the turn lock: the marker's index
    # is the current length, and the pointer to it lands in the same transaction.
    current = await runtime.stored()
    index = current.message_count
    marker = MarkerEntry(
        MarkerKind.COMPACTION,
        summary,
        keep_from,
        skips=tuple(skip for skip in context.skips if skip[1] > keep_from),
        previous=current.summary_index,
    )
    await runtime.write(append=marker, context_from=keep_from, summary_index=index)
    context.compact(summary, keep_from)
    host.publish(Compacted(index, keep_from, context.chars))
    return CompactionOutcome(
        compacted=True, summary_index=index, context_from=keep_from, context_chars=context.chars
    )
