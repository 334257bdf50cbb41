"""The sidecar as an external agent's ACP client, for one session: what the agent may ask.

Everything the agent asks for this session goes through the session's host, as our own
loop's tools do: `session/request_permission` through the session's consent (rules, the
approval setting, the user over ACP or HTTP); `fs/read_text_file` and `fs/write_text_file`
through our file tools (confined to the cwd, the data dirs refused, a write checkpointed
first and written safely); `terminal/*` through the session's sandboxed command backend.
The connection's router (`router.py`) hands each message to the session it names; what
names another session is dropped or refused here too. No request of the agent can take
the sidecar down: a failure is the request's error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import shlex
from dataclasses import dataclass, field
from typing import Any, Final

from acp import RequestError, schema

from protocol.values import Sandbox
from sidecar.agent.backends.groups import CommandResult
from sidecar.agent.backends.output import CommandOutput
from sidecar.agent.external.relay import Relay, tool_kind
from sidecar.agent.host import EngineHost
from sidecar.agent.tools import files
from sidecar.domain.events import ToolKind
from sidecar.domain.files import FileDiff, Location
from sidecar.domain.permissions import Choice, PermissionRequest

log = logging.getLogger(__name__)

TERMINAL_OUTPUT_LIMIT: Final = 1024 * 1024  # bytes of a terminal's output kept, at most
_ALLOW_ORDER: Final = (Choice.ALLOW_ONCE, Choice.ALLOW_ALWAYS)
_REJECT_ORDER: Final = (Choice.REJECT_ONCE, Choice.REJECT_ALWAYS)


@dataclass(slots=True)
class _Terminal:
    output: CommandOutput
    task: asyncio.Task[CommandResult]
    chunks: list[str] = field(default_factory=list)


def _option(options: list[schema.PermissionOption], kinds: tuple[Choice, ...]) -> str | None:
    """The agent's own option id for the first of `kinds` it offers."""
    for kind in kinds:
        for option in options:
            if option.kind == kind.value:
                return option.option_id
    return None


