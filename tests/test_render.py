"""desktop.render: agent Markdown as sanitised HTML, command output as styled spans."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.ansi import strip_all
from desktop.render import (
    TAGS,
    AnsiStream,
    ansi_css,
    ansi_html,
    markdown_html,
    pygments_css,
    safe_link,
    with_html,
)

ALLOWED_ATTRS = {"href", "title", "class", "rel", "start"}


class Audit(HTMLParser):
    """Every tag and attribute of a fragment, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def audit(fragment: str) -> Audit:
    a = Audit()
    a.feed(fragment)
    a.close()
    return a


def assert_safe(fragment: str) -> None:
    for tag, attrs in audit(fragment).tags:
        assert tag in TAGS, tag
        assert tag not in {"img", "script", "style", "iframe", "object", "embed", "form"}
        for name, value in attrs.items():
            assert name in ALLOWED_ATTRS, (tag, name)
            assert not name.startswith("on")
            if name == "href":
                assert (
                    value is not None
                    and safe_link(value)
                    or not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", value or "")
                ), value
        if tag == "a":
            assert "noopener" in (attrs.get("rel") or "")


HOSTILE = [
    "<script>window.pwned = 1</script>",
    "<img src=x onerror=alert(1)>",
    '<img src="http://127.0.0.1:9/pixel">',
    "![pic](http://127.0.0.1:9/pixel.png)",
    "![pic](data:image/png;base64,AAAA)",
    "[x](javascript:alert(1))",
    "[x](JAVASCRIPT:alert(1))",
    "[x](vbscript:msgbox)",
    "[x](data:text/html,<script>alert(1)</script>)",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=http://x></iframe>",
    "<style>body{display:none}</style>",
    '<div onclick="x()">y</div>',
    "<svg onload=alert(1)>",
    '<object data="x"></object>',
    "[x](  javascript:alert(1) )",
    "<http://127.0.0.1:9/auto>",
    "<javascript:alert(1)>",
    '<form action="http://x"><input></form>',
    "```html\n<script>alert(1)</script>\n```",
]


def test_hostile_snippets_are_neutralised() -> None:
    for snippet in HOSTILE:
        out = markdown_html(snippet)
        assert_safe(out)
        assert "<script" not in out.lower() and "<img" not in out.lower(), out
        assert (
            "javascript:"
            not in re.sub(
                r"&[a-z]+;", "", " ".join(v or "" for _, a in audit(out).tags for v in a.values())
            ).lower()
        )


def test_markdown_features() -> None:
    out = markdown_html("# T\n\n**b** *i* `c` ~~s~~\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    for tag in ("<h1>", "<strong>", "<em>", "<code>", "<table>", "<td>", "<s>"):
        assert tag in out, (tag, out)
    code = markdown_html("```python\ndef f(): return '<b>'\n```\n")
    assert '<pre><code class="language-python">' in code
    assert '<span class="k">def</span>' in code and "&lt;b&gt;" in code
    plain = markdown_html("```nosuchlang\n<b>x</b>\n```\n")
    assert "&lt;b&gt;x&lt;/b&gt;" in plain
    link = markdown_html("[site](https://example.com)")
    assert 'href="https://example.com"' in link and 'rel="noopener noreferrer"' in link
    img = markdown_html("![cat](https://example.com/cat.png)")
    assert "<img" not in img and 'href="https://example.com/cat.png"' in img and "cat" in img


def test_safe_link() -> None:
    assert safe_link("https://example.com/x?y=1")
    assert safe_link("http://127.0.0.1:8000/")
    assert safe_link("mailto:a@example.com")
    for bad in (
        "javascript:alert(1)",
        "data:text/html,x",
        "file:///etc/passwd",
        "foo",
        "",
        "https:",
        "http://a b",
        "https://x\n",
        "//example.com",
        "vbscript:x",
    ):
        assert not safe_link(bad), bad


md_text = st.lists(
    st.sampled_from(
        [
            *"ab <>&\"'`*_[]()!#|-:/=\n",
            "javascript:",
            "<script>",
            "onerror=",
            "<img src=",
            "http://",
            "```",
            "data:",
            "<a href=",
            "](",
            "![",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300)
@given(md_text)
def test_markdown_output_is_always_safe(text: str) -> None:
    assert_safe(markdown_html(text))


escapes = st.lists(
    st.one_of(
        st.text(max_size=10),
        st.sampled_from(
            [
                "\x1b[1m",
                "\x1b[31m",
                "\x1b[0m",
                "\x1b[38;5;123m",
                "\x1b[48;2;1;2;3m",
                "\x1b[7m",
                "\x1b[2J",
                "\x1b]0;t\x07",
                "<b>",
                "&",
                "\r",
                "\n",
            ]
        ),
    ),
    max_size=20,
).map("".join)


@given(escapes)
def test_ansi_html_text_is_the_plain_output(text: str) -> None:
    out = ansi_html(text)
    a = audit(out)
    assert "".join(a.text) == strip_all(text)
    for tag, attrs in a.tags:
        assert tag == "span"
        assert set(attrs) <= {"class", "data-fg", "data-bg"}
        for cls in (attrs.get("class") or "").split():
            assert re.fullmatch(
                r"ansi-(bold|dim|italic|underline|strike|inverse|(fg|bg)-\d{1,3})", cls
            )
        for key in ("data-fg", "data-bg"):
            if key in attrs:
                assert re.fullmatch(r"#[0-9a-f]{6}", attrs[key] or "")


@given(st.lists(escapes, max_size=6))
def test_stream_keeps_styles_across_chunks(chunks: list[str]) -> None:
    stream = AnsiStream()
    out = "".join(stream.feed(c) for c in chunks) + stream.flush()
    whole = "".join(chunks)
    if "\r" not in whole:
        assert "".join(audit(out).text) == strip_all(whole)


def test_stream_carries_colour() -> None:
    stream = AnsiStream()
    assert stream.feed("\x1b[3") == ""
    assert stream.feed("2mgreen") == '<span class="ansi-fg-2">green</span>'
    assert stream.feed(" still") == '<span class="ansi-fg-2"> still</span>'
    assert stream.feed("\x1b[0m plain") == " plain"


def test_entries_get_html() -> None:
    entry = with_html({"type": "assistant", "text": "**hi**"})
    assert entry["html"] == "<p><strong>hi</strong></p>\n"
    result = with_html({"type": "tool_result", "text": "a < b"})
    assert result["html"] == html.escape("a < b", quote=False)
    assert "html" not in with_html({"type": "user", "text": "**x**"})


def test_stylesheets() -> None:
    css = pygments_css()
    assert ".md pre code .k" in css and "prefers-color-scheme: dark" in css
    assert ".ansi-fg-255 {" in ansi_css()
