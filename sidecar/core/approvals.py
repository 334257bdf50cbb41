"""Consent before action: every tool call that could change something passes here.

The session's rules decide first (deny wins); then its approval setting: `auto` runs,
`deny` refuses, `ask` asks the client (`session/request_permission` over stdio, or an
answer posted over HTTP: the first answer wins). While a call waits, the session says
so (`awaitingPermission` in its summary); a client that never answers keeps the turn
waiting, visibly, with no silent timeout. A cancel or a close while waiting ends the
turn as cancelled; the call is recorded as not run. "Always" answers add a rule.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from protocol.values import Approval
from sidecar.core.events import EventStream
from sidecar.domain.errors import InvalidInput, InvalidState, NothingPending
from sidecar.domain.events import PermissionAsked, PermissionSettled
from sidecar.domain.permissions import Choice, PermissionAnswer, PermissionRequest, Verdict
from sidecar.domain.records import SessionRecord, now
from sidecar.domain.rules import Decision, Match, Rule, decide, rules_from_json

log = logging.getLogger(__name__)


# Asks the stdio client: (session id, request) -> its answer.
Asker = Callable[[str, PermissionRequest], Awaitable[PermissionAnswer]]
# Settled requests remembered per runtime, so a late second answer is told "already
# answered" (409) rather than "no such request" (404); the oldest are forgotten first.
SETTLED_REMEMBERED = 1024


class ApprovalOwner(Protocol):
    """What the desk uses of its runtime: the rules and setting in its record, where to
    tell clients, and the runtime's write of a rule an "always" answer adds."""

    @property
    def session_id(self) -> str: ...

    @property
    def record(self) -> SessionRecord: ...

    @property
    def events(self) -> EventStream: ...

    async def set_rules(self, rules: tuple[Rule, ...]) -> None: ...


@dataclass
class Pending:
    request: PermissionRequest
    since: float
    answer: asyncio.Future[PermissionAnswer]


class ApprovalDesk:
    """One runtime's approvals: its pending requests and the rules it applies."""

    def __init__(self, runtime: ApprovalOwner, asker: Asker | None) -> None:
        self._runtime = runtime
        self._asker = asker
        self.pending: dict[str, Pending] = {}
        self._settled: OrderedDict[str, str] = OrderedDict()  # call id -> how it ended

    @property
    def rules(self) -> tuple[Rule, ...]:
        return rules_from_json(self._runtime.record.rules)

    async def authorize(self, request: PermissionRequest) -> Verdict:
        verdict = decide(self.rules, request.tool, request.subject)
        approval = self._runtime.record.approval
        if verdict is Decision.DENY:
            return Verdict(False, "refused by a rule of this session (deny)")
        if verdict is Decision.ALLOW and not (request.always_ask and approval is Approval.ASK):
            return Verdict(True)
        if approval is Approval.AUTO:
            return Verdict(True)
        if approval is Approval.DENY:
            return Verdict(False, "refused: this session's approval setting is deny")
        return await self._ask(request)

    async def _ask(self, request: PermissionRequest) -> Verdict:
        answer: asyncio.Future[PermissionAnswer] = asyncio.get_running_loop().create_future()
        waiting = Pending(request, now(), answer)
        self.pending[request.call_id] = waiting
        events = self._runtime.events
        events.publish(
            PermissionAsked(request.call_id, request.title, waiting.since, self._runtime.record)
        )
        asking = None
        if self._asker is not None:
            asking = asyncio.create_task(self._ask_client(request, answer))
        try:
            settled = await answer
            self.pending.pop(request.call_id, None)
            return await self._verdict(request, settled)  # a rule it adds is stored first
        finally:
            self.pending.pop(request.call_id, None)
            self._remember_settled(request.call_id, answer)
            if asking is not None and not asking.done():
                asking.cancel()  # an answer came over HTTP (or the turn ended)
            events.publish(PermissionSettled(request.call_id, self._runtime.record))

    async def _ask_client(
        self, request: PermissionRequest, answer: asyncio.Future[PermissionAnswer]
    ) -> None:
        assert self._asker is not None
        got = await self._asker(self._runtime.session_id, request)
        if not answer.done():
            answer.set_result(got)

    async def _verdict(self, request: PermissionRequest, answer: PermissionAnswer) -> Verdict:
        if answer.choice is None:
            return Verdict(False, "the user cancelled", cancelled=True)
        if answer.note is not None:
            log.warning(
                "session %s: permission answer for %s counts as a refusal: %s",
                self._runtime.session_id,
                request.call_id,
                answer.note,
            )
        if answer.choice in (Choice.ALLOW_ALWAYS, Choice.REJECT_ALWAYS):
            await self._remember(request, answer)
        if answer.choice in (Choice.ALLOW_ONCE, Choice.ALLOW_ALWAYS):
            return Verdict(True)
        return Verdict(False, "the user refused to run it")

    async def _remember(self, request: PermissionRequest, answer: PermissionAnswer) -> None:
        decision = Decision.ALLOW if answer.choice is Choice.ALLOW_ALWAYS else Decision.DENY
        rule = answer.rule
        if rule is None or not rule.matches(request.tool, request.subject):
            rule = Rule(decision, request.tool, Match.EXACT, request.subject)
        else:
            rule = Rule(decision, rule.tool, rule.match, rule.value)
        rules = self.rules
        if rule not in rules:
            await self._runtime.set_rules((*rules, rule))

    def _remember_settled(self, call_id: str, answer: asyncio.Future[PermissionAnswer]) -> None:
        answered = answer.done() and not answer.cancelled()
        self._settled[call_id] = "was already answered" if answered else "is no longer waiting"
        self._settled.move_to_end(call_id)
        while len(self._settled) > SETTLED_REMEMBERED:
            self._settled.popitem(last=False)

    def answer_over_http(self, call_id: str, option_id: str) -> None:
        """`POST /agent/permissions`: the first answer wins; a second one is refused
        (InvalidState, 409), also once the turn has gone on; an id this runtime never
        asked about is NothingPending (404); an unknown option is InvalidInput (400)."""
        try:
            choice = Choice(option_id)
        except ValueError:
            options = ", ".join(c.value for c in Choice)
            raise InvalidInput("optionId", f"must be one of {options}") from None
        waiting = self.pending.get(call_id)
        if waiting is None:
            ended = self._settled.get(call_id)
            if ended is not None:
                raise InvalidState(f"the permission request for {call_id} {ended}")
            raise NothingPending(self._runtime.session_id, call_id)
        if waiting.answer.done():
            raise InvalidState(f"the permission request for {call_id} was already answered")
        waiting.answer.set_result(PermissionAnswer(choice))
