"""A prompt's content blocks, end to end: the real sidecar over its pipes. An external
agent gets them as the client sent them (links, images and resources, where it said at
`initialize` that it takes them), queued or not; content an engine cannot give its
model is refused before the turn starts, naming `prompt`, and nothing is recorded."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from harness import Sidecar

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="
IMAGE = {"type": "image", "mimeType": "image/png", "data": PIXEL}
LINK = {"type": "resource_link", "name": "notes.md", "uri": "file:///work/notes.md"}


def prompt(sid: str, *blocks: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": sid, "prompt": list(blocks)}
    if meta:
        params["_meta"] = meta
    return params


def prompts_received(setup: AgentSetup, name: str) -> list[list[dict[str, Any]]]:
    return [
        entry["params"]["prompt"]
        for entry in setup.received(name)
        if entry.get("method") == "session/prompt"
    ]


async def test_an_external_agent_gets_the_blocks_as_sent(tmp_path: Path) -> None:
    setup = AgentSetup(tmp_path / "agents").add("seeing", caps="load,resume,close,image")
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args())
    try:
        sid = (await sidecar.new_session(tmp_path, agent="seeing"))["sessionId"]
        text = {"type": "text", "text": "say looked"}
        await sidecar.call("session/prompt", prompt(sid, text, LINK, IMAGE))
        await sidecar.call("_session/queue", prompt(sid, {"type": "text", "text": "say q"}, LINK))
        await sidecar.wait_state(sid, "idle")
        received = prompts_received(setup, "seeing")
        assert received[0] == [text, LINK, IMAGE]
        # A queued message keeps its blocks until its turn.
        for _ in range(400):
            received = prompts_received(setup, "seeing")
            if len(received) == 2:
                break
            await asyncio.sleep(0.05)
        assert received[1] == [{"type": "text", "text": "say q"}, LINK]
        # The transcript shows the text (and the link as a reference line).
        page = (await sidecar.messages(sid))["messages"]
        assert page[0]["text"].startswith(
            "say looked\n[resource: notes.md <file:///work/notes.md>]"
        )
    finally:
        await sidecar.close()


async def test_content_an_engine_cannot_take_is_refused_before_the_turn(tmp_path: Path) -> None:
    setup = AgentSetup(tmp_path / "agents").add("blind")  # no image, no embedded context
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args())
    try:
        external = (await sidecar.new_session(tmp_path, agent="blind"))["sessionId"]
        builtin = (await sidecar.new_session(tmp_path))["sessionId"]
        resource = {
            "type": "resource",
            "resource": {"uri": "file:///work/a.txt", "text": "inline", "mimeType": "text/plain"},
        }
        cases = [
            (external, IMAGE, "takes no images"),
            (external, resource, "takes no embedded resources"),
            (builtin, IMAGE, "no image"),
        ]
        for sid, block, reason in cases:
            with pytest.raises(RpcError) as caught:
                await sidecar.call(
                    "session/prompt", prompt(sid, {"type": "text", "text": "x"}, block)
                )
            assert caught.value.code == -32602, reason
            assert "prompt" in str(caught.value) and reason in str(caught.value)
            status = await sidecar.status(sid)
            assert status["status"] == "idle" and status["turns"] == 0  # nothing recorded
            assert (await sidecar.messages(sid))["messages"] == []
        assert prompts_received(setup, "blind") == []
        # The builtin engine reads an embedded text resource as text.
        answer = await sidecar.call(
            "session/prompt", prompt(builtin, {"type": "text", "text": "see"}, resource)
        )
        assert answer["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


def link(path: Path, name: str | None = None) -> dict[str, Any]:
    return {"type": "resource_link", "name": name or path.name, "uri": path.as_uri()}


async def test_a_mentioned_small_text_file_reaches_an_embedding_agent_embedded(
    tmp_path: Path,
) -> None:
    """An agent that takes embedded context gets a mentioned small text file inside the
    session's directory as an embedded `resource` with its text, read by the sidecar
    under the same rules as the builtin agent's mentions; every other link as it was."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "notes.md").write_text("the-notes-text-77\n")
    (work / "big.txt").write_text("x" * (65 * 1024))
    (work / "blob.bin").write_bytes(b"\x00\x01binary")
    (work / "pipe").mkdir()
    os.mkfifo(work / "pipe" / "fifo")
    (tmp_path / "outside.txt").write_text("secret-outside-text\n")
    (work / "escape.txt").symlink_to(tmp_path / "outside.txt")
    setup = AgentSetup(tmp_path / "agents").add("embedding", caps="load,resume,close,embedded")
    setup.add("plain")  # takes no embedded context: links stay links
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args())
    try:
        sid = (await sidecar.new_session(work, agent="embedding"))["sessionId"]
        notes = link(work / "src" / "notes.md", "src/notes.md")
        others = [
            link(work / "big.txt"),
            link(work / "blob.bin"),
            link(work / "pipe" / "fifo"),
            link(tmp_path / "outside.txt"),
            link(work / "escape.txt"),
            link(work / "gone.txt"),
            {"type": "resource_link", "name": "web", "uri": "https://example.com/a.md"},
        ]
        text = {"type": "text", "text": "say read them"}
        await sidecar.call("session/prompt", prompt(sid, text, notes, *others))
        (received,) = prompts_received(setup, "embedding")
        embedded = {
            "type": "resource",
            "resource": {"uri": notes["uri"], "text": "the-notes-text-77\n"},
        }
        assert received == [text, embedded, *others]
        # The transcript keeps the link's reference line, not the file.
        (entry,) = [m for m in (await sidecar.messages(sid))["messages"] if m["type"] == "user"]
        assert (
            "the-notes-text-77" not in entry["text"] and "[resource: src/notes.md" in entry["text"]
        )
        # Queued: read when its turn comes.
        first = sidecar.prompt_task(sid, "sleep 1\nsay first")
        await sidecar.wait_state(sid, "running")
        await sidecar.call("_session/queue", prompt(sid, {"type": "text", "text": "say q"}, notes))
        (work / "src" / "notes.md").write_text("changed-before-its-turn\n")
        await first
        for _ in range(400):
            if len(prompts_received(setup, "embedding")) == 3:
                break
            await asyncio.sleep(0.05)
        queued = prompts_received(setup, "embedding")[2]
        assert queued[1]["resource"]["text"] == "changed-before-its-turn\n"
        # An agent that takes no embedded context gets the link itself.
        other = (await sidecar.new_session(work, agent="plain"))["sessionId"]
        await sidecar.call("session/prompt", prompt(other, text, notes))
        assert prompts_received(setup, "plain") == [[text, notes]]
    finally:
        await sidecar.close()
