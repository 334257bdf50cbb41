"""The window's review calls refuse a bad argument themselves, naming it, before anything
reaches the sidecar (desktop/bridge_review.py; the calls that pass are exercised against
the real sidecar by the window scenarios in tests/test_desktop_window.py)."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.bridge import _worktree
from desktop.bridge_review import ReviewCalls


class NoSidecar(ReviewCalls):
    """Every request is a failure here: a refused argument must never be sent."""

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"sent {method} {params}")


def message(result: Any) -> str:
    assert result["error"]["code"] == "invalid_input", result
    return str(result["error"]["message"])


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda b: b.worktree_diff("", None, None), "sessionId"),
        (lambda b: b.worktree_diff("s", -1, None), "cursor"),
        (lambda b: b.worktree_diff("s", True, None), "cursor"),
        (lambda b: b.worktree_diff("s", 0, 0), "limit"),
        (lambda b: b.worktree_diff("s", 0, 1001), "limit"),
        (lambda b: b.worktree_merge("s", "octopus"), "strategy"),
        (lambda b: b.worktree_merge("s", "squash", 5), "message"),
        (lambda b: b.worktree_discard(None), "sessionId"),
        (lambda b: b.revert("s", 0, "a.txt"), "turn"),
        (lambda b: b.revert("s", True, "a.txt"), "turn"),
        (lambda b: b.revert("s", 1, ""), "path"),
        (lambda b: b.revert("s", 1, "a\x00b"), "path"),
        (lambda b: b.revert("s", 1, "a.txt", "h1"), "hunks"),
        (lambda b: b.revert("s", 1, "a.txt", ["h1", ""]), "hunks"),
        (lambda b: b.revert("s", 1, "a.txt", ["h1"], "yes"), "force"),
    ],
)
def test_a_bad_argument_is_refused_naming_it(call: Any, field: str) -> None:
    assert message(call(NoSidecar())).startswith(field)


def test_the_forms_worktree_becomes_meta_worktree() -> None:
    assert _worktree(None) is None and _worktree(False) is None
    assert _worktree(True) is True
    assert _worktree({"branch": "", "base": ""}) is True
    assert _worktree({"branch": " fix ", "base": "main"}) == {"branch": "fix", "base": "main"}
    assert _worktree({"branch": "fix"}) == {"branch": "fix"}
    assert _worktree({"path": "/x"}) == "worktree must be true or {branch?, base?}"
    assert _worktree({"branch": 3}) == "worktree.branch must be text (at most 200 characters)"
    assert _worktree("yes") == "worktree must be true or {branch?, base?}"
