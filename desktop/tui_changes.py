"""The terminal client's file changes: diffs of writes (approval and tool card), what a turn
changed (`/changes`), and rewinding (`/rewind`), always after a dry run says what would
change. Everything is asked of the sidecar when shown; nothing is kept here but the one
rewind waiting for its y/n."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from desktop import diffs, sessions
from protocol.methods import Method
from protocol.values import RewindScope

if TYPE_CHECKING:
    from desktop.host import SidecarHost

APPROVAL_DIFF_LINES: Final = 40
TOOL_DIFF_LINES: Final = 20
TOOL_TEXT_LINES: Final = 8
CHANGES_DIFF_LINES: Final = 120
FILES_LISTED: Final = 5
TURNS_LISTED: Final = 10
REWIND_USAGE: Final = (
    "usage: /rewind TURN [code|conversation|both] [--yes] [--force] | /rewind undo"
)
SCOPES: Final = tuple(scope.value for scope in RewindScope)
WHAT: Final = {
    "code": "the files",
    "conversation": "the conversation",
    "both": "files and conversation",
}


class UsageError(Exception):
    """A command was typed wrong; printed as `error: ...`, never sent to the sidecar."""


def _stat(file: dict[str, Any]) -> str:
    return f"{file['path']} +{file['additions']} -{file['deletions']}"


def _rewind_plan(outcome: dict[str, Any], force: bool) -> list[str]:
    """What a (dry) rewind restores, removes and leaves alone, as lines."""
    lines = []
    if outcome.get("conversation") is not None or (
        outcome.get("dryRun") and outcome["scope"] != "code"
    ):
        lines.append(
            f"  conversation: the model no longer sees turn {outcome['turn']} and later ones "
            "(they stay in the transcript)"
        )
    code = outcome.get("code")
    if code is not None:
        lines += [f"  restore {path}" for path in code["restored"]]
        lines += [f"  remove  {path}" for path in code["removed"]]
        how = "overwritten (--force)" if force else "left alone (--force overwrites)"
        lines += [f"  conflict {c['path']}: {c['reason']}; {how}" for c in code["conflicts"]]
        if not code["restored"] and not code["removed"] and not code["conflicts"]:
            lines.append("  files: nothing to change on disk")
    return lines


class ChangesCommands:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    colour: bool
    say: Callable[[str], None]
    on_code_rewound: Callable[[str, bool], None]  # files put back (undo?): marks to drop

    pending_rewind: dict[str, Any] | None = None  # a dry-run rewind waiting for y/n
    diff_shown: set[str]  # tool calls whose diff was printed (at their approval)

    # ---- diffs of writes ----

    def print_diff(self, item: dict[str, Any], limit: int) -> None:
        """One ACP diff content item ({path, oldText, newText}), bounded to `limit` lines."""
        path = str(item.get("path"))
        here = os.getcwd() + os.sep
        shown = path.removeprefix(here) if path.startswith(here) else path
        lines = diffs.text_diff(shown, item.get("oldText"), item.get("newText") or "")
        for line in diffs.bounded(lines, limit):
            self.say("  " + (diffs.colour(line) if self.colour else line))

    def show_call_diffs(self, call: dict[str, Any], limit: int) -> None:
        call_id = str(call.get("toolCallId"))
        for item in call.get("content") or []:
            if item.get("type") == "diff" and call_id not in self.diff_shown:
                self.print_diff(item, limit)
        if any(item.get("type") == "diff" for item in call.get("content") or []):
            self.diff_shown.add(call_id)

    def show_file_tool_end(self, update: dict[str, Any]) -> None:
        """A file tool's end: how it went, its text (bounded), its diff unless shown."""
        texts = [
            str((item.get("content") or {}).get("text") or "")
            for item in update.get("content") or []
            if item.get("type") == "content"
        ]
        lines = "\n".join(texts).splitlines()
        cut = len(lines) - TOOL_TEXT_LINES
        more = [f"... {cut} more line(s)"] if cut > 0 else []
        label = "done" if update.get("status") == "completed" else "failed"
        self.say(f"[{label}] " + "\n".join(lines[:TOOL_TEXT_LINES] + more))
        self.show_call_diffs(update, TOOL_DIFF_LINES)
        self.diff_shown.discard(str(update.get("toolCallId")))  # the call is over

    def show_turn_changes(self, params: dict[str, Any]) -> None:
        """`_session/turn_changes`: a turn that changed files has ended."""
        files = params.get("files") or []
        listed = ", ".join(_stat(f) for f in files[:FILES_LISTED])
        total = int(params.get("total") or len(files))
        if total > FILES_LISTED:
            listed += f", and {total - FILES_LISTED} more"
        turn = params.get("turn")
        self.say(
            f"[turn {turn} changed {total} file(s): {listed}; "
            f"/changes {turn} shows the diff, /rewind {turn} takes it back]"
        )

    # ---- commands ----

    def _session(self) -> str:
        if self.current is None:
            raise UsageError("no current session; /new creates one, /switch ID picks one")
        return self.current

    async def cmd_changes(self, arg: str) -> None:
        sid = self._session()
        if arg and not arg.isdigit():
            raise UsageError("usage: /changes [TURN]")
        found = await sessions.changes(self.host, sid, int(arg) if arg else None)
        files = found["files"]
        if not files:
            self.say(f"turn {found['turn']} changed no files")
            return
        self.say(f"turn {found['turn']} changed {found['total']} file(s):")
        for file in files:
            self.say(f"  {file['status'][0].upper()} {_stat(file)}")
        lines = found["diff"].splitlines()
        for line in diffs.bounded(lines, CHANGES_DIFF_LINES):
            self.say(diffs.colour(line) if self.colour else line)
        if found.get("diffTruncated"):
            self.say("(the sidecar cut the diff short: it is too long)")

    async def cmd_rewind(self, arg: str) -> None:
        sid = self._session()
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            raise UsageError(f"{REWIND_USAGE} ({exc})") from None
        flags = {w for w in words if w.startswith("--")}
        plain = [w for w in words if not w.startswith("--")]
        if not plain:
            await self._list_turns(sid)
            return
        if flags - {"--yes", "--force"} or len(plain) > 2:
            raise UsageError(REWIND_USAGE)
        force, yes = "--force" in flags, "--yes" in flags
        if plain[0] == "undo":
            if len(plain) > 1 and plain[1] != "code":
                raise UsageError("/rewind undo takes back the last code rewind (scope code)")
            turn, scope = None, "code"
        elif plain[0].isdigit() and int(plain[0]) >= 1:
            turn, scope = int(plain[0]), plain[1] if len(plain) > 1 else "both"
            if scope not in SCOPES:
                raise UsageError(REWIND_USAGE)
        else:
            raise UsageError(REWIND_USAGE)
        plan = await sessions.rewind(self.host, sid, turn, scope, force=force, dry_run=True)
        what = (
            "undo the last code rewind"
            if turn is None
            else f"rewind {WHAT[scope]} to before turn {turn}"
        )
        for line in [f"{what}:", *_rewind_plan(plan, force)]:
            self.say(line)
        request = {"sessionId": sid, "turn": turn, "scope": scope, "force": force}
        if yes:
            await self._rewind(request)
        else:
            self.pending_rewind = request
            self.say("go ahead? y/n")

    async def answer_rewind(self, line: str) -> bool:
        """The y/n for a pending rewind; True if `line` was that answer (anything but y
        drops the rewind; a word other than n is then handled as usual)."""
        request, self.pending_rewind = self.pending_rewind, None
        if request is None:
            return False
        if line in ("y", "yes"):
            await self._rewind(request)
            return True
        self.say("[rewind not done]")
        return line in ("n", "no", "")

    async def _rewind(self, request: dict[str, Any]) -> None:
        request = dict(request)
        sid = request.pop("sessionId")
        done = await sessions.rewind(
            self.host,
            sid,
            request["turn"],
            request["scope"],
            force=request["force"],
        )
        if done.get("cancelled"):
            self.say("[rewind cancelled]")
            return
        for line in ["rewound:", *_rewind_plan(done, request["force"])]:
            self.say(line)
        code = done.get("code")
        if code is not None:
            self.on_code_rewound(sid, request["turn"] is None)
        if code is not None and code.get("rewind") is not None:
            self.say("(/rewind undo takes the files back)")

    async def _list_turns(self, sid: str) -> None:
        """The last turns with their numbers: what `/rewind TURN` needs to know."""
        head = await self.host.request(Method.MESSAGES, {"sessionId": sid, "limit": 1})
        offset = max(0, int(head["total"]) - 200)
        params = {"sessionId": sid, "offset": offset, "limit": 200}
        entries = (await self.host.request(Method.MESSAGES, params))["messages"]
        users = [e for e in entries if e.get("type") == "user" and e.get("turn")]
        if not users:
            self.say("no turns yet")
        for entry in users[-TURNS_LISTED:]:
            first = str(entry["text"]).splitlines()[0] if entry["text"] else ""
            self.say(f"  turn {entry['turn']}: {first[:70]}")
        self.say(REWIND_USAGE)
