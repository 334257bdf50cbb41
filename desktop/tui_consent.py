"""The terminal client's consent: approvals asked by the sidecar (with the diff of a write)
answered with y/a/n/N, the session's permission rules (`/rules`) and its MCP servers
(`/mcp`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop.tui_changes import APPROVAL_DIFF_LINES, UsageError
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.host import SidecarHost


def permission_key(params: dict[str, Any]) -> tuple[Any, Any]:
    return params.get("sessionId"), (params.get("toolCall") or {}).get("toolCallId")


class ConsentCommands:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    say: Callable[[str], None]
    clean: Callable[[str], str]
    show_call_diffs: Callable[[dict[str, Any], int], None]
    waiting: list[dict[str, Any]]  # permission requests, oldest first

    def show_permission(self, params: dict[str, Any]) -> None:
        self.waiting.append(params)
        call = params.get("toolCall") or {}
        sid = str(params.get("sessionId"))
        where = next(
            (
                c.get("content", {}).get("text", "").splitlines()[-1]
                for c in call.get("content") or []
                if c.get("type") == "content"
            ),
            "",
        )
        label = "" if sid == self.current else f" [{sid[:9]}]"
        self.say(self.clean(f"approve{label}? {call.get('title')} {where}".rstrip()))
        self.show_call_diffs(call, APPROVAL_DIFF_LINES)  # a write: exactly what it will write
        self.say("  y once · a always · n reject · N always reject")

    def answer_waiting(self, word: str) -> bool:
        choice = {"y": "allow_once", "a": "allow_always", "n": "reject_once", "N": "reject_always"}
        if not self.waiting or word not in choice:
            return False
        params = self.waiting.pop(0)
        call_id = str((params.get("toolCall") or {}).get("toolCallId"))
        if not self.host.answer_permission(str(params.get("sessionId")), call_id, choice[word]):
            self.say("that request is no longer waiting")
        elif word in "nN":
            self.say("[refused]")
        return True

    async def cmd_rules(self, arg: str) -> None:
        if self.current is None:
            raise UsageError("no current session")
        got = await self.host.request(Method.PERMISSIONS, {"sessionId": self.current})
        rules = got["rules"]
        words = arg.split()
        if words and words[0] == "rm":
            if len(words) != 2 or not words[1].isdigit() or not 1 <= int(words[1]) <= len(rules):
                raise UsageError(f"usage: /rules rm N (1..{len(rules)})")
            rules = [r for i, r in enumerate(rules, 1) if i != int(words[1])]
            params = {"sessionId": self.current, "rules": rules}
            rules = (await self.host.request(Method.SET_PERMISSIONS, params))["rules"]
        if not rules:
            self.say("no rules; answering a (always) or N (always reject) adds one")
        for i, rule in enumerate(rules, 1):
            how = "starting with" if rule["match"] == "prefix" else "exactly"
            self.say(f"{i}. {rule['decision']} {rule['tool']} {how} {rule['value']!r}")

    async def cmd_mcp(self, arg: str) -> None:
        if self.current is None:
            raise UsageError("no current session")
        words = arg.split()
        if words and words[0] == "reconnect":
            if len(words) != 2:
                raise UsageError("usage: /mcp reconnect NAME")
            params = {"sessionId": self.current, "name": words[1]}
            server = await self.host.request(Method.MCP_RECONNECT, params)
            self.say(f"{server['name']}: {server['status']}, {server['tools']} tools")
            return
        servers = (await self.host.request(Method.STATUS, {"sessionId": self.current}))[
            "mcpServers"
        ]
        if not servers:
            self.say("no MCP servers in this session")
        for server in servers:
            error = f" — {server['error']}" if server.get("error") else ""
            self.say(
                f"{server['name']} ({server['transport']}): {server['status']}, "
                f"{server['tools']} tools{error}"
            )
