"""The terminal client's worktree and review commands: `/worktree` (where the current
session's worktree is and how its branch stands), `/worktree diff` (the branch against its
base, file by file, hunks numbered), and `/review` (a turn's changes with numbered hunks,
then `reject` to revert hunks or a whole file through `_session/revert`, or `accept` to
mark them kept).

The sidecar holds the changes and does the reverting; the only thing kept here is the
numbering of the last `/review` listing (so `reject 2` means the second hunk the user
saw) and the user's own marks, kept (✓) and rejected (✗), which no one else needs."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from desktop import diffs, sessions
from desktop.client import RpcError
from desktop.tui_changes import UsageError
from protocol.errors import ErrorCode
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.host import SidecarHost

REVIEW_USAGE: Final = (
    "usage: /review [TURN] | /review reject N [N...] [--force] | /review reject FILE "
    "[--force] | /review accept N [N...]"
)
WORKTREE_USAGE: Final = "usage: /worktree [diff [PAGE]]"
DIFF_FILES_PER_PAGE: Final = 20
HUNK_LINES: Final = 60  # lines of one hunk printed before the rest is counted
KEPT, REJECTED = "✓", "✗"
# The sidecar's own advice for a refused revert names the wire field; ours names the flag.
FORCE_NOTE: Final = re.compile(r"\s*\(force: true[^)]*\)")


@dataclass(frozen=True)
class Numbered:
    """One hunk of a review listing, by the number the user saw."""

    number: int
    path: str
    hunk_id: str


@dataclass
class Review:
    """The last `/review` listing: its session, its turn, and its hunks by number."""

    session_id: str
    turn: int
    hunks: list[Numbered]
    paths: list[str]
    marks: dict[str, str] = field(default_factory=dict)  # hunk id -> KEPT | REJECTED


def _yes_no(value: object) -> str:
    return "unknown (not live)" if value is None else "yes" if value else "no"


def _undo_hint(done: dict[str, Any]) -> str:
    forced = " (forced over later changes)" if done.get("forced") else ""
    return forced + ("; /rewind undo takes it back" if done.get("rewind") is not None else "")


class ReviewCommands:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    colour: bool
    say: Callable[[str], None]
    clean: Callable[[str], str]

    review: Review | None = None
    # Marks outlive a listing: `/review 1` after `/review 2` shows turn 1's marks again.
    review_marks: dict[tuple[str, int], dict[str, str]]
    reverts: dict[str, list[list[str]]]  # per session, each revert's hunk ids, oldest first

    def _reviewing(self) -> str:
        if self.current is None:
            raise UsageError("no current session; /new creates one, /switch N picks one")
        return self.current

    # ---- /worktree ----

    async def cmd_worktree(self, arg: str) -> None:
        sid = self._reviewing()
        words = arg.split()
        if not words:
            await self._show_worktree(sid)
        elif words[0] == "diff" and len(words) <= 2:
            page = words[1] if len(words) == 2 else "1"
            if not page.isdigit() or int(page) < 1:
                raise UsageError(f"{WORKTREE_USAGE} (PAGE is a number from 1)")
            await self._worktree_diff(sid, int(page))
        else:
            raise UsageError(WORKTREE_USAGE)

    async def _show_worktree(self, sid: str) -> None:
        s = await self.host.request(Method.STATUS, {"sessionId": sid})
        tree = s.get("worktree")
        if not isinstance(tree, dict):
            self.say(
                f"session {sid} has no worktree: it works in {self.clean(str(s['cwd']))} "
                "(/new --worktree makes a session in one)"
            )
            return
        ahead, behind = tree.get("ahead"), tree.get("behind")
        standing = (
            "ahead/behind: unknown (not live; /resume to ask git)"
            if ahead is None or behind is None
            else f"{ahead} commit(s) ahead of {self.clean(str(tree['base']))}, {behind} behind"
        )
        for line in (
            f"worktree of {sid}:",
            f"  repo    {self.clean(str(tree['repo']))}",
            f"  path    {self.clean(str(tree['path']))}",
            f"  branch  {self.clean(str(tree['branch']))} (base {self.clean(str(tree['base']))})",
            f"  {standing}",
            f"  dirty   {_yes_no(tree.get('dirty'))}",
            "/worktree diff shows the branch's changes; /merge or /discard finish it",
        ):
            self.say(line)

    async def _worktree_diff(self, sid: str, page: int) -> None:
        cursor = (page - 1) * DIFF_FILES_PER_PAGE
        params = {"sessionId": sid, "cursor": cursor, "limit": DIFF_FILES_PER_PAGE}
        found = await self.host.request(Method.WORKTREE_DIFF, params)
        files = found["files"]
        branch, base = self.clean(str(found["branch"])), self.clean(str(found["base"]))
        if not files:
            self.say(
                f"{branch} has no changes against {base}"
                if page == 1
                else f"no page {page}: the diff of {branch} has fewer files"
            )
            return
        first, last = cursor + 1, cursor + len(files)
        self.say(f"{branch} against {base}, files {first}-{last}:")
        number = 0
        for file in files:
            number = self._print_file(file, number, {})
        if found.get("nextCursor") is not None:
            self.say(f"more files: /worktree diff {page + 1}")

    # ---- /review ----

    async def cmd_review(self, arg: str) -> None:
        sid = self._reviewing()
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            raise UsageError(f"{REVIEW_USAGE} ({exc})") from None
        if not words:
            await self._list_review(sid, None)
        elif words[0].isdigit() and len(words) == 1:
            await self._list_review(sid, int(words[0]))
        elif words[0] == "reject":
            await self._reject(sid, words[1:])
        elif words[0] == "accept":
            self._accept(sid, words[1:])
        else:
            raise UsageError(REVIEW_USAGE)

    async def _list_review(self, sid: str, turn: int | None) -> None:
        found = await sessions.changes(self.host, sid, turn)
        files = found["files"]
        if not files:
            self.say(f"turn {found['turn']} changed no files")
            return
        key = (sid, int(found["turn"]))
        marks = self.review_marks.setdefault(key, {})
        numbered: list[Numbered] = []
        for file in files:
            numbered += [
                Numbered(len(numbered) + i, file["path"], h["id"])
                for i, h in enumerate(file.get("hunks") or [], 1)
            ]
        self.review = Review(sid, key[1], numbered, [f["path"] for f in files], marks)
        self.say(f"turn {found['turn']} changed {found['total']} file(s), {len(numbered)} hunk(s):")
        number = 0
        for file in files:
            number = self._print_file(file, number, marks)
        if found.get("diffTruncated"):
            self.say("(the diff is too long for hunks: reject FILE reverts a whole file)")
        self.say(
            "/review reject N [N...] reverts hunks, /review reject FILE a whole file, "
            "/review accept N marks them kept"
        )

    def _print_file(self, file: dict[str, Any], number: int, marks: dict[str, str]) -> int:
        """One file and its hunks, numbered from `number + 1`; the last number used."""
        status = str(file.get("status") or "modified")
        path = self.clean(str(file["path"]))
        self.say(f"  {status[0].upper()} {path} +{file['additions']} -{file['deletions']}")
        hunks = file.get("hunks") or []
        if file.get("binary"):
            self.say("      (binary: no lines to show)")
        elif not hunks:
            self.say("      (no hunks to show)")
        for hunk in hunks:
            number += 1
            mark = marks.get(str(hunk["id"]))
            label = f"  [{number}]" + (f" {mark}" if mark else "")
            header = self.clean(str(hunk["header"]))
            self.say(f"{label} {diffs.colour(header) if self.colour else header}")
            lines = [self.clean(str(line)) for line in hunk["lines"]]
            for line in diffs.bounded(lines, HUNK_LINES):
                self.say("      " + (diffs.colour(line) if self.colour else line))
        return number

    def _listed(self, sid: str) -> Review:
        review = self.review
        if review is None or review.session_id != sid:
            raise UsageError("no review listed for this session: /review [TURN] numbers the hunks")
        return review

    def _pick(self, review: Review, words: list[str]) -> dict[str, list[Numbered]] | str:
        """Hunk numbers (grouped by file, in order) or one file's path from `words`."""
        if len(words) == 1 and not words[0].isdigit():
            path = words[0]
            if path not in review.paths:
                shown = ", ".join(review.paths)
                raise UsageError(f"turn {review.turn} did not change {path} (it changed {shown})")
            return path
        if not words or not all(w.isdigit() for w in words):
            raise UsageError(REVIEW_USAGE)
        by_number = {h.number: h for h in review.hunks}
        wrong = [w for w in words if int(w) not in by_number]
        if wrong:
            span = f"1-{len(review.hunks)}" if review.hunks else "none"
            raise UsageError(
                f"no hunk {', '.join(wrong)} in turn {review.turn}'s review (hunks: {span})"
            )
        picked: dict[str, list[Numbered]] = {}
        for number in dict.fromkeys(int(w) for w in words):
            hunk = by_number[number]
            picked.setdefault(hunk.path, []).append(hunk)
        return picked

    async def _reject(self, sid: str, words: list[str]) -> None:
        review = self._listed(sid)
        force = "--force" in words
        words = [w for w in words if w != "--force"]
        picked = self._pick(review, words)
        base = {"sessionId": sid, "turn": review.turn, "force": force}
        if isinstance(picked, str):
            done = await self._revert({**base, "path": picked}, f"/review reject {picked}")
            ids = [h.hunk_id for h in review.hunks if h.path == picked]
            self._rejected(review, ids)
            self.say(f"reverted {picked} to before turn {review.turn}{_undo_hint(done)}")
            return
        for path, hunks in picked.items():
            numbers = " ".join(str(h.number) for h in hunks)
            params = {**base, "path": path, "hunks": [h.hunk_id for h in hunks]}
            done = await self._revert(params, f"/review reject {numbers}")
            self._rejected(review, [h.hunk_id for h in hunks])
            self.say(f"reverted hunk(s) {numbers} of {path} {REJECTED}{_undo_hint(done)}")

    def _rejected(self, review: Review, ids: list[str]) -> None:
        for hunk_id in ids:
            review.marks[hunk_id] = REJECTED
        self.reverts.setdefault(review.session_id, []).append(ids)

    async def _revert(self, params: dict[str, Any], retry: str) -> dict[str, Any]:
        """`_session/revert`; a refusal because the lines changed since says, in the
        numbers the user saw, what changed and how to force it."""
        try:
            done: dict[str, Any] = await self.host.request(Method.REVERT, params)
        except RpcError as exc:
            changed = exc.code == ErrorCode.INVALID_STATE and "changed since" in exc.message
            if changed and not params["force"]:
                raise UsageError(self._changed_since(exc.message, params, retry)) from None
            raise
        return done

    def _changed_since(self, message: str, params: dict[str, Any], retry: str) -> str:
        review = self.review
        text = FORCE_NOTE.sub("", message)
        again = []
        for hunk in review.hunks if review is not None else []:
            if hunk.hunk_id in (params.get("hunks") or []):
                text = text.replace(hunk.hunk_id, str(hunk.number))
                if review is not None and review.marks.get(hunk.hunk_id) == REJECTED:
                    again.append(str(hunk.number))
        hint = f"{retry} --force takes them back from the file as the turn left it"
        if again:
            hint = f"hunk(s) {' '.join(again)} reverted already; " + hint
        return f"{self.clean(text)} ({hint})"

    def on_code_rewound(self, session_id: str, undo: bool) -> None:
        """A code rewind put files back. An undo takes back the last revert (when the
        last step was one): its hunks lose their ✗; a rewind to before a turn may bring
        back any rejected hunk: all of this session's ✗ go. Kept marks stay."""
        steps = self.reverts.setdefault(session_id, [])
        if undo and steps:
            back = set(steps.pop())
        elif undo:
            return
        else:
            steps.clear()
            back = None
        for (sid, _turn), marks in self.review_marks.items():
            if sid == session_id:
                for hunk_id in [h for h, mark in marks.items() if mark == REJECTED]:
                    if back is None or hunk_id in back:
                        del marks[hunk_id]

    def _accept(self, sid: str, words: list[str]) -> None:
        review = self._listed(sid)
        picked = self._pick(review, words)
        if isinstance(picked, str):
            chosen = [h for h in review.hunks if h.path == picked]
        else:
            chosen = [h for hunks in picked.values() for h in hunks]
        for hunk in chosen:
            review.marks[hunk.hunk_id] = KEPT
        shown = " ".join(str(h.number) for h in chosen) or "(none: no hunks)"
        self.say(f"kept hunk(s) {shown} {KEPT} (marked here; the files are as they are)")
