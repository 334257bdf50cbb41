"""`_session/revert`: some hunks of one file of a turn taken back in the working tree.

The turn's diff of that file is read from its checkpoints (the same hunks, with the same
ids, as `_session/changes` and a worktree's diff show), the chosen hunks are applied in
reverse to the file as it is now -- on a scratch index, so nothing is written until the
result is known -- and the result is written by the checkpoints' journaled restore as a
step of its own (a rewind's refs), so `_session/rewind {undo: true}` takes it back.

Where the file changed since the turn, `git apply` still finds a hunk whose lines are
there (shifted is fine); one whose lines changed is refused, naming it, unless `force`:
then those hunks are taken back from the file as the turn left it, replacing what
changed since in that file. A whole file (no hunks named) goes back to what it was
before the turn; so does a file the turn added, deleted or changed as binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sidecar.checkpoints.history import (
    Step,
    end_of,
    next_rewind_number,
    rewind_ref,
    uncovered,
)
from sidecar.checkpoints.shadow import RestorePlan, ShadowRepo
from sidecar.domain.errors import CheckpointError, InvalidInput, InvalidState
from sidecar.worktrees.hunks import FileDiff, Hunk, parse_diff

_GIT_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}


@dataclass(frozen=True, slots=True)
class HunkRevert:
    turn: int
    path: str
    hunks: tuple[str, ...]  # the ids taken back (all of the file's, for a whole file)
    forced: bool  # lines changed since the turn were replaced (`force`)
    rewind: int  # the step's number: `_session/rewind {undo: true}` takes it back


def _quoted(name: str) -> str:
    """A path as git writes it in a patch header (C-quoted when it must be)."""
    if not any(c in _GIT_ESCAPES or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return name
    body = "".join(
        _GIT_ESCAPES.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
        for c in name
    )
    return f'"{body}"'


def patch_of(path: str, hunks: Sequence[Hunk]) -> bytes:
    """A patch of `path` made of just these hunks (git finds each where its lines are)."""
    head = [
        f"diff --git {_quoted('a/' + path)} {_quoted('b/' + path)}",
        f"--- {_quoted('a/' + path)}",
        f"+++ {_quoted('b/' + path)}",
    ]
    body = [line for hunk in hunks for line in (hunk.header, *hunk.lines)]
    return ("\n".join(head + body) + "\n").encode("utf-8", errors="surrogateescape")


def _chosen(found: FileDiff, ids: Sequence[str], turn: int) -> tuple[Hunk, ...]:
    if not ids:
        return found.hunks
    by_id = {h.id: h for h in found.hunks}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        known = ", ".join(by_id) or "none: it is a whole-file change"
        raise InvalidInput(
            "hunks",
            f"no hunk {', '.join(unknown)} in {found.path} of turn {turn} (its hunks: {known})",
        )
    return tuple(by_id[i] for i in dict.fromkeys(ids))


def _whole_file(found: FileDiff, chosen: Sequence[Hunk]) -> bool:
    """Taken back as a file, not as hunks: added, deleted, binary, a mode-only change, or
    every hunk of an added or deleted file."""
    return found.binary or not found.hunks or found.status in ("added", "deleted") or not chosen


async def revert(
    repo: ShadowRepo,
    ordered: list[Step],
    turn: int,
    turns: int,
    path: str,
    ids: Sequence[str],
    *,
    force: bool,
) -> HunkRevert:
    """Under the turn lock (the caller's): nothing else writes the tree meanwhile."""
    if turn < repo.first_turn():
        raise CheckpointError(uncovered(turn, repo.first_turn()))
    index = next((i for i, s in enumerate(ordered) if s.key == (turn, 0, 0)), None)
    step = ordered[index] if index is not None else None
    if index is None or step is None or step.before is None:
        raise InvalidInput("turn", f"turn {turn} changed no file")
    current = (await repo.snapshot(look_again=[path])).tree  # it may write this file
    after = end_of(ordered, index, current)
    assert after is not None  # `current` ends a turn left unfinished
    text, _ = await repo.diff(step.before, after, limit=1 << 62, paths=[path])
    found = next((f for f in parse_diff(text) if f.path == path), None)
    if found is None:
        raise InvalidInput("path", f"turn {turn} did not change {path}")
    chosen = _chosen(found, ids, turn)
    whole = _whole_file(found, chosen)
    if whole:
        chosen = found.hunks
    now, left = await _entry(repo, current, path), await _entry(repo, after, path)
    target = None
    if not whole or now != left:
        # Hunk by hunk on the file as it is now: what changed elsewhere in it stays.
        target = await _reversed(repo, current, found, chosen)
    forced = target is None and not (whole and now == left)
    if forced and not force:
        raise _changed_since(path, turn, chosen)
    if target is not None:
        plan = RestorePlan(target, (path,), (), "")
    elif whole:  # as it was before the turn (absent: the turn made it)
        before = await _entry(repo, step.before, path)
        plan = RestorePlan(step.before, (path,) if before else (), () if before else (path,), "")
    else:  # forced: the hunks taken back from the file as the turn left it
        assert left is not None  # a file changed hunk by hunk is in the turn's end
        replaced = await repo.patched_tree(
            current, patch_of(path, chosen), reverse=True, entry=(path, left)
        )
        if replaced is None:
            raise CheckpointError(f"the hunks of {path} do not apply to turn {turn}'s end")
        plan = RestorePlan(replaced, (path,), (), "")
    number = next_rewind_number(ordered)
    ref = rewind_ref(turns, number)  # the step's two ends: `current` and what is restored
    await repo.restore(RestorePlan(plan.target, plan.restore, plan.delete, ref, current))
    return HunkRevert(turn, path, tuple(h.id for h in chosen), forced, number)


async def _entry(repo: ShadowRepo, tree: str, path: str) -> str | None:
    return (await repo.entries(tree, [path])).get(path)


async def _reversed(
    repo: ShadowRepo, current: str, found: FileDiff, hunks: Sequence[Hunk]
) -> str | None:
    if found.binary or not hunks:
        return None
    return await repo.patched_tree(current, patch_of(found.path, hunks), reverse=True)


def _changed_since(path: str, turn: int, hunks: Sequence[Hunk]) -> InvalidState:
    named = ", ".join(f"{h.id} ({h.header.split(' @@')[0]} @@)" for h in hunks)
    return InvalidState(
        f"{path} changed since turn {turn}: the lines of hunk(s) {named} are not there any "
        "more; nothing was reverted (force: true takes them back from the file as the turn "
        "left it, replacing what changed since in that file)"
    )
