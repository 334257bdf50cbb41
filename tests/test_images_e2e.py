"""Images sent with a prompt, end to end: the real sidecar as a child over its pipes,
the real OpenAI and Anthropic SDKs against loopback servers speaking their APIs (which
record what the model received), real files in the data dir. An image is checked by its
content, kept once in the data dir, referred to from the transcript, and given to the
model in the provider's own shape on this turn and the next ones; what is not an image
(or too large, or an SVG) is refused before the turn, and nothing is recorded."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar, eventually
from PIL import Image
from raw_client import RawClient, frame, key

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)


def png(width: int = 4, height: int = 3, colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format="PNG")
    return out.getvalue()


def image_block(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}


def prompt(sid: str, text: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}, *blocks]}


async def start(data: Path, provider: str, fake: FakeServerProcess) -> Sidecar:
    key = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    return await Sidecar.start(
        data,
        "--provider",
        provider,
        "--model",
        "test-model",
        "--base-url",
        fake.base_url,
        env={key: "test"},
    )


@pytest.fixture(params=["openai", "anthropic"])
async def served(request: Any, tmp_path: Path) -> AsyncIterator[tuple[str, FakeServerProcess]]:
    provider = request.param
    script, base = (
        ("fake_chat_server.py", "/v1") if provider == "openai" else ("fake_anthropic_server.py", "")
    )
    server = await FakeServerProcess.start(script, tmp_path / "fake.port", base_path=base)
    try:
        yield provider, server
    finally:
        await server.stop()


def images_received(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(mime type, base64) of every image in the last user message the model got."""
    last = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    if provider == "openai":
        found = []
        for part in content:
            if part.get("type") == "image_url":
                head, _, data = part["image_url"]["url"].partition(";base64,")
                found.append((head.removeprefix("data:"), data))
        return found
    return [
        (part["source"]["media_type"], part["source"]["data"])
        for part in content
        if part.get("type") == "image"
    ]


async def test_an_image_reaches_the_model_and_stays_in_the_transcript(
    tmp_path: Path, served: tuple[str, FakeServerProcess]
) -> None:
    provider, fake = served
    sidecar = await start(tmp_path / "data", provider, fake)
    try:
        init = await sidecar.call("initialize", {"protocolVersion": 1})
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is True
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        picture = png()
        # The client says JPEG; the content says PNG: the content wins.
        await fake.script({"type": "text", "text": "A red picture."})
        answer = await sidecar.call(
            "session/prompt", prompt(sid, "what is this?", image_block(picture, "image/jpeg"))
        )
        assert answer["stopReason"] == "end_turn"
        (request,) = await fake.requests()
        assert images_received(provider, request["body"]) == [
            ("image/png", base64.b64encode(picture).decode())
        ]
        # Kept once, by digest, in the data dir; the transcript refers to it.
        page = (await sidecar.messages(sid))["messages"]
        (ref,) = page[0]["images"]
        assert ref["mimeType"] == "image/png" and (ref["width"], ref["height"]) == (4, 3)
        stored = tmp_path / "data" / "images" / ref["id"]
        assert stored.read_bytes() == picture and stored.stat().st_mode & 0o077 == 0
        # A client fetches it to show it.
        shown = await sidecar.call("_session/image", {"sessionId": sid, "id": ref["id"]})
        assert shown["mimeType"] == "image/png" and base64.b64decode(shown["data"]) == picture
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/image", {"sessionId": sid, "id": "0" * 64})
        assert caught.value.code == -32602 and "id" in str(caught.value)
        # Exported with its bytes; imported into another data dir, it is there again.
        exported = await sidecar.call("_session/export", {"sessionId": sid, "format": "jsonl"})
        assert base64.b64encode(picture).decode() in exported["content"]
        other = await start(tmp_path / "other-data", provider, fake)
        try:
            imported = await other.call(
                "_session/import", {"content": exported["content"], "cwd": str(tmp_path)}
            )
            new_id = imported["sessionId"]
            again = await other.call("_session/image", {"sessionId": new_id, "id": ref["id"]})
            assert base64.b64decode(again["data"]) == picture
            row = (await other.messages(new_id))["messages"][0]
            assert row["images"] == [ref] and "imageData" not in row
            # An export whose image bytes are not the ones its row names is refused whole.
            forged = exported["content"].replace(
                base64.b64encode(picture).decode(), base64.b64encode(png(2, 2)).decode()
            )
            with pytest.raises(RpcError) as caught:
                await other.call("_session/import", {"content": forged, "cwd": str(tmp_path)})
            assert caught.value.code == -32602 and "not its id" in str(caught.value)
        finally:
            await other.close()
        # The next turn's context still shows the model the image, in the earlier message.
        await fake.script({"type": "text", "text": "Still red."})
        await sidecar.prompt(sid, "and now?")
        second = (await fake.requests())[-1]["body"]
        users = [m for m in second["messages"] if m["role"] == "user"]
        assert isinstance(users[0]["content"], list) and len(users) == 2
        # After a restart (a new runtime) it is read back from the data dir.
        await sidecar.call("session/close", {"sessionId": sid})
        await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        await fake.script({"type": "text", "text": "Red."})
        await sidecar.prompt(sid, "once more")
        third = (await fake.requests())[-1]["body"]
        first_user = [m for m in third["messages"] if m["role"] == "user"][0]
        assert base64.b64encode(picture).decode() in str(first_user["content"])
    finally:
        await sidecar.close()


