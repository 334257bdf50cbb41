"""A terminal client over the same SidecarHost as the window, for people without a display.

On a terminal, lines are read with a real line editor (`desktop.tui_editor`: history,
completion, output printed above the prompt). On a pipe (or TERM=dumb) stdin is read by a
daemon thread with plain `os.read`: the shared terminal is never made non-blocking, no
reader lock can stall exit. Turns run as tasks, so `/cancel` works mid-turn. Views are
asked of the sidecar, never cached here. Sessions are in `desktop.tui_sessions`, approvals,
rules and MCP servers in `desktop.tui_consent`, command output in `desktop.tui_output`,
file changes, diffs and rewinding in `desktop.tui_changes`, the agent's plan in
`desktop.tui_plan`, worktrees and the per-hunk review in `desktop.tui_review`, `@`
mentions (sent as `resource_link` blocks beside the text) in `desktop.tui_mentions`, the
session's queue (a prompt typed while a turn runs waits in it; `/queue`) in
`desktop.tui_queue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import logging
import os
import re
import signal
import sys
import threading
from typing import Any

from desktop import sessions
from desktop.ansi import SgrFilter, strip_all
from desktop.client import RpcError
from desktop.host import SidecarHost
from desktop.tui_changes import ChangesCommands, UsageError
from desktop.tui_consent import ConsentCommands, permission_key
from desktop.tui_mentions import COMPLETIONS, mention_blocks
from desktop.tui_output import OutputView
from desktop.tui_plan import PlanView, plan_lines
from desktop.tui_queue import QueueCommands
from desktop.tui_review import ReviewCommands
from desktop.tui_sessions import SessionCommands
from protocol.errors import ErrorCode
from protocol.methods import Method

HELP = """/sessions              numbered: title, status, last activity, a preview; * is current
/new [--cwd DIR] [--title T] [--agent NAME] [mode] [backend] [--mcp 'NAME=COMMAND|URL']
                       a session (craft|plan|ask, pipe|pty; default: here, craft, pipe),
                       run by NAME from /agents (default: builtin, our own loop)
                       --worktree (or --branch B, --base B): in a new git worktree
/merge [merge|squash|rebase]   the current session's worktree into its base branch
/discard [N]           remove a closed session's worktree and branch (transcript kept)
/worktree [diff [PAGE]]  the current session's worktree: repo, path, branch, base,
                       ahead/behind, dirty; diff: the branch against its base, hunks numbered
/agents                the agents a session can run: builtin, presets, configured ones;
                       each available, or not installed with its install command
/switch N|ID           make it current (N from /sessions; an id prefix will do)
/close [N]  /resume [N]  /forget N   close (record kept), start again, delete (asks y/N)
/retry                 send the current session's last prompt again (after an error)
/mode M  /cancel [--clear]  set the current session's mode; stop its running turn (Ctrl-C
                       too): its queue is kept, paused (--clear: emptied)
/queue                 the current session's queue: messages typed while a turn runs wait
                       there and run in order as turns end (printed when it changes)
/queue remove N | edit N TEXT | move N TO | run   take one out, change its text, move
                       it, go on after a pause;  /now TEXT  cancel the turn, run TEXT next
/output [PAGE]         the last command's whole output, 200 lines a page
/rules [rm N]          the current session's permission rules; remove rule N
/mcp [reconnect NAME]  the current session's MCP servers and their tools; reconnect one
/changes [TURN]        what a turn (default: the last) changed: files with +/- and the diff
/review [TURN]         a turn's changes (default: the last), hunk by hunk, numbered 1, 2, ...
/review reject N [N...] [--force] | reject FILE   revert those hunks (or the whole file) of
                       that turn on disk (/rewind undo takes it back); --force: lines changed
                       since; /review accept N [N...]: mark them kept (✓, here only)
