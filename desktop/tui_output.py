"""The terminal client's command output: filtered to SGR colours (or to plain text when
stdout is not a terminal), long output collapsed to its head and tail while it streams,
`/output [N]` paging through a command's whole output (spooled by the sidecar), and the
sessions' PTY sized to this terminal (again on SIGWINCH)."""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from desktop.ansi import SgrFilter, sgr_only, strip_all
from desktop.client import RpcError
from desktop.tui_changes import UsageError
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.host import SidecarHost

HEAD_LINES: Final = 20  # a command's first lines, shown as they stream
TAIL_LINES: Final = 10  # and its last ones, shown when it ends
PAGE_LINES: Final = 200  # lines per `/output N` page
FETCH_BYTES: Final = 256 * 1024
WHOLE_BYTES: Final = 8 * 1024 * 1024  # past this, pages are read only as far as needed


@dataclass
class CommandView:
    """One running command's output on screen: the head printed, the tail held back."""

    command: str
    filter: SgrFilter = field(default_factory=SgrFilter)
    partial: str = ""  # the line being printed (no newline yet)
    lines: int = 0  # whole lines seen
    tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=TAIL_LINES)
    )

    @property
    def collapsed(self) -> bool:
        return self.lines > HEAD_LINES


class OutputView:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    colour: bool
    say: Callable[[str], None]
    stream: Callable[[str], None]

    commands: dict[str, CommandView]  # toolCallId -> its view, while it runs
    last_command: dict[str, str]  # sessionId -> the toolCallId of its last command seen here
    sized: dict[str, tuple[int, int]]  # sessionId -> (rows, cols) its runtime was told

    def clean(self, text: str) -> str:
        """Untrusted text for this terminal: SGR colours kept on a colour terminal, every
        other escape or control sequence dropped (all of them when not a terminal)."""
        return sgr_only(text) if self.colour else strip_all(text)

    # ---- streamed output ----

    def command_started(self, sid: str, call_id: str, command: str) -> None:
        self.commands[call_id] = CommandView(command)
        self.last_command[sid] = call_id

    def command_output(self, call_id: str, chunk: str) -> None:
        view = self.commands.get(call_id)
        if view is None:
            self.stream(self.clean(chunk))
            return
        self._lines(view, view.filter.feed(chunk))

    def _lines(self, view: CommandView, text: str) -> None:
        if not self.colour:
            text = strip_all(text)
        while text and view.lines < HEAD_LINES:  # the head: printed as it comes
            newline = text.find("\n")
            if newline < 0:
                self.stream(text)
                return
            self.stream(text[: newline + 1])
            view.lines += 1
            text = text[newline + 1 :]
        if text:  # past the head: only the last lines are kept, for the end
            *whole, view.partial = (view.partial + text).split("\n")
            for line in whole:
                view.lines += 1
                view.tail.append(line)

    def command_ended(self, call_id: str) -> None:
        view = self.commands.pop(call_id, None)
        if view is None:
            return
        self._lines(view, view.filter.flush())
        if view.partial:
            view.lines += 1
            view.tail.append(view.partial)
        if view.collapsed:
            hidden = view.lines - HEAD_LINES - len(view.tail)
            if hidden > 0:
                self.say(
                    f"... {hidden} line(s) not shown ({view.lines} in all); "
                    "/output pages through the whole output"
                )
            for line in view.tail:
                self.stream(line + "\n")

    # ---- /output ----

    async def cmd_output(self, arg: str) -> None:
        """`/output [N]`: page N (from 1) of the current session's last command's output."""
        if self.current is None:
            raise UsageError("no current session; /new creates one, /switch ID picks one")
        if arg and not (arg.isdigit() and int(arg) >= 1):
            raise UsageError("usage: /output [PAGE] (pages of 200 lines, from 1)")
        page = int(arg) if arg else 1
        sid = self.current
        call_id = self.last_command.get(sid) or await self._last_call_in_transcript(sid)
        if call_id is None:
            raise UsageError("no command output in this session yet")
        first = (page - 1) * PAGE_LINES
        lines, total_lines, complete = await self._read_lines(sid, call_id, first + PAGE_LINES)
        shown = lines[first : first + PAGE_LINES]
        pages = max(1, -(-total_lines // PAGE_LINES)) if complete else None
        if not shown:
            raise UsageError(f"no page {page}: the output has {pages} page(s)")
        of = f"{pages}" if pages is not None else "more"
        self.say(
            f"[output, lines {first + 1}-{first + len(shown)}"
            + (f" of {total_lines}" if complete else "")
            + f", page {page} of {of}]"
        )
        for line in shown:
            self.stream(self.clean(line) + "\n")
        if pages is None or page < pages:
            self.say(f"[/output {page + 1} for the next page]")

    async def _read_lines(self, sid: str, call_id: str, wanted: int) -> tuple[list[str], int, bool]:
        """The output's lines: all of them when it is not long (then also their count), at
        least the first `wanted` otherwise; and whether the whole output was read."""
        text, offset = "", 0
        while True:
            params = {"sessionId": sid, "toolCallId": call_id, "offset": offset}
            got = await self.host.request(Method.OUTPUT, {**params, "limit": FETCH_BYTES})
            text += str(got.get("text") or "")
            following, total = got.get("next"), int(got.get("total") or 0)
            done = following is None or int(following) <= offset or int(following) >= total
            if done or (offset >= WHOLE_BYTES and text.count("\n") > wanted):
                lines = text.replace("\r\n", "\n").split("\n")
                if done:
                    if lines and lines[-1] == "":
                        lines.pop()
                    return lines, len(lines), True
                return lines[:-1], len(lines) - 1, False
            offset = int(following)

    async def _last_call_in_transcript(self, sid: str) -> str | None:
        head = await self.host.request(Method.MESSAGES, {"sessionId": sid, "limit": 1})
        offset = max(0, int(head["total"]) - 50)
        params = {"sessionId": sid, "offset": offset, "limit": 50}
        entries = (await self.host.request(Method.MESSAGES, params))["messages"]
        for entry in reversed(entries):
            if entry.get("type") == "tool_result" and entry.get("toolCallId"):
                return str(entry["toolCallId"])
        return None

    # ---- the PTY's size ----

    def terminal_size(self) -> tuple[int, int] | None:
        try:
            size = os.get_terminal_size(1)
        except OSError:
            return None  # not a terminal: the sidecar's default (24x80) stands
        return max(1, min(1000, size.lines)), max(1, min(1000, size.columns))

    async def size_session(self) -> None:
        """Tell the sidecar this terminal's size for the current session's PTY commands,
        unless it was told already (a new runtime generation is told again)."""
        sid, size = self.current, self.terminal_size()
        if sid is None or size is None or self.sized.get(sid) == size:
            return
        params = {"sessionId": sid, "rows": size[0], "cols": size[1]}
        try:
            await self.host.request(Method.RESIZE, params)
        except (RpcError, ConnectionError, TimeoutError):
            self.sized.pop(sid, None)  # not live: sized when it starts again
            return
        self.sized[sid] = size

    def on_winch(self) -> None:
        """The terminal was resized: running PTY commands follow at once."""
        self.sized.clear()
        asyncio.ensure_future(self.size_session())
