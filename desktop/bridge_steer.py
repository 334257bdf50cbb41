"""The js_api calls that steer a running agent: the session's queue, Stop (keeping or
clearing the queue), edit and resend, the agent's plan, and what notifications need to
know of the page (is it focused, the preference, how many sessions wait for the user).
A mixin of `desktop.bridge.Bridge`, kept apart so the bridge stays one screen per concern.

Arguments from the page are checked here, so a page bug gets a message naming the field
before anything reaches the sidecar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from desktop.bridge_compose import ComposeInput, prompt_content
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.app import DesktopApp

MAX_TEXT: Final = 1_000_000
MAX_QUEUE_INDEX: Final = 10_000
EDIT_SCOPES: Final = ("conversation", "both")
MAX_UNSEEN: Final = 100_000


class SteerInput(ValueError):
    """The page sent an argument that is not valid (a page bug); the message names it."""


def _sid(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SteerInput("sessionId must be non-empty text")
    return value


def _words(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise SteerInput(f"{name} must be non-empty text (at most 1 MB)")
    return value


def _bad(message: str) -> dict[str, Any]:
    return {"error": {"code": "invalid_input", "title": "Invalid input", "message": message}}


class SteerCalls:
    """`_session/queue*`, `session/cancel` with `clearQueue`, `_session/edit`, plans, focus."""

    _app: DesktopApp

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError  # the Bridge's: one sidecar request, errors as data

    def _start_turn(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError  # the Bridge's: a turn started, answered once it runs

    def _call(self, method: str, build: Any) -> Any:
        try:
            params = build()
        except (SteerInput, ComposeInput) as exc:
            return _bad(str(exc))
        return self._request(method, params)

    # ---- the queue ------------------------------------------------------------------------

    def queue(
        self, session_id: str, text: str, now: bool = False, attachments: list[Any] | None = None
    ) -> Any:
        """Queue a message (it runs when the running turn ends; `now`: cancel that turn
        and run this one next), with `attachments` (mentions, images) beside its text;
        `{item, queue, paused}`."""
        if not isinstance(now, bool):
            return _bad("now must be true or false")
        return self._call(
            Method.QUEUE,
            lambda: {
                "sessionId": _sid(session_id),
                "prompt": prompt_content(text, attachments, MAX_TEXT),
                "now": now,
            },
        )

    def queue_list(self, session_id: str) -> Any:
        return self._call(Method.QUEUE_LIST, lambda: {"sessionId": _sid(session_id)})

    def queue_edit(
        self, session_id: str, item_id: str, text: str, attachments: list[Any] | None = None
    ) -> Any:
        """A queued message's new text; `attachments`: the blocks it keeps beside it."""
        return self._call(
            Method.QUEUE_EDIT,
            lambda: {
                "sessionId": _sid(session_id),
                "id": _words(item_id, "id"),
                "prompt": prompt_content(text, attachments, MAX_TEXT),
            },
        )

    def queue_remove(self, session_id: str, item_id: str) -> Any:
        return self._call(
            Method.QUEUE_REMOVE,
            lambda: {"sessionId": _sid(session_id), "id": _words(item_id, "id")},
        )

    def queue_move(self, session_id: str, item_id: str, index: int) -> Any:
        if isinstance(index, bool) or not isinstance(index, int):
            return _bad(f"index must be an integer in 0..{MAX_QUEUE_INDEX}")
        if not 0 <= index <= MAX_QUEUE_INDEX:
            return _bad(f"index must be an integer in 0..{MAX_QUEUE_INDEX}")
        return self._call(
            Method.QUEUE_MOVE,
            lambda: {"sessionId": _sid(session_id), "id": _words(item_id, "id"), "index": index},
        )

    def queue_run(self, session_id: str) -> Any:
        """A paused queue goes on."""
        return self._call(Method.QUEUE_RUN, lambda: {"sessionId": _sid(session_id)})

    def cancel(self, session_id: str, clear_queue: bool = False) -> Any:
        """Stop the running turn: the queue is kept and paused, or emptied (`clear_queue`)."""
        if not isinstance(clear_queue, bool):
            return _bad("clearQueue must be true or false")

        def build() -> dict[str, Any]:
            params: dict[str, Any] = {"sessionId": _sid(session_id)}
            if clear_queue:
                params["_meta"] = {"clearQueue": True}
            return params

        return self._call(Method.SESSION_CANCEL, build)

    # ---- edit and resend --------------------------------------------------------------------

    def edit_resend(self, session_id: str, turn: int, text: str, scope: str) -> Any:
        """`_session/edit`: back to before `turn` (the conversation, or with `both` the code
        too) and `text` sent as the next turn; answered like `prompt` (at once when it is
        refused, `{done: false, started: true}` while it runs)."""
        try:
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise SteerInput("turn must be a positive integer")
            if scope not in EDIT_SCOPES:
                raise SteerInput(f"scope must be one of {', '.join(EDIT_SCOPES)}")
            params = {
                "sessionId": _sid(session_id),
                "turn": turn,
                "text": _words(text, "text"),
                "scope": scope,
            }
        except (SteerInput, ComposeInput) as exc:
            return _bad(str(exc))
        return self._start_turn(Method.EDIT, params)

    # ---- the plan, notifications --------------------------------------------------------------

    def plan(self, session_id: str) -> Any:
        """The session's latest plan this app saw (`{entries}`, or `{entries: null}`)."""
        if not isinstance(session_id, str):
            return _bad("sessionId must be text")
        return {"entries": self._app.plans.get(session_id)}

    def set_focus(self, focused: bool) -> Any:
        """The page gained or lost the focus (notifications are for when it has not)."""
        if not isinstance(focused, bool):
            return _bad("focused must be true or false")
        self._app.focused = focused
        return {"ok": True}

    def set_notifications(self, on: bool) -> Any:
        try:
            return self._app.settings.set_notifications(on)
        except ValueError as exc:
            return _bad(str(exc))

    def set_waiting(self, count: int, unseen: list[str] | None = None) -> Any:
        """How many sessions wait for the user (shown in the window's title), and which
        have a turn the user has not seen (kept for a rebuilt page)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return _bad("count must be a non-negative integer")
        if unseen is not None and (
            not isinstance(unseen, list)
            or len(unseen) > MAX_UNSEEN
            or not all(isinstance(i, str) for i in unseen)
        ):
            return _bad(f"unseen must be a list of session ids (at most {MAX_UNSEEN})")
        self._app.windows.set_title(count)
        if unseen is not None:
            self._app.memory["unseen"] = list(unseen)
        return {"ok": True}