async def test_what_is_not_an_image_is_refused_before_the_turn(
    tmp_path: Path, served: tuple[str, FakeServerProcess]
) -> None:
    provider, fake = served
    sidecar = await start(tmp_path / "data", provider, fake)
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
        big = png(4000, 3000, "white")  # compresses well: a huge one is made by padding
        huge = big + b"\0" * (6 * 1024 * 1024)
        cases = [
            (image_block(b"not an image at all"), "not a PNG"),
            (image_block(svg, "image/svg+xml"), "not a PNG"),
            ({"type": "image", "mimeType": "image/png", "data": "%%%not base64"}, "base64"),
            (image_block(huge), "at most"),
        ]
        for block, reason in cases:
            with pytest.raises(RpcError) as caught:
                await sidecar.call("session/prompt", prompt(sid, "look", block))
            assert caught.value.code == -32602 and "prompt" in str(caught.value)
            assert reason in str(caught.value), str(caught.value)
        status = await sidecar.status(sid)
        assert status["status"] == "idle" and status["turns"] == 0
        assert (await sidecar.messages(sid))["messages"] == []
        assert await fake.requests() == []
        assert not any((tmp_path / "data" / "images").glob("*"))
    finally:
        await sidecar.close()


async def test_the_offline_model_takes_no_images(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        init = await sidecar.call("initialize", {"protocolVersion": 1})
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is False
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        with pytest.raises(RpcError) as caught:
            await sidecar.call("session/prompt", prompt(sid, "look", image_block(png())))
        assert caught.value.code == -32602 and "no images" in str(caught.value)
        assert (await sidecar.status(sid))["turns"] == 0
    finally:
        await sidecar.close()


async def test_a_50_mb_image_is_refused_at_the_frame_and_the_sidecar_goes_on(
    tmp_path: Path,
) -> None:
    """50 MB of image is ~67 MB of base64: over the 64 MiB a message may be. The frame is
    discarded and nothing else is disturbed; the request is answered by its id when the
    line's start shows it (ACP's SDKs and our client write `id` before `params`), else
    with the null id of what cannot be read. The window refuses anything over 5 MiB
    before sending (docs/desktop.md)."""
    client = await RawClient.start(tmp_path / "data")
    try:
        sid = (await client.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
            "sessionId"
        ]
        huge = base64.b64encode(b"\x89PNG" + b"\0" * (50 * 1024 * 1024)).decode()
        params = prompt(sid, "look", {"type": "image", "mimeType": "image/png", "data": huge})
        # The id after the bulk: it cannot be read from the start.
        request_id = client.new_id()
        await client.write(frame("session/prompt", params, request_id))
        refused = await client.reply(None)
        assert refused["error"]["code"] == -32600 and "larger than" in refused["error"]["message"]
        # The id first: answered by it.
        request_id = client.new_id()
        first = {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
        await client.write(json.dumps(first).encode() + b"\n")
        refused = await client.reply(request_id)
        assert refused["error"]["code"] == -32600 and "larger than" in refused["error"]["message"]
        # A string id too; a response of the client (no method) is never answered by its id.
        named = {"jsonrpc": "2.0", "id": "big-1", "method": "session/prompt", "params": params}
        await client.write(json.dumps(named).encode() + b"\n")
        assert (await client.reply("big-1"))["error"]["code"] == -32600
        response = {"jsonrpc": "2.0", "id": "big-2", "result": {"data": huge}}
        await client.write(json.dumps(response).encode() + b"\n")
        assert await eventually(lambda: len(client.replies.get(key(None), [])) == 2)
        assert key("big-2") not in client.replies
        status = await client.call("_session/status", {"sessionId": sid})
        assert status["status"] == "idle" and status["turns"] == 0
        answer = await client.call("session/prompt", prompt(sid, "still here?"))
        assert answer["stopReason"] == "end_turn"
    finally:
        await client.close()
    # Our own client (the window's and the TUI's) gets its request answered, not left hanging.
    sidecar = await Sidecar.start(tmp_path / "data2")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        params = prompt(sid, "look", {"type": "image", "mimeType": "image/png", "data": huge})
        with pytest.raises(RpcError) as caught:
            await sidecar.call("session/prompt", params)
        assert caught.value.code == -32600 and "larger than" in str(caught.value)
        assert (await sidecar.prompt(sid, "still here?"))["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


async def test_a_prompt_of_only_an_image_goes_and_an_empty_one_is_refused(
    tmp_path: Path, served: tuple[str, FakeServerProcess]
) -> None:
    """A screenshot pasted and sent with Enter: no text beside it. The model gets the
    image (and no empty text part); the transcript's user entry shows it."""
    provider, fake = served
    sidecar = await start(tmp_path / "data", provider, fake)
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        picture = png(2, 2, "blue")
        await fake.script({"type": "text", "text": "A blue square."})
        answer = await sidecar.call(
            "session/prompt", {"sessionId": sid, "prompt": [image_block(picture)]}
        )
        assert answer["stopReason"] == "end_turn"
        (request,) = await fake.requests()
        assert images_received(provider, request["body"]) == [
            ("image/png", base64.b64encode(picture).decode())
        ]
        last = [m for m in request["body"]["messages"] if m["role"] == "user"][-1]
        assert [p["type"] for p in last["content"]] == [
            "image_url" if provider == "openai" else "image"
        ]
        (entry,) = [m for m in (await sidecar.messages(sid))["messages"] if m["type"] == "user"]
        assert entry["text"] == "" and len(entry["images"]) == 1
        # Queued, too (here at once: the session is idle).
        await fake.script({"type": "text", "text": "Again."})
        await sidecar.call("_session/queue", {"sessionId": sid, "prompt": [image_block(picture)]})
        await fake.wait_requests(2)
        # Nothing in it at all is still refused, however it comes.
        for blocks in ([{"type": "text", "text": "  \n"}], []):
            for method in ("session/prompt", "_session/queue"):
                with pytest.raises(RpcError) as caught:
                    await sidecar.call(method, {"sessionId": sid, "prompt": blocks})
                assert caught.value.code == -32602 and "prompt" in str(caught.value)
    finally:
        await sidecar.close()
