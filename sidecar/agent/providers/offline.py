"""A deterministic provider that needs no network: the default, and the test workhorse.

What it answers, by the last message of the context:
- a tool result        -> "`<command>` exited with status N." plus the first output lines
- user `/sleep S [t]`  -> waits S seconds (cancellable), then answers "Slept S s. t"
- user `/fail [msg]`   -> raises ProviderError (a scripted provider failure)
- user `$ CMD` or `/bash CMD` -> a `bash` tool call for CMD when the mode has tools,
                          else says tools are unavailable in this mode
- user `/mcp SERVER TOOL {json}` -> a call of that MCP tool with those arguments
- user `/read PATH [OFFSET [LIMIT]]`, `/ls [PATH [PATTERN]]`, `/write PATH TEXT` (TEXT:
  the rest of the message, newlines included), `/edit PATH OLD NEW [all]` (shell-style
  quoting) -> a call of read_file, list_files, write_file, edit_file
- user `/tool NAME {json}` -> a call of any tool by name with exactly those arguments
  (offered or not: what a misbehaving model would do)
- a compaction request -> "Summary of N earlier messages. The user asked: ..."
- anything else        -> "Echo: <text>", streamed word by word
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
import uuid
from collections.abc import Sequence
from typing import Any

from sidecar.agent.context import COMPACTION_PROMPT
from sidecar.agent.providers.base import (
    ProviderCommand,
    ProviderReply,
    TextCallback,
    ToolCall,
    Usage,
)
from sidecar.domain.errors import ProviderError

OUTPUT_PREVIEW_LINES = 20
STREAM_BATCH = 32  # words streamed between two turns given to the event loop


CHARS_PER_TOKEN = 4  # the usual rough estimate, for usage reports without a tokenizer

COMMANDS = (
    ProviderCommand("bash", "run a shell command (the same as `$ CMD`)", "command"),
    ProviderCommand("sleep", "wait some seconds, then answer (cancellable)", "seconds [text]"),
    ProviderCommand("fail", "make the provider fail (to try error recovery)", "reason"),
    ProviderCommand("mcp", "call an MCP tool", "server tool {json arguments}"),
    ProviderCommand("read", "read a file (read_file)", "path [offset [limit]]"),
    ProviderCommand("ls", "list files (list_files)", "[path [pattern]]"),
    ProviderCommand("write", "write a file (write_file)", "path text"),
    ProviderCommand("edit", "replace text in a file (edit_file)", "path old new [all]"),
    ProviderCommand("tool", "call any tool with raw arguments", "name {json}"),
)


def _call(name: str, arguments: str) -> ProviderReply:
    # Ids unique across generations: a resumed session's transcript already holds the ids
    # earlier runtimes gave out.
    call = ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=arguments)
    return ProviderReply(text="", tool_calls=[call], finish_reason="tool_calls")


def _file_tool_call(text: str) -> tuple[str, str, bool] | None:
    """(tool, JSON arguments, whether to check the mode offers it) for a file command."""
    word, _, rest = text.partition(" ")
    if word == "/tool":
        name, _, arguments = rest.strip().partition(" ")
        return name, arguments.strip() or "{}", False
    if word == "/write":
        path, _, content = rest.lstrip(" ").partition(" ")
        return "write_file", json.dumps({"path": path, "content": content}), True
    if word not in ("/read", "/ls", "/edit"):
        return None
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ProviderError(f"offline provider: {word}: {exc}") from None
    if word == "/ls":
        args: dict[str, Any] = dict(zip(("path", "pattern"), words, strict=False))
        return "list_files", json.dumps(args), True
    if word == "/read":
        args = {"path": words[0] if words else ""}
        for key, value in zip(("offset", "limit"), words[1:], strict=False):
            args[key] = int(value) if value.isdigit() else value
        return "read_file", json.dumps(args), True
    if len(words) < 3:
        raise ProviderError("offline provider: /edit needs PATH OLD NEW")
    args = {"path": words[0], "old_text": words[1], "new_text": words[2]}
    if words[3:] == ["all"]:
        args["replace_all"] = True
    return "edit_file", json.dumps(args), True


def estimate(messages: Sequence[dict[str, Any]], reply: str) -> Usage:
    sent = sum(len(str(m.get("content") or "")) for m in messages)
    return Usage(-(-sent // CHARS_PER_TOKEN), -(-len(reply) // CHARS_PER_TOKEN))


class OfflineProvider:
    context_window: int | None = None
    commands: tuple[ProviderCommand, ...] = COMMANDS
    takes_images: bool = False  # it reads text only

    def __init__(self, model: str = "offline-echo") -> None:
        self.model = model

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
        on_thought: TextCallback | None = None,
    ) -> ProviderReply:
        reply = await self._reply(messages, tools, on_text)
        return dataclasses.replace(reply, usage=estimate(messages, reply.text))

    async def _reply(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        on_text: TextCallback,
    ) -> ProviderReply:
        if messages and messages[0].get("content") == COMPACTION_PROMPT:
            return await self._stream(self._summarize(str(messages[-1].get("content"))), on_text)
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last.get("role") == "tool":
            return await self._stream(self._describe_tool_result(messages, last), on_text)
        text = str(last.get("content") or "").strip()
        if text.startswith("/sleep"):
            seconds, _, rest = text.removeprefix("/sleep").strip().partition(" ")
            try:
                delay = float(seconds)
            except ValueError:
                raise ProviderError(
                    f"offline provider: /sleep needs seconds, got {seconds!r}"
                ) from None
            await asyncio.sleep(delay)
            return await self._stream(f"Slept {seconds} s. {rest}".strip(), on_text)
        if text.startswith("/fail"):
            reason = text.removeprefix("/fail").strip() or "scripted failure"
            raise ProviderError(f"offline provider: {reason}")
        if text.startswith("/mcp"):
            return await self._mcp_call(text.removeprefix("/mcp").strip(), tools, on_text)
        file_call = _file_tool_call(text)
        if file_call is not None:
            name, arguments, checked = file_call
            offered = any(t.get("function", {}).get("name") == name for t in tools)
            if checked and not offered:
                return await self._stream(
                    f"The {name} tool is not available in this mode.", on_text
                )
            return _call(name, arguments)
        for prefix in ("$ ", "/bash "):
            if text.startswith(prefix):
                command = text.removeprefix(prefix).strip()
                if not any(t.get("function", {}).get("name") == "bash" for t in tools):
                    return await self._stream(
                        f"Tools are not available in this mode, so I cannot run `{command}`.",
                        on_text,
                    )
                return _call("bash", json.dumps({"command": command}))
        return await self._stream(f"Echo: {text}", on_text)

    async def _mcp_call(
        self, words: str, tools: Sequence[dict[str, Any]], on_text: TextCallback
    ) -> ProviderReply:
        """`/mcp SERVER TOOL {json}`: a call of that MCP tool, by its public name."""
        server, _, rest = words.partition(" ")
        tool, _, arguments = rest.strip().partition(" ")
        arguments = arguments.strip() or "{}"
        names = [t.get("function", {}).get("name", "") for t in tools]
        wanted = f"{server}__{tool}"
        name = (
            wanted
            if wanted in names
            else next((n for n in names if n.startswith(f"{server}__") and tool in n), None)
        )
        if not server or not tool or name is None:
            offered = ", ".join(n for n in names if "__" in n) or "none"
            return await self._stream(
                f"No MCP tool {tool!r} of server {server!r} here (MCP tools: {offered}).", on_text
            )
        return _call(name, arguments)

    @staticmethod
    def _summarize(conversation: str) -> str:
        """Deterministic: how many messages, and what the user asked."""
        parts = conversation.split("\n\n")
        asked = [p.removeprefix("[user] ") for p in parts if p.startswith("[user] ")]
        quoted = "; ".join(a[:60] for a in asked[-5:])
        return f"Summary of {len(parts)} earlier messages. The user asked: {quoted}"

    @staticmethod
    def _describe_tool_result(messages: Sequence[dict[str, Any]], result: dict[str, Any]) -> str:
        command = "command"
        for message in reversed(messages):
            for call in message.get("tool_calls") or []:
                if call.get("id") == result.get("tool_call_id"):
                    try:
                        command = json.loads(call["function"]["arguments"])["command"]
                    except (KeyError, TypeError, ValueError):
                        command = "command"
        content = str(result.get("content") or "")
        tool = str(result.get("name") or "")
        if tool and tool != "bash":  # an MCP tool: its result as it came
            preview = "\n".join(content.splitlines()[:OUTPUT_PREVIEW_LINES])
            return f"`{tool}` returned:\n{preview}"
        status_line, _, output = content.partition("\n")
        preview = "\n".join(output.splitlines()[:OUTPUT_PREVIEW_LINES])
        return f"`{command}` {status_line.lower()}" + (f"\n{preview}" if preview else "")

    @staticmethod
    async def _stream(text: str, on_text: TextCallback) -> ProviderReply:
        """Word by word, as a model streams; the loop is given a turn every STREAM_BATCH
        words (a long answer never holds it, a short one costs no extra loop steps)."""
        words = text.split(" ")
        for index, word in enumerate(words):
            on_text(word if index == 0 else " " + word)
            if index % STREAM_BATCH == STREAM_BATCH - 1:
                await asyncio.sleep(0)
        return ProviderReply(text=text)

    async def aclose(self) -> None:
        return None
