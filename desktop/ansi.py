"""ANSI escape handling for command output: keep SGR (colours and text attributes),
drop every other escape or control sequence.

Command output is untrusted: a command may print cursor moves, screen clears, window
titles (OSC), terminal queries (DCS) or bare control bytes. The window and the TUI show
its colours and nothing else. `sgr_only` filters a complete text; `SgrFilter` does the
same for a stream of chunks (an escape sequence split between two chunks is held back
until it is complete); `segments` turns filtered text into runs of text with their SGR
state, for the window's HTML (see desktop/render.py).

A small tokenizer: the escape grammar (ECMA-48) is regular for what is needed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

__all__ = [
    "Colour",
    "SgrFilter",
    "Style",
    "palette_rgb",
    "segments",
    "sgr_only",
    "strip_all",
]

# One escape or control token. Order matters: the longer forms first.
#  - CSI: ESC [ params intermediates final   (SGR when final is "m" and params are plain)
#  - OSC / DCS / SOS / PM / APC strings, ended by BEL or ST (ESC \); unterminated ones run
#    to the end of the text
#  - other two-byte or nF escapes (ESC 7, ESC ( B, ...)
#  - a bare ESC (at the end of the text, or followed by something that is not an escape)
#  - C1 controls (U+0080..U+009F), C0 controls but \t \n \r, and DEL
_TOKEN = re.compile(
    r"""
    (?P<csi>\x1b\[(?P<params>[0-?]*)(?P<inter>[\x20-/]*)(?P<final>[@-~]))
  | (?P<str>\x1b[\]PX^_].*?(?:\x07|\x1b\\|\Z))
  | (?P<esc>\x1b[\x20-/]*[0-~])
  | (?P<bare>\x1b)
  | (?P<ctl>[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x80-\x9f])
  | (?P<cr>\r)
    """,
    re.VERBOSE | re.DOTALL,
)

_SGR_PARAMS = re.compile(r"[0-9;:]*")

# An escape sequence that may still be incomplete at the end of a chunk.
_INCOMPLETE_TAIL = re.compile(
    r"""
    \x1b(?:
        \[[0-?]*[\x20-/]*          # CSI without its final byte
      | [\]PX^_](?:(?!\x07|\x1b\\).)*\x1b?   # string without its terminator
      | [\x20-/]*                  # nF escape without its final byte
    )\Z
    """,
    re.VERBOSE | re.DOTALL,
)


def _is_sgr(m: re.Match[str]) -> bool:
    return (
        m.group("csi") is not None
        and m.group("final") == "m"
        and not m.group("inter")
        and _SGR_PARAMS.fullmatch(m.group("params")) is not None
    )


def _filter_line_pieces(text: str) -> str:
    """Tokenize: SGR kept, other sequences and controls dropped, "\\r" kept for now."""
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            out.append(text[pos : m.start()])
        pos = m.end()
        if _is_sgr(m):
            out.append(m.group(0))
        elif m.group("cr") is not None:
            out.append("\r")
    out.append(text[pos:])
    return "".join(out)


_SGR_ANYWHERE = re.compile(r"\x1b\[[0-9;:]*m")


def _visible(piece: str) -> str:
    return _SGR_ANYWHERE.sub("", piece)


def _resolve_cr(line: str) -> str:
    """A carriage return inside a line overwrites it (a progress bar): keep the last piece
    that shows something, with the SGR codes of the pieces before it (so colours set
    earlier still apply)."""
    if "\r" not in line:
        return line
    pieces = line.split("\r")
    keep = len(pieces) - 1
    while keep > 0 and _visible(pieces[keep]) == "":
        keep -= 1
    carried = "".join(_SGR_ANYWHERE.findall("".join(pieces[:keep])))
    trailing = "".join(_SGR_ANYWHERE.findall("".join(pieces[keep + 1 :])))
    return carried + pieces[keep] + trailing


def sgr_only(text: str) -> str:
    """`text` with SGR sequences (ESC [ ... m) kept and every other escape sequence and
    control character dropped, except newline and tab. "\\r\\n" becomes "\\n"; a lone
    "\\r" overwrites the line, so only the last text written to it is kept."""
    filtered = _filter_line_pieces(text)
    if "\r" not in filtered:
        return filtered
    filtered = filtered.replace("\r\n", "\n")
    return "\n".join(_resolve_cr(line) for line in filtered.split("\n"))


def strip_all(text: str) -> str:
    """`text` as plain text: every escape sequence, SGR included, dropped."""
    return _visible(sgr_only(text))


class SgrFilter:
    """`sgr_only` over a stream: feed chunks, get filtered text. A trailing escape
    sequence that is not complete yet is held back until the next chunk; so is a
    trailing "\\r" (it may be the first half of "\\r\\n"). `flush` returns what is left.

    Carriage returns are resolved within a chunk only; a progress bar split across
    chunks shows each of its states on its own, which is harmless."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        self._held = ""
        m = _INCOMPLETE_TAIL.search(text)
        if m is not None:
            self._held = text[m.start() :]
            text = text[: m.start()]
        if text.endswith("\r"):
            self._held = "\r" + self._held
            text = text[:-1]
        return sgr_only(text)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return sgr_only(text)


# --- SGR state ------------------------------------------------------------------------

# A colour: an index into the 256-colour palette (0-15 are the theme's named colours),
# or a truecolour (r, g, b).
Colour = int | tuple[int, int, int]


@dataclass(frozen=True)
class Style:
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    inverse: bool = False
    strike: bool = False
    fg: Colour | None = None
    bg: Colour | None = None

    @property
    def plain(self) -> bool:
        return self == _PLAIN


_PLAIN = Style()


def palette_rgb(index: int) -> tuple[int, int, int]:
    """The xterm 256-colour palette for 16..255 (the 6x6x6 cube and the grey ramp).
    0..15 are theme colours; a fixed xterm-like value is returned for them."""
    if index < 16:
        return _BASE16[index]
    if index < 232:
        i = index - 16
        steps = (0, 95, 135, 175, 215, 255)
        return (steps[i // 36], steps[(i // 6) % 6], steps[i % 6])
    level = 8 + (index - 232) * 10
    return (level, level, level)


_BASE16: tuple[tuple[int, int, int], ...] = (
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
)


def _byte(value: int | None) -> bool:
    return value is not None and 0 <= value <= 255


def _rgb(values: list[int | None]) -> Colour | None:
    """Three colour bytes as a truecolour value, or None if any is missing or out of range."""
    if len(values) >= 3 and all(_byte(v) for v in values[:3]):
        return (int(values[0] or 0), int(values[1] or 0), int(values[2] or 0))
    return None


def _extended_colour(params: list[list[int | None]], i: int) -> tuple[Colour | None, int]:
    """Parse 38/48 at params[i]; returns (colour or None, index of the next param).
    Handles both `38;5;n` / `38;2;r;g;b` and the colon forms `38:5:n` / `38:2::r:g:b`."""
    head = params[i]
    if len(head) > 1:  # colon form, all in one param
        sub = head[1:]
        if sub[0] == 5 and len(sub) >= 2:
            return (sub[1] if _byte(sub[1]) else None), i + 1
        if sub[0] == 2:
            rgb = sub[1:]
            if len(rgb) >= 4:  # with the colour-space id: 2::r:g:b or 2:cs:r:g:b
                rgb = rgb[1:]
            return _rgb(rgb), i + 1
        return None, i + 1
    kind = params[i + 1][0] if i + 1 < len(params) else None
    if kind == 5:
        n = params[i + 2][0] if i + 2 < len(params) else None
        return (n if _byte(n) else None), i + 3
    if kind == 2:
        return _rgb([params[j][0] if j < len(params) else None for j in range(i + 2, i + 5)]), i + 5
    return None, i + 2


# SGR codes that set or clear attributes: the fields each one sets.
_ATTRIBUTE_CODES: dict[int, dict[str, bool]] = {
    1: {"bold": True},
    2: {"dim": True},
    3: {"italic": True},
    7: {"inverse": True},
    9: {"strike": True},
    21: {"underline": True},
    22: {"bold": False, "dim": False},
    23: {"italic": False},
    24: {"underline": False},
    27: {"inverse": False},
    29: {"strike": False},
}
# Colour ranges: (first code, last code, field, the first code's colour number).
_COLOUR_RANGES: tuple[tuple[int, int, str, int], ...] = (
    (30, 37, "fg", 0),
    (40, 47, "bg", 0),
    (90, 97, "fg", 8),
    (100, 107, "bg", 8),
)


def apply_sgr(style: Style, params_text: str) -> Style:
    """The style after one SGR sequence with parameters `params_text` ("1;31", "")."""
    params: list[list[int | None]] = []
    for part in params_text.split(";"):
        params.append([int(s) if s.isdigit() else None for s in part.split(":")])
    i = 0
    while i < len(params):
        code = params[i][0]
        if code is None or code == 0:
            style = _PLAIN
        elif code in _ATTRIBUTE_CODES:
            style = replace(style, **_ATTRIBUTE_CODES[code])
        elif code == 4:
            sub = params[i][1] if len(params[i]) > 1 else None
            style = replace(style, underline=sub != 0)
        elif code in (39, 49):
            style = replace(style, **{"fg" if code == 39 else "bg": None})
        elif code in (38, 48):
            colour, nxt = _extended_colour(params, i)
            if colour is not None:
                style = replace(style, **{"fg" if code == 38 else "bg": colour})
            i = nxt
            continue
        else:
            for first, last, field, base in _COLOUR_RANGES:
                if first <= code <= last:
                    style = replace(style, **{field: code - first + base})
                    break
        i += 1
    return style


def segments(text: str, style: Style = _PLAIN) -> list[tuple[Style, str]]:
    """`text` (any escapes; non-SGR ones are dropped first) as runs of visible text with
    the SGR state in force, starting from `style`. Adjacent runs with the same style are
    merged; empty runs are left out."""
    clean = sgr_only(text)
    runs: list[tuple[Style, str]] = []
    pos = 0
    for m in _SGR_ANYWHERE.finditer(clean):
        if m.start() > pos:
            _add_run(runs, style, clean[pos : m.start()])
        style = apply_sgr(style, m.group(0)[2:-1])
        pos = m.end()
    if pos < len(clean):
        _add_run(runs, style, clean[pos:])
    return runs


def _add_run(runs: list[tuple[Style, str]], style: Style, text: str) -> None:
    if runs and runs[-1][0] == style:
        runs[-1] = (style, runs[-1][1] + text)
    else:
        runs.append((style, text))
