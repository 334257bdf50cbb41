"""The terminal client's line editor (prompt_toolkit) when stdin is a terminal: history
kept in the data dir, completion of /commands, of session numbers and ids and, as they
are typed, of `@` mentions (paths from the sidecar, asked asynchronously on the client's
own loop, so typing never waits for it), and the
prompt kept at the bottom while output is printed above it (`patch_stdout`). On a pipe
the client reads plain lines instead (`desktop.tui.read_stdin`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from desktop.tui_mentions import quoted, typing_mention

FileLister = Callable[[str], Awaitable[list[dict[str, Any]]]]
HISTORY_FILE: Final = "tui-history"
SESSION_COMMANDS: Final = ("/switch", "/resume", "/close", "/forget", "/cancel")
# Commands that take no argument: completed as they are; any other gets a space after it,
# ready for its argument (a trailing space is ignored when the line is run).
BARE_COMMANDS: Final = frozenset({"/sessions", "/retry", "/cancel", "/help", "/quit"})


def data_dir(sidecar_args: list[str]) -> Path:
    """The data dir the sidecar is given (its own default otherwise)."""
    for i, arg in enumerate(sidecar_args):
        if arg == "--data-dir" and i + 1 < len(sidecar_args):
            return Path(sidecar_args[i + 1]).expanduser()
        if arg.startswith("--data-dir="):
            return Path(arg.partition("=")[2]).expanduser()
    if os.environ.get("SIDECAR_DATA_DIR"):
        return Path(os.environ["SIDECAR_DATA_DIR"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("acp-session-host"))


class TuiCompleter(Completer):
    """`/com` -> the commands; `/resume ` -> the session numbers and ids of the last
    listing (`sessions()` gives the summaries last seen)."""

    def __init__(
        self, commands: Callable[[], Iterable[str]], sessions: Callable[[], list[dict[str, Any]]]
    ) -> None:
        self.commands = commands
        self.sessions = sessions

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or text.startswith("//"):
            return
        word, space, rest = text.partition(" ")
        if not space:
            for name in sorted(self.commands()):
                if name.startswith(word):
                    text = name if name in BARE_COMMANDS else name + " "
                    yield Completion(text, start_position=-len(word), display=name)
            return
        if word not in SESSION_COMMANDS or " " in rest:
            return
        for n, s in enumerate(self.sessions(), 1):
            sid, title = str(s["sessionId"]), str(s.get("title") or "")
            if str(n).startswith(rest):
                yield Completion(str(n), -len(rest), display=f"{n} {title[:30]}")
            elif sid.startswith(rest) or sid.startswith("sess_" + rest):
                yield Completion(sid, -len(rest), display=f"{sid[:13]} {title[:30]}")


class MentionCompleter(Completer):
    """`@par` -> the session's paths matching `par` (`list_files(query)`: `_session/files`)."""

    def __init__(self, list_files: FileLister) -> None:
        self.list_files = list_files

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        return iter(())  # only asynchronously: the answer comes from the sidecar

    async def get_completions_async(
        self, document: Document, event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        typing = typing_mention(document.text_before_cursor)
        if typing is None:
            return
        partial, replaced = typing
        for entry in await self.list_files(partial):
            path, kind = str(entry.get("path") or ""), entry.get("kind")
            if not path:
                continue
            shown = path + ("/" if kind == "dir" else "")
            yield Completion(quoted(path), start_position=-replaced, display=shown)


class Editor:
    """Reads lines with prompt_toolkit into `put`; EOF (Ctrl-D) and Ctrl-C are told."""

    def __init__(
        self,
        history: Path,
        prompt: Callable[[], str],
        completer: Completer,
        on_resize: Callable[[], None],
    ) -> None:
        history.parent.mkdir(parents=True, exist_ok=True)
        # Completion pops up by itself only while an `@mention` is typed; Tab otherwise.
        mentioning = Condition(
            lambda: (
                typing_mention(self.session.default_buffer.document.text_before_cursor) is not None
            )
        )
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=completer,
            complete_while_typing=mentioning,
            enable_history_search=False,
        )
        self.prompt = prompt
        app: Any = self.session.app
        redraw = app._on_resize  # the app's own SIGWINCH handler replaces ours while it runs

        def resized() -> None:
            redraw()
            on_resize()

        app._on_resize = resized

    def redraw(self) -> None:
        """The prompt's text changed (another session is current)."""
        self.session.app.invalidate()

    async def run(
        self,
        put: Callable[[str], None],
        on_eof: Callable[[], None],
        on_interrupt: Callable[[], None],
    ) -> None:
        with patch_stdout(raw=True):
            while True:
                try:
                    line = await self.session.prompt_async(self.prompt)
                except EOFError:
                    on_eof()
                    return
                except KeyboardInterrupt:
                    on_interrupt()
                    continue
                put(line)
                await asyncio.sleep(0)  # let the line be handled before the prompt redraws
