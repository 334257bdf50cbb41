"""A terminal client over the same SidecarHost as the window, for people without a display.

stdin is read by a daemon thread with plain `os.read`: the same on a pipe and a pty (tmux),
the shared terminal is never made non-blocking, no reader lock can stall exit. Turns run as
tasks, so `/cancel` works mid-turn. Views are asked of the sidecar, never cached here.
File changes, diffs and rewinding are in `desktop.tui_changes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
from typing import Any

from desktop import mcp_servers, sessions
from desktop.client import RpcError
from desktop.host import SidecarHost
from desktop.tui_changes import APPROVAL_DIFF_LINES, ChangesCommands, UsageError
from protocol.methods import Method

HELP = """/sessions              all sessions; * marks the current one
/new [mode] [backend] [--mcp 'NAME=COMMAND|URL']  a session in this directory (craft|plan|ask,
                       pipe|pty), with MCP servers if given; becomes current
/switch ID             make ID current (a unique prefix will do); shows its last messages
/close [ID]  /resume [ID]  /forget ID   close (record kept), start again, delete (closed only)
/mode M  /cancel       set the current session's mode; stop its running turn (Ctrl-C too)
/rules [rm N]          the current session's permission rules; remove rule N
/mcp [reconnect NAME]  the current session's MCP servers and their tools; reconnect one
/changes [TURN]        what a turn (default: the last) changed: files with +/- and the diff
/rewind TURN [code|conversation|both] [--yes] [--force]   back to before TURN (default
                       both): shows what would change, then asks y/n (--yes: do not ask);
                       files changed outside the session since are left alone unless --force
/rewind undo           take back the last code rewind;  /rewind alone lists the turns
y a n N                answer a waiting approval: y once, a always, n reject, N always reject
quit                   close live sessions (records kept) and leave; Ctrl-D too
anything else (unknown /words included) is a prompt to the current session;
//text sends "/text" as it is (e.g. //mcp SERVER TOOL {json} for the offline provider)"""
TAIL = 6
QUIT_WORDS = {"quit", "/quit", "exit"}
EOF, QUIT_NOW = "\x00eof", "\x00quit"


