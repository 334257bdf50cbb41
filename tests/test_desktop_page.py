"""The window's page as one document (desktop/page.py): every file inlined, and the
Content-Security-Policy naming exactly those files by their hash."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest

from desktop import page as ui_page

UI = Path(ui_page.__file__).resolve().parent / "ui"


def _policy(html: str) -> dict[str, list[str]]:
    found = re.search(r'http-equiv="Content-Security-Policy"\s+content="([^"]*)"', html)
    assert found is not None
    return {d.split()[0]: d.split()[1:] for d in found.group(1).split(";") if d.strip()}


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_every_file_is_inlined_and_only_those_may_run() -> None:
    html = ui_page.page()
    index = (UI / "index.html").read_text()
    named = re.findall(r'<script src="([^"]+)"', index)
    sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', index)
    assert named and sheets
    assert "<script src=" not in html and 'rel="stylesheet"' not in html
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert scripts == [(UI / n).read_text() for n in named]  # in order, whole
    assert styles == [(UI / n).read_text() for n in sheets]
    policy = _policy(html)
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == [_hash(s) for s in scripts] + ["'unsafe-eval'"]
    assert policy["style-src"] == [_hash(s) for s in styles]
    assert policy["img-src"] == ["data:"]  # stored images are data: URLs; nothing is fetched


def test_a_file_that_would_end_its_element_early_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "index.html").write_text(
        '<meta http-equiv="Content-Security-Policy" content="x"><script src="a.js"></script>'
    )
    (tmp_path / "a.js").write_text("const s = '</SCRIPT><img src=x onerror=alert(1)>';")
    monkeypatch.setattr(ui_page, "UI", tmp_path)
    ui_page.page.cache_clear()
    try:
        with pytest.raises(ValueError, match="a.js holds '</script'"):
            ui_page.page()
    finally:
        ui_page.page.cache_clear()