class HostClient:
    """One agent session's client side; `session_id` is the agent's id, set once known."""

    def __init__(self, agent: str, host: EngineHost, relay: Relay) -> None:
        self._host = host
        self._relay = relay
        self._agent = agent
        self.session_id: str | None = None
        self._terminals: dict[str, _Terminal] = {}
        self._numbers = itertools.count(1)
        self._allowed: set[str] = set()  # calls the user (or a rule) allowed this turn
        # The SDK runs each message in its own task: updates are handled one at a time,
        # in the order they arrived (the lock is fair), and a request waits for those
        # that came before it (a permission request for a call just announced).
        self._order = asyncio.Lock()

    def _ours(self, session_id: str, what: str) -> bool:
        if self.session_id is not None and session_id != self.session_id:
            log.warning(
                "agent %s: %s for session %r, not this one: dropped",
                self._agent,
                what,
                session_id[:80],
            )
            return False
        return True

    def _refuse(self, session_id: str, what: str) -> None:
        if not self._ours(session_id, what):
            raise RequestError.invalid_params({"sessionId": "not this agent's session"})

    # ---- updates ---------------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        async with self._order:
            if self._ours(session_id, "an update"):
                await self._relay.update(update)

    async def settled(self) -> None:
        """Every update that arrived before now has been handled."""
        async with self._order:
            pass

    # ---- consent ---------------------------------------------------------------------

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        self._refuse(session_id, "a permission request")
        await self.settled()
        call_id = tool_call.tool_call_id
        if not self._relay.known(call_id):
            log.warning("agent %s: permission asked for unannounced call %r", self._agent, call_id)
            await self._relay.announce(tool_call)
        host = self._host
        title = tool_call.title or self._relay.call_title(call_id)
        kind = tool_kind(tool_call.kind) if tool_call.kind else self._relay.call_kind(call_id)
        raw_input = tool_call.raw_input if isinstance(tool_call.raw_input, dict) else {}
        diffs = tuple(
            FileDiff(item.path, item.old_text, item.new_text)
            for item in tool_call.content or ()
            if isinstance(item, schema.FileEditToolCallContent)
        )
        locations = tuple(Location(item.path, item.line) for item in tool_call.locations or ())
        request = PermissionRequest(
            call_id,
            f"{self._agent}:{kind.value}",
            title,
            kind,
            title,
            raw_input,
            host.cwd,
            host.sandbox,
            diffs=diffs,
            locations=locations,
        )
        verdict = await host.authorize(request)
        if verdict.cancelled:
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        chosen = _option(options, _ALLOW_ORDER if verdict.allowed else _REJECT_ORDER)
        if chosen is None:
            # No option says what the verdict says: never pick one that says otherwise.
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        if verdict.allowed:
            self._allowed.add(call_id)
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def end_turn(self) -> None:
        self._allowed.clear()

    async def _consent_for(self, title: str, kind: ToolKind, subject: str, **more: Any) -> None:
        """A write or command the agent asks us for: allowed without asking again when a
        call the user allowed is still open; otherwise asked now (rules, setting, user)."""
        if any(call in self._allowed for call in self._relay.running_calls()):
            return
        call_id = f"{self._agent}-fs-{next(self._numbers)}"
        request = PermissionRequest(
            call_id,
            f"{self._agent}:{kind.value}",
            title,
            kind,
            subject,
            {},
            self._host.cwd,
            self._host.sandbox,
            **more,
        )
        verdict = await self._host.authorize(request)
        if not verdict.allowed:
            raise RequestError(-32000, f"not allowed: {verdict.reason or 'refused'}")

    # ---- files -----------------------------------------------------------------------

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> schema.ReadTextFileResponse:
        self._refuse(session_id, "fs/read_text_file")
        host = self._host
        try:
            text = await asyncio.to_thread(files.read_text, host.cwd, path, host.hidden)
        except files.ToolError as exc:
            raise RequestError(-32000, str(exc)) from None
        # A missing file reads as empty: agents read before they create (and some fail the
        # write if the read was an error).
        text = text or ""
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = None if limit is None else start + max(limit, 0)
            text = "".join(lines[start:end])
        return schema.ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse | None:
        self._refuse(session_id, "fs/write_text_file")
        host = self._host
        if host.sandbox is Sandbox.READ_ONLY:
            raise RequestError(-32000, "refused: the session's sandbox is read-only")
        arguments = {"path": path, "content": content}
        try:
            plan = await asyncio.to_thread(
                files.plan_write, host.cwd, files.WRITE_FILE, arguments, False, host.hidden
            )
        except files.ToolError as exc:
            raise RequestError(-32000, f"not written: {exc}") from None
        diff = FileDiff(str(plan.target), plan.old_text, plan.new_text)
        await self._consent_for(
            f"Write {plan.display}",
            ToolKind.EDIT,
            plan.display,
            diffs=(diff,),
            locations=(Location(str(plan.target), plan.line),),
        )
        await host.before_tool_call()  # the turn's checkpoint, before anything changes
        try:
            await asyncio.to_thread(files.apply_write, plan)
        except files.ToolError as exc:
            raise RequestError(-32000, f"not written: {exc}") from None
        return schema.WriteTextFileResponse()

    # ---- terminals -------------------------------------------------------------------

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[schema.EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> schema.CreateTerminalResponse:
        self._refuse(session_id, "terminal/create")
        host = self._host
        line = shlex.join([command, *(args or [])])
        if env:
            line = shlex.join(["env", *(f"{v.name}={v.value}" for v in env)]) + " " + line
        if cwd:
            try:
                where = files.resolve(host.cwd, cwd)
            except files.ToolError as exc:
                raise RequestError(-32000, f"bad cwd: {exc}") from None
            if not files.inside(host.cwd, where):
                raise RequestError(-32000, f"refused: cwd {where} is outside the session")
            line = f"cd {shlex.quote(str(where))} && {line}"
        if host.sandbox is not Sandbox.READ_ONLY:
            await self._consent_for(line, ToolKind.EXECUTE, line)
        await host.before_tool_call()
        terminal_id = f"term-{next(self._numbers)}"
        chunks: list[str] = []
        output = host.command_output(terminal_id, chunks.append)
        task = asyncio.create_task(host.execute(line, output), name=f"terminal {terminal_id}")
        self._terminals[terminal_id] = _Terminal(output, task, chunks)
        return schema.CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, session_id: str, terminal_id: str) -> _Terminal:
        self._refuse(session_id, "a terminal request")
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise RequestError.invalid_params({"terminalId": f"no terminal {terminal_id!r}"})
        return terminal

    @staticmethod
    def _exit_status(terminal: _Terminal) -> schema.TerminalExitStatus | None:
        if not terminal.task.done() or terminal.task.cancelled():
            return None if not terminal.task.done() else schema.TerminalExitStatus(signal="KILL")
        if terminal.task.exception() is not None:
            return schema.TerminalExitStatus(exit_code=None, signal=None)
        result = terminal.task.result()
        return schema.TerminalExitStatus(exit_code=result.exit_code)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.TerminalOutputResponse:
        terminal = self._terminal(session_id, terminal_id)
        text = "".join(terminal.chunks)
        truncated = len(text.encode()) > TERMINAL_OUTPUT_LIMIT
        if truncated:
            text = text.encode()[-TERMINAL_OUTPUT_LIMIT:].decode("utf-8", "ignore")
        return schema.TerminalOutputResponse(
            output=text, truncated=truncated, exit_status=self._exit_status(terminal)
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.WaitForTerminalExitResponse:
        terminal = self._terminal(session_id, terminal_id)
        await asyncio.wait([terminal.task])
        status = self._exit_status(terminal)
        return schema.WaitForTerminalExitResponse(
            exit_code=status.exit_code if status else None,
            signal=status.signal if status else None,
        )

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.KillTerminalResponse | None:
        terminal = self._terminal(session_id, terminal_id)
        terminal.task.cancel()  # the backend stops the command's group, staged
        await asyncio.wait([terminal.task])
        return schema.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.ReleaseTerminalResponse | None:
        terminal = self._terminal(session_id, terminal_id)
        terminal.task.cancel()
        await asyncio.wait([terminal.task])
        terminal.output.close()
        del self._terminals[terminal_id]
        return schema.ReleaseTerminalResponse()

    async def close(self) -> None:
        """The generation ends: every terminal's command is stopped."""
        for terminal in self._terminals.values():
            terminal.task.cancel()
        if self._terminals:
            await asyncio.wait([t.task for t in self._terminals.values()])
        for terminal in self._terminals.values():
            terminal.output.close()
        self._terminals.clear()
