"""The js_api calls of a worktree session's review: the branch's diff, merge and discard,
and the revert of a turn's hunks. A mixin of `desktop.bridge.Bridge` (pywebview exposes
inherited methods too), kept apart so the bridge stays one screen per concern.

Arguments from the page are checked here, so a page bug gets a message naming the field
before anything reaches the sidecar; the sidecar's own refusals (a conflict, a dirty main
tree, lines changed since a turn) come back as `{"error": ...}` with its words.
"""

from __future__ import annotations

from typing import Any, Final

from desktop.diff_colours import colour_files
from protocol.methods import Method

STRATEGIES: Final = ("merge", "squash", "rebase")
MAX_DIFF_PAGE: Final = 1000  # files per `_session/worktree/diff` page, as the sidecar allows
MAX_HUNKS: Final = 10_000
MAX_MESSAGE: Final = 10_000


class ReviewInput(ValueError):
    """The page sent an argument that is not valid (a page bug); the message names it."""


def _sid(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ReviewInput("sessionId must be non-empty text")
    return value


def _bad(message: str) -> dict[str, Any]:
    return {"error": {"code": "invalid_input", "title": "Invalid input", "message": message}}


def coloured(answer: Any) -> Any:
    """A diff answer (`_session/worktree/diff`, `_session/changes`) with syntax colours
    beside its hunks' lines (`desktop/diff_colours.py`); an error as it came."""
    if isinstance(answer, dict) and isinstance(answer.get("files"), list):
        colour_files(answer["files"])
    return answer


class ReviewCalls:
    """`_session/worktree/{diff,merge,discard}` and `_session/revert` for the page."""

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError  # the Bridge's: one sidecar request, errors as data

    def worktree_diff(
        self, session_id: str, cursor: int | None = None, limit: int | None = None
    ) -> Any:
        """A page of the branch and its uncommitted work against its base: files with their
        hunks, and `nextCursor` for the next page (null at the end)."""
        try:
            params: dict[str, Any] = {"sessionId": _sid(session_id)}
            if cursor is not None:
                if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
                    raise ReviewInput("cursor must be the nextCursor of the previous page")
                params["cursor"] = cursor
            if limit is not None:
                if isinstance(limit, bool) or not isinstance(limit, int):
                    raise ReviewInput(f"limit must be an integer in 1..{MAX_DIFF_PAGE}")
                if not 1 <= limit <= MAX_DIFF_PAGE:
                    raise ReviewInput(f"limit must be an integer in 1..{MAX_DIFF_PAGE}")
                params["limit"] = limit
        except ReviewInput as exc:
            return _bad(str(exc))
        return coloured(self._request(Method.WORKTREE_DIFF, params))

    def worktree_merge(self, session_id: str, strategy: str, message: str | None = None) -> Any:
        """The branch into its base in the main working tree: `{strategy, base, before,
        after}`, or the sidecar's refusal naming the conflicting (or dirty) files."""
        try:
            params: dict[str, Any] = {"sessionId": _sid(session_id)}
            if strategy not in STRATEGIES:
                raise ReviewInput(f"strategy must be one of {', '.join(STRATEGIES)}")
            params["strategy"] = strategy
            if message is not None:
                if not isinstance(message, str) or len(message) > MAX_MESSAGE:
                    raise ReviewInput(f"message must be text of at most {MAX_MESSAGE} characters")
                if message.strip():
                    params["message"] = message
        except ReviewInput as exc:
            return _bad(str(exc))
        return self._request(Method.WORKTREE_MERGE, params)

    def worktree_discard(self, session_id: str) -> Any:
        """Remove a closed session's worktree and its branch; the new summary."""
        try:
            params = {"sessionId": _sid(session_id)}
        except ReviewInput as exc:
            return _bad(str(exc))
        return self._request(Method.WORKTREE_DISCARD, params)

    def revert(
        self,
        session_id: str,
        turn: int,
        path: str,
        hunks: list[str] | None = None,
        force: bool = False,
    ) -> Any:
        """Revert `hunks` (None or empty: the whole file) of what `turn` did to `path`, as
        a checkpointed step (a code rewind's undo takes it back); `force` reverts lines
        that changed since the turn too."""
        try:
            params: dict[str, Any] = {"sessionId": _sid(session_id)}
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise ReviewInput("turn must be a positive integer")
            if not isinstance(path, str) or not path or "\x00" in path:
                raise ReviewInput("path must be a file's path")
            params.update(turn=turn, path=path)
            if hunks is not None:
                if not isinstance(hunks, list) or len(hunks) > MAX_HUNKS:
                    raise ReviewInput("hunks must be a list of hunk ids")
                if not all(isinstance(h, str) and h for h in hunks):
                    raise ReviewInput("hunks must be a list of hunk ids")
                if hunks:
                    params["hunks"] = hunks
            if not isinstance(force, bool):
                raise ReviewInput("force must be true or false")
            if force:
                params["force"] = True
        except ReviewInput as exc:
            return _bad(str(exc))
        return self._request(Method.REVERT, params)
