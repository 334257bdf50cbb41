"""A session's settings, rules, name and pending consent, on the manager's rules.

Separate from the lifecycle (`manager.py`): these change what a session is like, not
whether it runs. Each goes to the live runtime when there is one (fenced by its
generation), else to the record where that is safe (a name, the rules).
"""

from __future__ import annotations

from typing import Protocol

from protocol.values import Approval, Mode, Sandbox
from sidecar.core.approvals import Pending
from sidecar.core.cwd_rules import check_sandboxable
from sidecar.core.events import EventHub
from sidecar.core.registry import KeyedLock
from sidecar.core.runtime import SessionRuntime
from sidecar.core.views import McpServerView, SessionView
from sidecar.domain.errors import InvalidInput, SessionBusy
from sidecar.domain.events import McpServersChanged, TitleChanged
from sidecar.domain.records import SessionRecord
from sidecar.domain.rules import Rule, rules_from_json, rules_to_json
from sidecar.store.base import SessionStore


class SettingsOwner(Protocol):
    """What the settings use of the manager: its runtimes, store, locks and events."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def locks(self) -> KeyedLock: ...

    @property
    def events(self) -> EventHub: ...

    def runtime(self, session_id: str) -> SessionRuntime | None: ...

    async def live(
        self, session_id: str, action: str, generation: int | None = None
    ) -> SessionRuntime: ...

    async def claimable(self, session_id: str, action: str) -> SessionRecord: ...

    def view_of(self, record: SessionRecord) -> SessionView: ...


class SessionSettings:
    def __init__(self, manager: SettingsOwner) -> None:
        self._manager = manager

    async def set_mode(self, session_id: str, mode: Mode) -> None:
        runtime = await self._manager.live(session_id, "set the mode of")
        check_sandboxable(runtime.record.cwd, mode, runtime.record.sandbox, "modeId")
        await runtime.set_mode(mode)

    async def set_model(self, session_id: str, model: str) -> None:
        runtime = await self._manager.live(session_id, "set the model of")
        await runtime.set_model(model)

    async def set_agent_option(self, session_id: str, option_id: str, value: str) -> None:
        """One of the external agent's own settings, told to the agent (idle only: an
        agent's model or mode does not change under a running turn)."""
        runtime = await self._manager.live(session_id, "change the agent settings of")
        if runtime.turns.busy:
            raise SessionBusy(session_id)
        await runtime.engine.set_option(option_id, value)

    async def set_setting(
        self, session_id: str, *, approval: Approval | None = None, sandbox: Sandbox | None = None
    ) -> None:
        runtime = await self._manager.live(session_id, "change the settings of")
        if sandbox is not None:
            check_sandboxable(runtime.record.cwd, runtime.mode, sandbox, "sandbox")
        await runtime.set_setting(approval=approval, sandbox=sandbox)

    async def permissions(self, session_id: str) -> tuple[tuple[Rule, ...], list[Pending]]:
        """The session's rules, and the calls waiting for consent right now."""
        runtime = self._manager.runtime(session_id)
        if runtime is not None:
            return runtime.approvals.rules, list(runtime.approvals.pending.values())
        return rules_from_json((await self._manager.store.get(session_id)).rules), []

    async def set_rules(self, session_id: str, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        """Replace the rules; a session live in another sidecar is refused (its runtime
        applies the rules it holds)."""
        runtime = self._manager.runtime(session_id)
        if runtime is not None:
            await runtime.set_rules(rules)
            return rules
        async with self._manager.locks.hold(session_id):
            record = await self._manager.claimable(session_id, "change the rules of")
            await self._manager.store.update_metadata(record.session_id, rules=rules_to_json(rules))
        return rules

    async def answer_permission(
        self, session_id: str, call_id: str, option_id: str, *, generation: int | None = None
    ) -> None:
        runtime = await self._manager.live(session_id, "answer a permission request of", generation)
        runtime.approvals.answer_over_http(call_id, option_id)

    async def rename(self, session_id: str, title: str) -> SessionView:
        """Any session, live or not (a name is not the runtime's business)."""
        record = await self._manager.store.update_metadata(session_id, title=title)
        runtime = self._manager.runtime(session_id)
        if runtime is not None:
            runtime.observe(record, "title")
        self._manager.events.publish(session_id, TitleChanged(record.title, record.updated_at))
        return self._manager.view_of(record)

    async def reconnect_mcp(self, session_id: str, name: str) -> McpServerView:
        runtime = await self._manager.live(session_id, "reconnect an MCP server of")
        try:
            status = await runtime.mcp.reconnect(name)
        except KeyError:
            raise InvalidInput("name", f"the session has no MCP server named {name!r}") from None
        runtime.events.publish(McpServersChanged(runtime.record))
        return McpServerView(
            status.name, status.transport, status.status, status.tools, status.error
        )
