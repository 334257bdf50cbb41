"""One live runtime's view of the manager, for its HTTP listener.

The listener translates HTTP into calls on this object; each call goes through the
manager (shutdown, busy and liveness rules live there once) and only reaches the
generation the listener belongs to: a listener never acts on a later runtime.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from sidecar.agent.outcome import TurnOutcome
from sidecar.core.approvals import Pending
from sidecar.core.events import EventStream
from sidecar.core.views import SessionView, TerminalSize
from sidecar.domain.events import Origin
from sidecar.domain.files import TurnChanges
from sidecar.domain.records import SessionRecord
from sidecar.domain.rules import Rule
from sidecar.domain.transcript import Entry


class PermissionsOwner(Protocol):
    """The manager's consent calls the endpoint uses (`settings.SessionSettings`)."""

    async def permissions(self, session_id: str) -> tuple[tuple[Rule, ...], list[Pending]]: ...

    async def answer_permission(
        self, session_id: str, call_id: str, option_id: str, *, generation: int | None = None
    ) -> None: ...


class EndpointOwner(Protocol):
    """The manager's calls an endpoint makes: each applies the manager's rules once."""

    @property
    def settings(self) -> PermissionsOwner: ...

    async def view(self, session_id: str) -> SessionView: ...

    def view_of(self, record: SessionRecord) -> SessionView: ...

    def start_prompt(
        self, session_id: str, text: str, origin: Origin, *, generation: int
    ) -> asyncio.Task[TurnOutcome]: ...

    async def cancel(self, session_id: str, *, generation: int | None = None) -> bool: ...

    async def messages(
        self, session_id: str, offset: int, limit: int
    ) -> tuple[list[tuple[int, Entry]], int]: ...

    async def resize(
        self, session_id: str, rows: int, cols: int, *, generation: int | None = None
    ) -> TerminalSize: ...

    async def changes(self, session_id: str, turn: int | None) -> TurnChanges: ...


class SessionEndpoint:
    def __init__(
        self, manager: EndpointOwner, session_id: str, generation: int, events: EventStream
    ) -> None:
        self._manager = manager
        self.session_id = session_id
        self.generation = generation
        self.events = events

    async def view(self) -> SessionView:
        return await self._manager.view(self.session_id)

    def start_send(self, text: str) -> asyncio.Task[TurnOutcome]:
        """Start a turn now (its lock taken before this returns); the task runs it."""
        return self._manager.start_prompt(
            self.session_id, text, Origin.HTTP, generation=self.generation
        )

    async def abort(self) -> bool:
        return await self._manager.cancel(self.session_id, generation=self.generation)

    async def messages(self, offset: int, limit: int) -> tuple[list[tuple[int, Entry]], int]:
        return await self._manager.messages(self.session_id, offset, limit)

    async def resize(self, rows: int, cols: int) -> TerminalSize:
        return await self._manager.resize(self.session_id, rows, cols, generation=self.generation)

    async def changes(self, turn: int | None) -> TurnChanges:
        """What a turn changed (None: the last), with its diff and hunks."""
        return await self._manager.changes(self.session_id, turn)

    async def pending(self) -> list[Pending]:
        _, pending = await self._manager.settings.permissions(self.session_id)
        return pending

    async def answer(self, call_id: str, option_id: str) -> None:
        await self._manager.settings.answer_permission(
            self.session_id, call_id, option_id, generation=self.generation
        )

    def view_of(self, record: SessionRecord) -> SessionView:
        return self._manager.view_of(record)
