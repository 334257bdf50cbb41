"""Agent text and command output as HTML for the window, rendered on the Python side.

Everything rendered here is untrusted (a model's reply, a command's output), so:

- Markdown (CommonMark + tables + strikethrough, markdown-it-py) is rendered with raw HTML
  off: an agent's `<script>` is shown as text, never parsed as a tag. Fenced code is
  highlighted by Pygments (CSS classes only; the styles are `desktop/ui/pygments.css`,
  made by `python -m desktop.render --css`).
- Images are never loaded: an image becomes a link to it (http/https only) or its alt text.
- The result goes through nh3 (an allow-list HTML sanitiser, ammonia): a fixed set of
  tags, `class` only where the renderer puts it, `href` only with http, https or mailto
  (relative and other links lose it), `rel="noopener noreferrer"` on every link. The page
  opens links through the bridge in the system browser, never in the app.
- Command output: SGR colours and attributes become `<span class=...>` around escaped text
  (desktop/ansi.py drops every other escape sequence); 256-colour and truecolour values
  are classes too (`ansi-fg-0`..`ansi-fg-255`, desktop/ui/ansi.css), truecolour a
  `data-fg`/`data-bg` hex value (made here from integers) that the page applies.

Each call costs in proportion to its input only; the results of recent Markdown renders
are cached (a page shows the same entries again after a rebuild or a switch).
"""

from __future__ import annotations

import argparse
import html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from pygments import highlight  # type: ignore[import-untyped]
from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]
from pygments.lexers import get_lexer_by_name  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

from desktop.ansi import Colour, SgrFilter, Style, apply_sgr, palette_rgb, segments

__all__ = [
    "AnsiStream",
    "ansi_html",
    "markdown_html",
    "pygments_css",
    "safe_link",
]

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
MAX_HIGHLIGHT = 200_000  # characters of one code block worth highlighting; more is plain

_FORMATTER = HtmlFormatter(nowrap=True)

TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
    "ul", "ol", "li", "strong", "em", "del", "s", "code", "pre", "span", "a",
    "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "span": {"class"},
    "pre": {"class"},
    "ol": {"start"},
}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    if not lang or len(code) > MAX_HIGHLIGHT:
        return ""  # markdown-it escapes it
    try:
        lexer = get_lexer_by_name(lang.split()[0], stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ""
    return str(highlight(code, lexer, _FORMATTER))


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """An image is never fetched: a link to it (http/https), else its alt text."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = str(token.attrGet("src") or "")
    label = html.escape(f"🖼 {alt}")
    if safe_link(src) and not src.lower().startswith("mailto:"):
        return f'<a href="{html.escape(src, quote=True)}">{label}</a>'
    return label


def _make_md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "highlight": _highlight})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image)
    return md


_MD = _make_md()


def _clean(fragment: str) -> str:
    return nh3.clean(
        fragment,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=set(LINK_SCHEMES),
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


@lru_cache(maxsize=512)
def markdown_html(text: str) -> str:
    """Agent text (Markdown) as sanitised HTML."""
    return _clean(_MD.render(text))


_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def safe_link(url: str) -> bool:
    """Whether the window may hand `url` to the system browser: http, https or mailto,
    and nothing that could smuggle a control character or whitespace into it."""
    if not isinstance(url, str) or len(url) > 8192:
        return False
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        return False
    m = _SCHEME.match(url)
    if m is None or m.group(1).lower() not in LINK_SCHEMES:
        return False
    rest = url[m.end() :]
    if m.group(1).lower() == "mailto":
        return bool(rest)
    return rest.startswith("//") and len(rest) > 2


# --- command output -------------------------------------------------------------------


def _colour_css(colour: Colour) -> str:
    r, g, b = colour if isinstance(colour, tuple) else palette_rgb(colour)
    return f"#{r:02x}{g:02x}{b:02x}"


def _span(style: Style, text: str) -> str:
    body = html.escape(text, quote=False)
    if style.plain:
        return body
    classes = []
    fg, bg = style.fg, style.bg
    if style.inverse:
        fg, bg = bg, fg
        classes.append("ansi-inverse")  # default colours swapped by the stylesheet
    for name in ("bold", "dim", "italic", "underline", "strike"):
        if getattr(style, name):
            classes.append(f"ansi-{name}")
    data = []
    for prop, value in (("fg", fg), ("bg", bg)):
        if value is None:
            continue
        if isinstance(value, int):
            classes.append(f"ansi-{prop}-{value}")
        else:  # truecolour: the page sets it from this attribute (CSP allows no inline style)
            data.append(f' data-{prop}="{_colour_css(value)}"')
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    attrs += "".join(data)
    return f"<span{attrs}>{body}</span>"


def ansi_html(text: str, style: Style | None = None) -> str:
    """Command output (escapes and all) as HTML: escaped text in SGR-styled spans."""
    return "".join(_span(s, t) for s, t in segments(text, style or Style()))


class AnsiStream:
    """One command's output as HTML, chunk by chunk: an escape sequence split between two
    chunks, and the SGR state in force, carry over to the next chunk."""

    def __init__(self) -> None:
        self._filter = SgrFilter()
        self._style = Style()

    def feed(self, chunk: str) -> str:
        return self._render(self._filter.feed(chunk))

    def flush(self) -> str:
        return self._render(self._filter.flush())

    def _render(self, clean: str) -> str:
        runs = segments(clean, self._style)
        # The style after this chunk: apply every SGR it holds, in order.
        for m in re.finditer(r"\x1b\[([0-9;:]*)m", clean):
            self._style = apply_sgr(self._style, m.group(1))
        return "".join(_span(s, t) for s, t in runs)


# --- entries --------------------------------------------------------------------------


def with_html(entry: dict[str, Any]) -> dict[str, Any]:
    """A transcript entry with `html` added where the window shows rendered text: an
    assistant's Markdown, a tool result's output."""
    text = entry.get("text")
    if not isinstance(text, str) or not text:
        return entry
    if entry.get("type") == "assistant":
        return {**entry, "html": markdown_html(text)}
    if entry.get("type") == "tool_result":
        return {**entry, "html": ansi_html(text)}
    return entry


# --- styles ---------------------------------------------------------------------------


def pygments_css(light: str = "default", dark: str = "monokai") -> str:
    """The highlighting stylesheet: `light` by default, `dark` when the page is dark (the
    system's preference unless the page's toggle chose, see app.css). For a reply's code
    blocks and for the diffs' lines (`desktop/diff_colours.py`)."""
    scopes = (".md pre code", ".diff-code.hl")

    def within(prefix: str) -> list[str]:
        return [f"{prefix}{scope}" for scope in scopes]

    light_css = HtmlFormatter(style=light).get_style_defs(within(""))
    dark_css = HtmlFormatter(style=dark).get_style_defs(within(":root[data-theme=dark] "))
    system_dark = HtmlFormatter(style=dark).get_style_defs(within(":root:not([data-theme=light]) "))
    return (
        "/* Generated by `python -m desktop.render --css` (Pygments styles "
        f"{light!r} and {dark!r}); do not edit. */\n"
        f"{_no_backgrounds(light_css)}\n{_no_backgrounds(dark_css)}\n"
        f"@media (prefers-color-scheme: dark) {{\n{_no_backgrounds(system_dark)}\n}}\n"
    )


def _no_backgrounds(css: str) -> str:
    # The code block's own background comes from app.css (the theme's); drop the style's
    # page-level rules (`pre`, `td.linenos`, ...) and keep the token colours.
    keep = [line for line in css.splitlines() if " .hll" not in line and "linenos" not in line]
    keep = [line for line in keep if not re.match(r"^\S*( \S+)* \{ background:", line)]
    return "\n".join(line for line in keep if not line.startswith("pre {"))


def ansi_css() -> str:
    """Classes for the xterm palette's 16..255 (fixed colours); 0..15 follow the theme and
    are in app.css."""
    lines = ["/* Generated by `python -m desktop.render --ansi-css`; do not edit. */"]
    for n in range(16, 256):
        hexa = _colour_css(n)
        lines.append(f".ansi-fg-{n} {{ color: {hexa}; }}")
        lines.append(f".ansi-bg-{n} {{ background-color: {hexa}; }}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m desktop.render")
    parser.add_argument("--css", action="store_true", help="print desktop/ui/pygments.css")
    parser.add_argument("--ansi-css", action="store_true", help="print desktop/ui/ansi.css")
    args = parser.parse_args(argv)
    if args.css:
        print(pygments_css(), end="")
    if args.ansi_css:
        print(ansi_css(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
