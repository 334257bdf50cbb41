"""The composer's calls refuse a bad argument themselves, naming it, before anything reaches
the sidecar (desktop/bridge_compose.py; the calls that pass are exercised against the real
sidecar by tests/test_desktop_compose.py), and build the requests the protocol names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from desktop.bridge_compose import ComposeCalls, ComposeInput, attached, prompt_content
from protocol.methods import Method


class Recording(ComposeCalls):
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        return {"files": [], "truncated": False}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", "a", 10), "sessionId"),
        (("s", "a\nb", 10), "query"),
        (("s", 5, 10), "query"),
        (("s", "a", 0), "limit"),
        (("s", "a", 501), "limit"),
        (("s", "a", True), "limit"),
    ],
)
def test_files_refuses_a_bad_argument_naming_it(args: tuple[Any, ...], field: str) -> None:
    calls = Recording()
    answer = calls.files(*args)
    assert answer["error"]["code"] == "invalid_input" and field in answer["error"]["message"]
    assert calls.sent == []


def test_files_and_image_ask_the_sidecar() -> None:
    calls = Recording()
    calls.files("s", "ntf", 30)
    calls.image("s", "abc")
    assert calls.sent == [
        (Method.FILES, {"sessionId": "s", "query": "ntf", "limit": 30}),
        (Method.IMAGE, {"sessionId": "s", "id": "abc"}),
    ]
    assert "id" in calls.image("s", "")["error"]["message"]


def test_attachments_pass_links_and_images_and_name_what_is_wrong() -> None:
    link = {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"}
    image = {"type": "image", "mimeType": "image/png", "data": "iVBO"}
    assert attached([link, image]) == [link, image]
    assert attached(None) == []
    bad = [
        ([{"type": "text", "text": "x"}], "attachments[0].type"),
        ([{**link, "uri": "http://x"}], "attachments[0].uri"),
        ([link, {**image, "mimeType": "image/svg+xml"}], "attachments[1].mimeType"),
        ([{**image, "data": ""}], "attachments[0].data"),
        ([{**image, "extra": 1}], "attachments[0]"),
        ("nope", "attachments"),
    ]
    for value, field in bad:
        with pytest.raises(ComposeInput, match=field.replace("[", r"\[").replace("]", r"\]")):
            attached(value)


def test_an_embedded_text_resource_passes_bounded() -> None:
    resource = {"type": "resource", "resource": {"uri": "file:///w/a.md", "text": "hi"}}
    (passed,) = attached([resource])
    assert passed == {
        "type": "resource",
        "resource": {"uri": "file:///w/a.md", "text": "hi", "mimeType": "text/plain"},
    }
    inner = resource["resource"]
    bad = [
        ({**resource, "extra": 1}, "attachments[0] (resource)"),
        ({"type": "resource", "resource": {"uri": "file:///a"}}, "attachments[0].resource"),
        ({"type": "resource", "resource": {**inner, "blob": "AA=="}}, "attachments[0].resource"),
        ({"type": "resource", "resource": {**inner, "uri": ""}}, "attachments[0].resource.uri"),
        (
            {"type": "resource", "resource": {**inner, "text": "x" * 1_000_001}},
            "attachments[0].resource.text",
        ),
        ({"type": "resource", "resource": {**inner, "mimeType": 3}}, "mimeType"),
    ]
    for block, field in bad:
        with pytest.raises(ComposeInput, match=re.escape(field)):
            attached([block])


def test_a_prompt_may_be_only_an_image_but_not_nothing() -> None:
    image = {"type": "image", "mimeType": "image/png", "data": "iVBO"}
    assert prompt_content("  ", [image], 100) == [image]  # no empty text block
    assert prompt_content("hi", [image], 100) == [{"type": "text", "text": "hi"}, image]
    link = {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"}
    for text, blocks in [("", []), ("   ", [link]), ("x" * 101, [])]:
        with pytest.raises(ComposeInput, match="^prompt"):
            prompt_content(text, blocks, 100)