/rewind TURN [code|conversation|both] [--yes] [--force]   back to before TURN (default
                       both): shows what would change, then asks y/n (--yes: do not ask);
                       files changed outside the session since are left alone unless --force
/rewind undo           take back the last code rewind;  /rewind alone lists the turns
@PATH (or @"A PATH")   in a prompt: mention a file of the session's directory (completed as
                       you type on a terminal); the model gets its text beside yours
y a n N                answer a waiting approval: y once, a always, n reject, N always reject
quit                   close live sessions (records kept) and leave; Ctrl-D too
anything else is a prompt to the current session (queued while a turn runs); an unknown
/word is answered here, never sent; //text sends "/text" as it is (e.g. //mcp SERVER TOOL {json} for the offline provider)"""
QUIT_WORDS = {"quit", "/quit", "exit"}
COMMAND = re.compile(r"/[A-Za-z][\w-]*")
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


class Tui(
    SessionCommands, ConsentCommands, OutputView, ChangesCommands, ReviewCommands, QueueCommands
):
    def __init__(self, sidecar_args: list[str]) -> None:
        self.host = SidecarHost(sidecar_args)
        self.current: str | None = None
        self.turns: dict[asyncio.Task[None], str] = {}
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.sidecar_args = sidecar_args
        self.interactive = os.isatty(0)
        # The line editor on a real terminal; plain reads (and a printed prompt) otherwise.
        self.editing = (
            self.interactive and os.isatty(1) and os.environ.get("TERM", "dumb") != "dumb"
        )
        self.editor: Any = None
        self.col = "start"  # where the cursor is: "start" of a line, after a "prompt", mid-"stream"
        self.quitting = False
        self.exit_code = 0
        self._prompt_due = False
        self.handling = False  # a command is printing: no prompt in the middle of its output
        self.waiting: list[dict[str, Any]] = []  # permission requests, oldest first
        self.shown_state: dict[str, tuple[Any, Any, Any]] = {}
        self.tool_kinds: dict[str, str] = {}  # toolCallId -> ACP kind (execute, edit, read, ...)
        self.diff_shown: set[str] = set()
        self.review_marks: dict[tuple[str, int], dict[str, str]] = {}
        self.reverts: dict[str, list[list[str]]] = {}
        self.plans = PlanView()  # the agent's plan, printed when it changes
        self.colour = os.isatty(1) and os.environ.get("TERM", "dumb") != "dumb"
        self.states: dict[str, dict[str, Any]] = {}  # sessionId -> its last summary seen
        self.numbers: list[str] = []
        self.known: list[dict[str, Any]] = []
        self.last_prompt: dict[str, str] = {}
        self.commands: dict[str, Any] = {}
        self.last_command: dict[str, str] = {}
        self.sized: dict[str, tuple[int, int]] = {}
        self.agent_filter = SgrFilter()  # agent text is untrusted too
        self.offered: dict[str, set[str]] = {}  # sessionId -> paths completion offered
        self.queue_ids: dict[str, list[str]] = {}  # sessionId -> queued ids as last printed
        self.queue_items: dict[str, dict[str, dict[str, Any]]] = {}

    # ---- output: async events may arrive at any time, so keep lines from running together ----

    def _write(self, text: str) -> None:
        try:
            sys.stdout.write(text)
            if not self.editing or text.endswith("\n"):
                # (The editor's stdout proxy prints a line once it is whole: a partial
                # line waits for the rest rather than being drawn under the prompt.)
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
        """Show the prompt once things settle; never in the middle of the current turn
        (the line editor draws its own)."""
        if self.editing and self.editor is not None:
            self.editor.redraw()
            return
        if self.interactive and not self._prompt_due:
            self._prompt_due = True
            asyncio.get_running_loop().call_soon(self._show_prompt)

    def prompt_text(self) -> str:
        label = self.current[:9] if self.current else ""
        return f"{label}> "

    def _show_prompt(self) -> None:
        self._prompt_due = False
        if self.quitting or self.handling or self.col == "prompt" or self.running(self.current):
            return
        self._write(("\n" if self.col == "stream" else "") + self.prompt_text())
        self.col = "prompt"

    # ---- sidecar events ----

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == Method.STATE and params.get("sessionId"):
            sid = str(params["sessionId"])
            if sessions.is_older(params, self.states.get(sid)):
                return  # a late summary: the newer one seen before it stays (and is shown)
            self.states[sid] = params
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
            self.show_update(str(params.get("sessionId")), params.get("update") or {})
        elif method == Method.TURN_CHANGES:
            self.show_turn_changes(params)
        elif method == Method.QUEUE_UPDATE:
            self.show_queue(str(params.get("sessionId")), params)

    def show_update(self, sid: str, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        call_id = str(update.get("toolCallId"))
        if kind == "user_message_chunk":  # a turn this client did not send: a queued one
            self.say(f"you: {self.clean(str((update.get('content') or {}).get('text') or ''))}")
        elif kind == "agent_message_chunk":
            text = self.agent_filter.feed(str((update.get("content") or {}).get("text") or ""))
            self.stream(text if self.colour else strip_all(text))
        elif kind == "tool_call":
            call_kind = str(update.get("kind") or "execute")
            self.tool_kinds[call_id] = call_kind
            if call_kind == "execute":
                command = (update.get("rawInput") or {}).get("command") or update.get("title")
                self.say(f"$ {self.clean(str(command))}")
                self.command_started(sid, call_id, str(command))
            else:
                self.say(f"[{call_kind}] {update.get('title')}")
        elif kind == "plan":
            entries = [e for e in update.get("entries") or [] if isinstance(e, dict)]
            if self.plans.changed(sid, entries):
                self.say("\n".join(plan_lines(entries, self.clean)))
        elif kind == "tool_call_update":
            output = (update.get("_meta") or {}).get("output")
            raw = update.get("rawOutput")
            call_kind = self.tool_kinds.get(str(update.get("toolCallId")), "execute")
            if call_kind != "execute" and update.get("status") in ("completed", "failed"):
                self.tool_kinds.pop(str(update.get("toolCallId")), None)
                self.show_file_tool_end(update)
            elif output:
                self.command_output(call_id, str(output))
            elif isinstance(raw, dict):
                self.command_ended(call_id)
                code = raw.get("exitCode")
                if raw.get("cancelled"):
                    self.say("[cancelled]")
                else:
                    self.say("[not run]" if code is None else f"[exit {code}]")

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

    # ---- commands ----

    def show_entry(self, entry: dict[str, Any]) -> None:
        """One `TranscriptEntry` (protocol.models) as lines."""
        kind, text = entry.get("type"), self.clean(str(entry.get("text") or "")).rstrip()
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

    async def cmd_mode(self, arg: str) -> None:
        if not arg or self.current is None:
            raise UsageError("usage: /mode craft|plan|ask, on a current session")
        await self.host.request(Method.SESSION_SET_MODE, {"sessionId": self.current, "modeId": arg})
        self.say(f"mode set to {arg}")

    async def cmd_cancel(self, arg: str) -> None:
        words = arg.split()
        clear = "--clear" in words
        target = " ".join(w for w in words if w != "--clear")
        sid = (await self.resolve(target, default_current=True))["sessionId"]
        params: dict[str, Any] = {"sessionId": sid}
        if clear:
            params["_meta"] = {"clearQueue": True}
        result = await self.host.request(Method.SESSION_CANCEL, params)
        if not (isinstance(result, dict) and result.get("cancelled")):
            self.say("nothing to cancel" + (" (the queue is emptied)" if clear else ""))

    async def cmd_help(self, arg: str) -> None:
        self.say(HELP)

    # ---- turns and the input loop ----

    def send_prompt(self, text: str) -> None:
        if self.current is None:
            self.say("no current session: /new creates one, /switch N picks one")
            return
        self.last_prompt[self.current] = text
        # While a turn runs (ours or another client's) the prompt waits in the queue.
        busy = self.running(self.current)
        busy = busy or (self.states.get(self.current) or {}).get("status") == "running"
        task = asyncio.create_task(self.turn(self.current, text, queued=busy))
        self.turns[task] = self.current

    async def complete_files(self, query: str) -> list[dict[str, Any]]:
        """The current session's paths for `@query` (`_session/files`); none when there is no
        live current session or the sidecar cannot say (completion never prints errors)."""
        sid = self.current
        if sid is None:
            return []
        try:
            found = await self.host.request(
                Method.FILES, {"sessionId": sid, "query": query, "limit": COMPLETIONS}, timeout=5
            )
        except (RpcError, ConnectionError, TimeoutError):
            return []
        files = [f for f in found.get("files") or [] if isinstance(f, dict)]
        self.offered.setdefault(sid, set()).update(str(f.get("path")) for f in files)
        return files

    async def prompt_blocks(self, sid: str, text: str) -> list[dict[str, Any]]:
        """The line as ACP content: its text, and a `resource_link` per `@` mention."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if "@" not in text:
            return blocks
        cwd = (self.states.get(sid) or {}).get("cwd")
        if not cwd:
            cwd = (await self.host.request(Method.STATUS, {"sessionId": sid})).get("cwd")
        if cwd:
            blocks += mention_blocks(text, str(cwd), self.offered.get(sid, ()))
        return blocks

    async def turn(self, sid: str, text: str, *, queued: bool = False) -> None:
        """One prompt (`queued`: it waits for the running turn, in the session's queue,
        and is answered when its own turn ends); its stream is printed by
        on_notification, its end here."""
        try:
            params: dict[str, Any] = {
                "sessionId": sid,
                "prompt": await self.prompt_blocks(sid, text),
            }
            if sid == self.current and not queued:
                await self.size_session()  # its PTY commands get this terminal's size
            try:
                result = await self.host.request(
                    Method.SESSION_PROMPT,
                    {**params, "_meta": {"queue": True}} if queued else params,
                )
            except RpcError as exc:
                if queued or exc.code != ErrorCode.SESSION_BUSY:
                    raise
                # A turn started meanwhile (a queued message, another client's): wait too.
                result = await self.host.request(
                    Method.SESSION_PROMPT, {**params, "_meta": {"queue": True}}
                )
        except (RpcError, ConnectionError, TimeoutError) as exc:
            if not self.quitting:
                self.say(f"error: {describe(exc)}{self.hint(sid, exc)}")
            return
        finally:
            self.turns.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self.schedule_prompt()
        stop = result.get("stopReason")
        if self.quitting:
            return
        # A queued turn may already be streaming when this one's answer arrives: its
        # line is left alone (its own end, or its state line, ends it).
        following = self.running(sid) or (self.states.get(sid) or {}).get("status") == "running"
        if sid == self.current and not following:
            self.stream(self.agent_filter.flush())
        if sid != self.current:
            self.say(f"[{sid[:9]}: turn ended: {stop}]")
        elif stop != "end_turn":
            self.say(f"[turn ended: {stop}]")
        elif self.col == "stream" and not following:
            self.stream("\n")

    def hint(self, sid: str, exc: BaseException) -> str:
        """What to do after a prompt failed."""
        if isinstance(exc, RpcError) and "busy" in exc.message:
            return " (wait for it to end, or /cancel it)"
        if (self.states.get(sid) or {}).get("status") == "error":
            return " — /retry to try again or /resume to restart the session"
        if isinstance(exc, RpcError):
            return ""
        return " — /retry once the sidecar is back"

    def unknown(self, word: str) -> str:
        names = sorted(["/" + n[4:] for n in dir(self) if n.startswith("cmd_")] + ["/quit"])
        close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
        hint = f" — did you mean {close[0]}?" if close else "; /help lists the commands"
        return f"unknown command {word}{hint} (//{word[1:]} sends it to the model as it is)"

    def command_names(self) -> list[str]:
        return ["/" + n[4:] for n in dir(self) if n.startswith("cmd_")] + ["/quit"]

    async def handle(self, line: str) -> None:
        if self.pending_rewind is not None:
            try:
                if await self.answer_rewind(line.strip()):
                    return
            except (RpcError, ConnectionError, TimeoutError) as exc:
                self.say(f"error: {describe(exc)}")
                return
        if self.pending_forget is not None:
            try:
                if await self.answer_forget(line.strip()):
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
        if not COMMAND.fullmatch(word):
            self.send_prompt(line.strip())
            return
        command = getattr(self, "cmd_" + word[1:].replace("-", "_"), None)
        if command is None:  # a typo costs nothing: never sent to the model
            self.say(self.unknown(word))
            return
        self.handling = True
        try:
            await command(arg.strip())
        except (UsageError, RpcError, ConnectionError, TimeoutError) as exc:
            self.say(f"error: {describe(exc)}")
        finally:
            self.handling = False

    def start_reading(self, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None] | None:
        """The line editor on a terminal (its task), plain reads by a thread otherwise."""
        if self.editing:
            try:
                from prompt_toolkit.completion import merge_completers

                from desktop.tui_editor import Editor, MentionCompleter, TuiCompleter, data_dir
            except ImportError:  # no prompt_toolkit (the desktop extra): plain lines
                self.editing = False
        if self.editing:
            history = data_dir(self.sidecar_args) / "tui-history"
            completer = merge_completers(
                [
                    TuiCompleter(self.command_names, lambda: self.known),
                    MentionCompleter(self.complete_files),
                ]
            )
            self.editor = Editor(history, self.prompt_text, completer, self.on_winch)
            task = asyncio.create_task(
                self.editor.run(
                    self.queue.put_nowait, lambda: self.queue.put_nowait(EOF), self.on_sigint
                )
            )
            task.add_done_callback(self._editor_ended)
            return task
        threading.Thread(target=read_stdin, args=(loop, self.queue), daemon=True).start()
        return None

    def _editor_ended(self, task: asyncio.Task[None]) -> None:
        """The line editor failed: say why and leave (nothing else reads input)."""
        if task.cancelled() or task.exception() is None:
            return
        self.editing = False
        self.say(f"error: the line editor failed ({task.exception()!r}); quitting")
        self.exit_code = 1
        self.queue.put_nowait(QUIT_NOW)

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
        loop.add_signal_handler(signal.SIGWINCH, self.on_winch)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.queue.put_nowait, QUIT_NOW)
        reading = self.start_reading(loop)
        self.say(f"sidecar ready (pid {self.host.pid}); /help lists commands")
        with contextlib.suppress(RpcError, ConnectionError, TimeoutError):
            await self.list_sessions()  # for completion
        try:
            while (line := await self.queue.get()) not in (EOF, QUIT_NOW):
                if self.interactive and not self.editing:
                    self.col = "start"  # the terminal echoed the user's Enter
                if line.strip() in QUIT_WORDS:
                    break
                if line.strip() or self.pending_forget or self.pending_rewind:
                    await self.handle(line)
                self.schedule_prompt()
            if line == EOF and self.turns:
                self.say("end of input: waiting for the running turn (Ctrl-C cancels it)")
                await asyncio.gather(*self.turns, return_exceptions=True)
        finally:
            self.quitting = True
            if reading is not None:
                reading.cancel()  # the editor gives the terminal back
                await asyncio.gather(reading, return_exceptions=True)
            await self.host.shutdown()
            for task in list(self.turns):
                task.cancel()
            await asyncio.gather(*self.turns, return_exceptions=True)
        self._write(("\n" if self.col != "start" else "") + "bye\n")
        return self.exit_code


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
