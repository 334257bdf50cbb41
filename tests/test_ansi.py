"""desktop.ansi: SGR kept, every other escape and control sequence dropped."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from desktop.ansi import SgrFilter, Style, apply_sgr, palette_rgb, segments, sgr_only, strip_all

SGR = re.compile(r"\x1b\[[0-9;:]*m")
ESC = "\x1b"

plain_text = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="\x1b\r"
        + "".join(chr(c) for c in range(0x20) if c not in (9, 10))
        + "".join(chr(c) for c in range(0x7F, 0xA0)),
    )
)

sgr_seq = st.lists(st.integers(0, 255), max_size=5).map(
    lambda ps: "\x1b[" + ";".join(map(str, ps)) + "m"
)
hostile = st.sampled_from(
    [
        "\x1b[2J",
        "\x1b[H",
        "\x1b[10;20H",
        "\x1b[?1049h",
        "\x1b[?25l",
        "\x1b]0;title\x07",
        "\x1b]8;;http://x\x1b\\",
        "\x1b]52;c;aGVsbG8=\x07",
        "\x1bP+q544e\x1b\\",
        "\x1b7",
        "\x1b8",
        "\x1b(B",
        "\x1bc",
        "\x1b",
        "\x1b[",
        "\x1b[1",
        "\x1b]unterminated",
        "\x07",
        "\x08",
        "\x00",
        "\x7f",
        "\x9b",
        "\x0c",
        "\x1b[>c",
        "\x1b[1 q",
        "\x1b[6n",
    ]
)
mixed = st.lists(st.one_of(plain_text, sgr_seq, hostile, st.just("\r"), st.just("\r\n"))).map(
    "".join
)


def non_sgr_escape(text: str) -> bool:
    return ESC in SGR.sub("", text)


@given(plain_text)
def test_plain_text_unchanged(text: str) -> None:
    assert sgr_only(text) == text
    assert strip_all(text) == text
    assert "".join(t for _, t in segments(text)) == text


@given(mixed)
def test_no_escape_but_sgr_survives(text: str) -> None:
    out = sgr_only(text)
    assert not non_sgr_escape(out)
    visible = SGR.sub("", out)
    for ch in visible:
        assert ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0), repr(ch)


@given(mixed)
def test_idempotent(text: str) -> None:
    once = sgr_only(text)
    assert sgr_only(once) == once


@given(mixed)
def test_segments_text_is_the_visible_text(text: str) -> None:
    runs = segments(text)
    assert "".join(t for _, t in runs) == strip_all(text)
    assert all(t for _, t in runs)
    assert all(a[0] != b[0] for a, b in zip(runs, runs[1:], strict=False))
    for _, t in runs:
        assert ESC not in t


@given(st.lists(st.one_of(plain_text, sgr_seq, hostile), max_size=8), st.data())
def test_stream_filter_matches_whole_text(parts: list[str], data: st.DataObject) -> None:
    # Without carriage returns, splitting the text anywhere gives the same result.
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    f = SgrFilter()
    out = []
    prev = 0
    for c in [*cuts, len(text)]:
        out.append(f.feed(text[prev:c]))
        prev = c
    out.append(f.flush())
    streamed = "".join(out)
    assert not non_sgr_escape(streamed)
    assert strip_all(streamed) == strip_all(text)


def test_examples() -> None:
    assert sgr_only("\x1b[31mred\x1b[0m") == "\x1b[31mred\x1b[0m"
    assert sgr_only("a\x1b[2Jb\x1b]0;t\x07c") == "abc"
    assert sgr_only("line\r\nnext") == "line\nnext"
    assert sgr_only("10%\r50%\r100%\n") == "100%\n"
    assert sgr_only("done\r") == "done"
    assert sgr_only("\x1b[32m10%\r100%") == "\x1b[32m100%"
    assert sgr_only("tab\there\x07") == "tab\there"
    f = SgrFilter()
    assert f.feed("a\x1b[3") == "a"
    assert f.feed("1mred") == "\x1b[31mred"
    assert f.feed("x\r") == "x"
    assert f.feed("\ny") == "\ny"


def test_styles() -> None:
    assert segments("\x1b[1;31mA\x1b[22mB\x1b[0mC") == [
        (Style(bold=True, fg=1), "A"),
        (Style(fg=1), "B"),
        (Style(), "C"),
    ]
    assert apply_sgr(Style(), "38;5;200").fg == 200
    assert apply_sgr(Style(), "38;2;1;2;3").fg == (1, 2, 3)
    assert apply_sgr(Style(), "38:2::1:2:3").fg == (1, 2, 3)
    assert apply_sgr(Style(), "48:5:17").bg == 17
    assert apply_sgr(Style(), "95;104") == Style(fg=13, bg=12)
    assert apply_sgr(Style(), "2;3;4;7;9") == Style(
        dim=True, italic=True, underline=True, inverse=True, strike=True
    )
    assert apply_sgr(Style(underline=True), "4:0").underline is False
    assert apply_sgr(Style(bold=True, fg=3), "") == Style()
    assert apply_sgr(Style(fg=3), "39").fg is None
    assert apply_sgr(Style(), "38;5") == Style()  # truncated: ignored
    assert palette_rgb(16) == (0, 0, 0)
    assert palette_rgb(231) == (255, 255, 255)
    assert palette_rgb(232) == (8, 8, 8)


@given(st.lists(st.integers(0, 300), max_size=8), st.sampled_from([";", ":"]))
def test_apply_sgr_never_raises(params: list[int], sep: str) -> None:
    style = apply_sgr(Style(), sep.join(map(str, params)))
    for c in (style.fg, style.bg):
        assert c is None or (isinstance(c, int) and 0 <= c <= 255) or len(c) == 3
