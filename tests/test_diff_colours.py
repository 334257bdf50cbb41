"""The window's syntax colours for diffs (`desktop/diff_colours.py`): Pygments tokens by
line, sent to the page as data. Whatever the agent wrote, the tokens spell exactly its
text and their classes are only token class names: nothing can become markup."""

from __future__ import annotations

import re
from typing import Any

from desktop.bridge_review import coloured
from desktop.diff_colours import MAX_LINE, colour_files, hunk_tokens, lexer_for, line_tokens

HOSTILE = [
    " def f():",
    '-    return "<script>alert(1)</script>"',
    '+    return """<img src=x onerror=alert(1)>',
    '+</span><b class="k">not bold</b> &amp; &lt;"""  # <!-- -->',
    " # '\"`${x}`",
    "\\ No newline at end of file",
]
CLASS = re.compile(r"[A-Za-z0-9_-]{1,12}")


def spelled(tokens: list[list[str]]) -> str:
    return "".join(text for _, text in tokens)


def test_hostile_lines_are_tokens_that_spell_exactly_their_text() -> None:
    lexer = lexer_for("pkg/module.py")
    assert lexer is not None
    tokens = hunk_tokens(lexer, HOSTILE)
    assert tokens is not None and len(tokens) == len(HOSTILE)
    for line, found in zip(HOSTILE, tokens, strict=True):
        if line.startswith("\\"):
            assert found is None  # the note has no code
            continue
        assert found is not None
        assert spelled(found) == line[1:]
        assert all(cls == "" or CLASS.fullmatch(cls) for cls, _ in found)
        assert all(isinstance(text, str) and text for _, text in found)
    # Each side is one text: the string opened on the first added line goes on.
    assert [cls for cls, _ in tokens[3] if cls] == ["s2", "c1"]
    assert ["k", "return"] in tokens[1] and ["k", "return"] in tokens[2]
    assert any(cls == "nf" for cls, _ in tokens[0])


def test_text_a_lexer_would_change_stays_plain() -> None:
    """Pygments turns CR LF into LF: such a line is given as one plain token, unchanged."""
    lexer = lexer_for("a.py")
    lines = ["x = 1\r", "\ty = 2"]
    assert [spelled(t) for t in line_tokens(lexer, lines)] == lines
    assert line_tokens(lexer, ["x = 1\r"]) == [[["", "x = 1\r"]]]


def test_no_lexer_long_lines_and_the_budget_leave_hunks_plain() -> None:
    files: list[Any] = [
        {"path": "notes.unknown-ext", "hunks": [{"lines": ["+plain"]}]},
        {"path": "wide.py", "hunks": [{"lines": ["+" + "x" * (MAX_LINE + 1)]}]},
        {"path": "a.py", "hunks": [{"lines": ["+a = 1"]}, {"lines": ["+b = 2", "+c = 3"]}]},
        "not a file",
        {"path": "b.py", "hunks": "not a list"},
        {"path": "c.py", "hunks": [{"lines": ["+ok", 3]}, None]},
    ]
    colour_files(files, budget=3)
    assert "tokens" not in files[0]["hunks"][0]
    assert "tokens" not in files[1]["hunks"][0]
    first, second = files[2]["hunks"]
    assert first["tokens"] == [[["n", "a"], ["", " "], ["o", "="], ["", " "], ["mi", "1"]]]
    assert "tokens" not in second  # over the budget (1 + 2 > 2 left after the long one)
    assert "tokens" not in files[5]["hunks"][0]


def test_the_bridge_colours_a_diff_answer_and_passes_an_error_on() -> None:
    answer = {"files": [{"path": "m.js", "hunks": [{"lines": ["+let a = '<b>'"]}]}]}
    assert coloured(answer) is answer
    (tokens,) = answer["files"][0]["hunks"][0]["tokens"]  # type: ignore[index]
    assert spelled(tokens) == "let a = '<b>'" and ["kd", "let"] in tokens
    error = {"error": {"code": "invalid_input", "message": "x"}}
    assert coloured(error) == {"error": {"code": "invalid_input", "message": "x"}}
    assert coloured(None) is None
