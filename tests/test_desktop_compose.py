"""The composer's attachments in the real window (tests/desktop_compose.py's scenarios, run
by tests/desktop_driver.py under Xvfb against the real sidecar): the `@` popup and the
mention it sends, a pasted image and the offline provider's refusal of it."""

from __future__ import annotations

from pathlib import Path

from test_desktop_window import run_driver, window_only


@window_only
def test_at_popup_lists_the_nested_file_and_the_picked_mention_reaches_the_agent(
    tmp_path: Path,
) -> None:
    r = run_driver("mention_popup", tmp_path)
    assert r["items"][0] == "src/deep/notes_file.txt"
    assert r["popup_shown"] is True and r["expanded"] == "true"
    assert r["after_pick"] == "explain @src/deep/notes_file.txt "
    assert r["popup_after_pick"] is False and r["sent_on_pick"] is False
    assert r["after_escape"]["shown"] is False
    assert r["after_escape"]["text"].endswith("and @oth")  # Esc picks nothing
    # The offline model echoes what it got: the text, then the file the link named.
    assert "[file src/deep/notes_file.txt]" in r["transcript"]
    assert "NOTE-BODY-42" in r["transcript"]
    assert "limit" in r["bad_limit"]["error"]["message"]


@window_only
def test_a_pasted_image_is_a_chip_and_its_refusal_shows_by_the_composer(
    tmp_path: Path,
) -> None:
    r = run_driver("image_paste", tmp_path)
    assert r["thumb"] == "data:image/png;base64,"
    assert r["decoded"] is True
    assert "prompt" in r["refusal"] and "no images" in r["refusal"]
    assert r["banner"] is False
    assert r["text_kept"] == "what is in this picture?"
    assert r["chips_kept"] == 1 and r["pending_gone"] is True
    assert r["attachments_hidden"] is True
    assert "mimeType" in r["bad_block"]["error"]["message"]


@window_only
def test_a_sent_image_is_shown_and_a_dropped_one_goes_alone(tmp_path: Path) -> None:
    r = run_driver("image_stored", tmp_path)  # the fake Chat Completions server takes images
    assert "image_url" in r["model_got"] and "text" in r["model_got"]
    assert r["chips_after"] == 0 and r["composer_error"] is False
    assert r["src"] == "data:image/png;base64," and r["size"] == [2, 2]
    assert "is not a PNG, JPEG, GIF or WebP" in r["dropped_text"]["error"]
    assert r["dropped_text"]["chips"] == 0
    # Dropped, sent without text: the model got the image alone.
    assert r["dropped"] == {"model_got": ["image_url"], "chips_after": 0, "size": [3, 3]}