def read_stdin(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str]) -> None:
    """Blocking line reader for a daemon thread; EOF (or a read error) queues EOF."""

    def put(item: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is already closed: we are exiting
            loop.call_soon_threadsafe(queue.put_nowait, item)

    pending = b""
    while True:
        try:
            chunk = os.read(0, 65536)
        except OSError:
            chunk = b""
        if not chunk:  # EOF: a last line without its newline still counts
            for item in ([pending.decode("utf-8", "replace")] if pending else []) + [EOF]:
                put(item)
            return
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            put(line.decode("utf-8", "replace").rstrip("\r"))


class Tui(ChangesCommands):
    def __init__(self, sidecar_args: list[str]) -> None:
        self.host = SidecarHost(sidecar_args)
        self.current: str | None = None
        self.turns: dict[asyncio.Task[None], str] = {}
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.interactive = os.isatty(0)
        self.col = "start"  # where the cursor is: "start" of a line, after a "prompt", mid-"stream"
        self.quitting = False
        self.exit_code = 0
        self._prompt_due = False
        self.handling = False  # a command is printing: no prompt in the middle of its output
        self.waiting: list[dict[str, Any]] = []  # permission requests, oldest first
        self.shown_state: dict[str, tuple[Any, Any, Any]] = {}
        self.tool_kinds: dict[str, str] = {}  # toolCallId -> ACP kind (execute, edit, read, ...)
        self.diff_shown: set[str] = set()
        self.colour = os.isatty(1) and os.environ.get("TERM", "dumb") != "dumb"

    # ---- output: async events may arrive at any time, so keep lines from running together ----

    def _write(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # nobody reads us any more: leave cleanly
            self.queue.put_nowait(QUIT_NOW)

    def say(self, line: str) -> None:
        """A whole line, on a line of its own."""
        self._write(("\n" if self.col != "start" else "") + line + "\n")
        self.col = "start"
        self.schedule_prompt()

    def stream(self, text: str) -> None:
        """Streamed text (agent chunks, command output), appended as it arrives."""
        if not text:
            return
        self._write(("\n" if self.col == "prompt" else "") + text)
        self.col = "start" if text.endswith("\n") else "stream"

    def running(self, session_id: str | None) -> bool:
        return session_id is not None and session_id in self.turns.values()

    def schedule_prompt(self) -> None:
        """Show the prompt once things settle; never in the middle of the current turn."""
        if self.interactive and not self._prompt_due:
            self._prompt_due = True
            asyncio.get_running_loop().call_soon(self._show_prompt)

    def _show_prompt(self) -> None:
        self._prompt_due = False
        if self.quitting or self.handling or self.col == "prompt" or self.running(self.current):
            return
        label = self.current[:9] if self.current else ""
        self._write(("\n" if self.col == "stream" else "") + f"{label}> ")
        self.col = "prompt"

    # ---- sidecar events ----

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if self.quitting or params.get("sessionId") != self.current:
            return
        if method == Method.STATE:
            # The summary comes on every change (an approval asked, a title); a line is
            # worth printing only when the state itself moved.
            shown = (params.get("status"), params.get("generation"), params.get("lastError"))
            if self.shown_state.get(str(params.get("sessionId"))) == shown:
                return
            self.shown_state[str(params.get("sessionId"))] = shown
            error = f": {params['lastError']}" if params.get("status") == "error" else ""
            self.say(f"[{params.get('status')}, gen {params.get('generation')}{error}]")
        elif method == Method.SESSION_UPDATE:
            self.show_update(params.get("update") or {})
        elif method == Method.TURN_CHANGES:
            self.show_turn_changes(params)

    def show_update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self.stream(str((update.get("content") or {}).get("text") or ""))
        elif kind == "tool_call":
            call_kind = str(update.get("kind") or "execute")
            self.tool_kinds[str(update.get("toolCallId"))] = call_kind
            if call_kind == "execute":
                self.say(
                    f"$ {(update.get('rawInput') or {}).get('command') or update.get('title')}"
                )
            else:
                self.say(f"[{call_kind}] {update.get('title')}")
        elif kind == "tool_call_update":
            output = (update.get("_meta") or {}).get("output")
            raw = update.get("rawOutput")
            call_kind = self.tool_kinds.get(str(update.get("toolCallId")), "execute")
            if call_kind != "execute" and update.get("status") in ("completed", "failed"):
                self.tool_kinds.pop(str(update.get("toolCallId")), None)
                self.show_file_tool_end(update)
            elif output:
                self.stream(str(output))
            elif isinstance(raw, dict):
                code = raw.get("exitCode")
                self.say("[cancelled]" if raw.get("cancelled") else f"[exit {code}]")

    def on_host_event(self, kind: str, data: dict[str, Any]) -> None:
        if self.quitting:
            return
        if kind == "permission_requested":
            self.show_permission(data)
            return
        if kind == "permission_settled":
            self.waiting = [
                p
                for p in self.waiting
                if permission_key(p) != (data.get("sessionId"), data.get("toolCallId"))
            ]
            return
        if kind == "sidecar_exited":
            self.say(f"sidecar exited (code {data.get('code')}); restarting it")
        elif kind == "sidecar_restarted":
            pid = data.get("pid")
            self.say(f"sidecar restarted (pid {pid}): live sessions are now closed and resumable")
        elif kind == "sidecar_failed":
            self.say(f"error: the sidecar cannot be restarted ({data.get('reason')}); quitting")
            self.exit_code = 1
            self.queue.put_nowait(QUIT_NOW)

    # ---- consent ----

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
        self.say(f"approve{label}? {call.get('title')} {where}".rstrip())
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

    # ---- commands ----

    async def list_sessions(self) -> list[dict[str, Any]]:
        return await sessions.list_all(self.host)

    async def resolve(self, arg: str, *, default_current: bool = False) -> dict[str, Any]:
        """The summary of the session `arg` names: a full id or a unique prefix (with or
        without `sess_`); no argument means the current session when that makes sense."""
        if not arg:
            if not default_current:
                raise UsageError("give a session id (see /sessions)")
            if self.current is None:
                raise UsageError("no current session; /new creates one, /switch ID picks one")
            arg = self.current
        by_id = {s["sessionId"]: s for s in await self.list_sessions()}
        found = [arg] if arg in by_id else [i for i in by_id if i.startswith((arg, "sess_" + arg))]
        if not found:
            raise UsageError(f"no session matches '{arg}' (see /sessions)")
        if len(found) > 1:
            raise UsageError(f"'{arg}' matches {len(found)} sessions; type more of the id")
        return by_id[found[0]]

    async def cmd_sessions(self, arg: str) -> None:
        sessions = await self.list_sessions()
        if not sessions:
            self.say("no sessions yet; /new creates one")
            return
        row = "{} {:<37} {:<8} {:>3}  {:<5} {:<7} {:<20} {}{}".format
        self.say(row(" ", "ID", "STATUS", "GEN", "MODE", "BACKEND", "TITLE", "CWD", ""))
        for s in sessions:
            mark = "*" if s["sessionId"] == self.current else " "
            note = "  [interrupted]" if s.get("interrupted") else ""
            fields = [s[k] for k in ("sessionId", "status", "generation", "mode", "backend")]
            self.say(row(mark, *fields, s["title"][:20], s["cwd"], note))

    async def cmd_new(self, arg: str) -> None:
        usage = "usage: /new [mode] [backend] [--mcp 'NAME=COMMAND ARGS|URL']..."
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            raise UsageError(f"{usage} ({exc})") from None
        servers: list[dict[str, Any]] = []
        plain: list[str] = []
        while words:
            word = words.pop(0)
            if word != "--mcp":
                plain.append(word)
                continue
            if not words or "=" not in words[0]:
                raise UsageError(usage)
            name, _, target = words.pop(0).partition("=")
            try:
                servers.append(mcp_servers.to_acp(name, target))
            except mcp_servers.BadServer as exc:
                raise UsageError(str(exc)) from None
        if len(plain) > 2:
            raise UsageError(usage)
        meta = dict(zip(("mode", "backend"), plain, strict=False))
        params = {"cwd": os.getcwd(), "mcpServers": servers, "_meta": meta}
        s = (await self.host.request(Method.SESSION_NEW, params))["_meta"]
        self.current = s["sessionId"]
        self.say(f"created {self.current} ({describe_summary(s)}, backend {s['backend']})")

    async def cmd_switch(self, arg: str) -> None:
        s = await self.resolve(arg)
        sid = self.current = s["sessionId"]
        hint = "" if s.get("live") else "; not live: /resume to continue it"
        self.say(f"switched to {sid} ({describe_summary(s)}{hint})")
        offset = max(0, s["messageCount"] - TAIL)
        params = {"sessionId": sid, "offset": offset, "limit": TAIL}
        if offset:
            self.say(f"... {offset} earlier message(s)")
        for entry in (await self.host.request(Method.MESSAGES, params))["messages"]:
            self.show_entry(entry)

    def show_entry(self, entry: dict[str, Any]) -> None:
        """One `TranscriptEntry` (protocol.models) as lines."""
        kind, text = entry.get("type"), str(entry.get("text") or "").rstrip()
        if kind == "user":
            self.say(f"you: {text}")
        elif kind == "assistant":
            if text:
                self.say(f"agent: {text}")
            for call in entry.get("toolCalls") or []:
                tool = call.get("tool")
                self.say(
                    f"$ {call.get('title')}" if tool == "bash" else f"[{tool}] {call.get('title')}"
                )
        elif kind == "tool_result":
            lines = text.splitlines()
            self.say("tool: " + "\n".join(lines[:8] + (["..."] if len(lines) > 8 else [])))
        elif kind == "marker":
            self.say(f"[{entry.get('kind')}]")

    async def cmd_close(self, arg: str) -> None:
        sid = (await self.resolve(arg, default_current=True))["sessionId"]
        s = (await self.host.request(Method.SESSION_CLOSE, {"sessionId": sid}))["_meta"]
        self.say(f"closed {sid} ({describe_summary(s)}); the record is kept")

    async def cmd_resume(self, arg: str) -> None:
        found = await self.resolve(arg, default_current=True)
        sid = found["sessionId"]
        s = await sessions.resume(self.host, sid, found["cwd"])
        self.current = sid
        self.say(f"resumed {sid} ({describe_summary(s)})")

    async def cmd_forget(self, arg: str) -> None:
        sid = (await self.resolve(arg))["sessionId"]
        await self.host.request(Method.SESSION_DELETE, {"sessionId": sid})
        if self.current == sid:
            self.current = None
        self.say(f"forgot {sid}")

    async def cmd_mode(self, arg: str) -> None:
        if not arg or self.current is None:
            raise UsageError("usage: /mode craft|plan|ask, on a current session")
        await self.host.request(Method.SESSION_SET_MODE, {"sessionId": self.current, "modeId": arg})
        self.say(f"mode set to {arg}")

    async def cmd_cancel(self, arg: str) -> None:
        sid = (await self.resolve(arg, default_current=True))["sessionId"]
        result = await self.host.request(Method.SESSION_CANCEL, {"sessionId": sid})
        if not (isinstance(result, dict) and result.get("cancelled")):
            self.say("nothing to cancel")

    async def cmd_help(self, arg: str) -> None:
        self.say(HELP)

    # ---- turns and the input loop ----

    def send_prompt(self, text: str) -> None:
        if self.current is None:
            self.say("no current session: /new creates one, /switch ID picks one")
            return
        task = asyncio.create_task(self.turn(self.current, text))
        self.turns[task] = self.current

    async def turn(self, sid: str, text: str) -> None:
        """One prompt; its stream is printed by on_notification, its end here."""
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        try:
            result = await self.host.request(Method.SESSION_PROMPT, params)
        except (RpcError, ConnectionError, TimeoutError) as exc:
            if not self.quitting:
                self.say(f"error: {describe(exc)}")
            return
        finally:
            self.turns.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self.schedule_prompt()
        stop = result.get("stopReason")
        if self.quitting:
            return
        if sid != self.current:
            self.say(f"[{sid[:9]}: turn ended: {stop}]")
        elif stop != "end_turn":
            self.say(f"[turn ended: {stop}]")
        elif self.col == "stream":
            self.stream("\n")

    async def handle(self, line: str) -> None:
        if self.pending_rewind is not None:
            try:
                if await self.answer_rewind(line.strip()):
                    return
            except (RpcError, ConnectionError, TimeoutError) as exc:
                self.say(f"error: {describe(exc)}")
                return
        if self.answer_waiting(line.strip()):
            return
        if line.strip().startswith("//"):  # a literal slash for the model: //mcp ... -> /mcp ...
            self.send_prompt(line.strip()[1:])
            return
        word, _, arg = line.strip().partition(" ")
        command = getattr(self, "cmd_" + word[1:], None) if word.startswith("/") else None
        if command is None:
            self.send_prompt(line.strip())
            return
        self.handling = True
        try:
            await command(arg.strip())
        except (UsageError, RpcError, ConnectionError, TimeoutError) as exc:
            self.say(f"error: {describe(exc)}")
        finally:
            self.handling = False

    def on_sigint(self) -> None:
        """Ctrl-C cancels the current turn instead of killing the client."""
        if self.running(self.current):
            self.say("[cancelling]")
            asyncio.ensure_future(self.handle("/cancel"))
        else:
            self.say("(quit or Ctrl-D leaves)")

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.host.on_notification(self.on_notification)
        self.host.on_host_event(self.on_host_event)
        try:
            await self.host.start()
        except (OSError, ConnectionError, RpcError) as exc:
            client = self.host.client
            code = await client.close(timeout=5) if client else None  # and read all its stderr
            tail = "\n".join(list(client.stderr_tail)[-10:]) if client else ""
            why = exc if code is None else f"exit code {code}"
            print(f"error: the sidecar did not start ({why})\n{tail}", file=sys.stderr)
            await self.host.shutdown()
            return 1
        loop.add_signal_handler(signal.SIGINT, self.on_sigint)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.queue.put_nowait, QUIT_NOW)
        threading.Thread(target=read_stdin, args=(loop, self.queue), daemon=True).start()
        self.say(f"sidecar ready (pid {self.host.pid}); /help lists commands")
        try:
            while (line := await self.queue.get()) not in (EOF, QUIT_NOW):
                if self.interactive:
                    self.col = "start"  # the terminal echoed the user's Enter
                if line.strip() in QUIT_WORDS:
                    break
                if line.strip():
                    await self.handle(line)
                self.schedule_prompt()
            if line == EOF and self.turns:
                self.say("end of input: waiting for the running turn (Ctrl-C cancels it)")
                await asyncio.gather(*self.turns, return_exceptions=True)
        finally:
            self.quitting = True
            await self.host.shutdown()
            for task in list(self.turns):
                task.cancel()
            await asyncio.gather(*self.turns, return_exceptions=True)
        self._write(("\n" if self.col != "start" else "") + "bye\n")
        return self.exit_code


def permission_key(params: dict[str, Any]) -> tuple[Any, Any]:
    return params.get("sessionId"), (params.get("toolCall") or {}).get("toolCallId")


def describe_summary(s: dict[str, Any]) -> str:
    return f"{s['status']}, gen {s['generation']}, mode {s['mode']}"


def describe(exc: BaseException) -> str:
    """The sidecar's own message for its refusals; a TimeoutError has none."""
    return exc.message if isinstance(exc, RpcError) else str(exc) or "the sidecar is not answering"


def main(sidecar_args: list[str]) -> int:
    """`python -m desktop --tui` / `repl`: sidecar options (--data-dir, --provider, ...) pass through."""
    logging.getLogger("desktop.host").setLevel(logging.CRITICAL)  # its events are shown instead
    try:
        return asyncio.run(Tui(list(sidecar_args)).run())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
