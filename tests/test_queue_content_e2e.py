"""What a queued message holds, end to end: the real sidecar over its pipes, the real
OpenAI SDK against a loopback server that records what the model received, real SQLite
files and a restart. A message is refused when it is queued (or edited) for whatever its
turn would refuse, in the words `session/prompt` uses: an image that is none or too big,
an image for a model that takes none. One its turn refuses all the same (the model
changed since it was queued) is kept at the head, the queue paused, every client told
why; nothing is lost, nothing stalls.
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar
from PIL import Image

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)

SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def png(colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), colour).save(out, format="PNG")
    return out.getvalue()


def image(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


async def openai_sidecar(data: Path, fake: FakeServerProcess, *extra: str) -> Sidecar:
    return await Sidecar.start(
        data,
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        fake.base_url,
        *extra,
        env={"OPENAI_API_KEY": "test"},
    )


async def queue(sidecar: Sidecar, sid: str, *blocks: dict[str, Any]) -> Any:
    return await sidecar.call("_session/queue", {"sessionId": sid, "prompt": list(blocks)})


async def listed(sidecar: Sidecar, sid: str) -> Any:
    return await sidecar.call("_session/queue/list", {"sessionId": sid})


def texts_of(queue_body: dict[str, Any]) -> list[str]:
    return [
        " ".join(b["text"] for b in item["prompt"] if b["type"] == "text")
        for item in queue_body["queue"]
    ]


async def user_texts(sidecar: Sidecar, sid: str) -> list[str]:
    page = await sidecar.messages(sid, 0, 1000)
    return [m["text"] for m in page["messages"] if m["type"] == "user"]


async def until_idle_and_empty(sidecar: Sidecar, sid: str) -> None:
    for _ in range(600):
        idle = (await sidecar.status(sid))["status"] == "idle"
        if idle and (await listed(sidecar, sid))["queue"] == []:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the queue did not drain: {await listed(sidecar, sid)}")


async def refusal(call: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await call
    assert caught.value.code == -32602 and str(caught.value).find("prompt") >= 0, caught.value
    return caught.value


async def test_a_bad_image_is_refused_when_queued_and_the_queue_goes_on(
    tmp_path: Path, fake: FakeServerProcess
) -> None:
    sidecar = await openai_sidecar(tmp_path / "data", fake)
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        await fake.script({"type": "text", "text": "slow", "delay": 2})
        first = sidecar.prompt_task(sid, "first")
        await sidecar.wait_state(sid, "running")
        huge = png() + b"\0" * (6 * 1024 * 1024)
        for block, reason in [
            (image(SVG, "image/svg+xml"), "not a PNG"),
            (image(b"not an image at all"), "not a PNG"),
            ({"type": "image", "mimeType": "image/png", "data": "%%%"}, "base64"),
            (image(huge), "at most"),
        ]:
            queued = await refusal(queue(sidecar, sid, text("bad"), block))
            assert reason in str(queued), queued
            # session/prompt says it in the same words.
            direct = await refusal(
                sidecar.call(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [text("bad"), block], "_meta": {"queue": True}},
                )
            )
            assert direct.message == queued.message
        after = await queue(sidecar, sid, text("after"))
        picture = await queue(sidecar, sid, text("picture"), image(png()))
        # An edit is checked the same way: the message stays as it was.
        await refusal(
            sidecar.call(
                "_session/queue/edit",
                {
                    "sessionId": sid,
                    "id": after["item"]["id"],
                    "prompt": [text("edited"), image(SVG, "image/svg+xml")],
                },
            )
        )
        now = await listed(sidecar, sid)
        assert texts_of(now) == ["after", "picture"] and now["paused"] is False
        assert now["refused"] is None
        await first
        await until_idle_and_empty(sidecar, sid)
        assert await user_texts(sidecar, sid) == ["first", "after", "picture"]
        stored = (await sidecar.messages(sid))["messages"]
        assert len(stored[-2]["images"]) == 1  # the good image was kept, at its turn
        kept = list((tmp_path / "data" / "images").iterdir())
        assert [p.name for p in kept] == [stored[-2]["images"][0]["id"]]
        assert picture["item"]["id"].startswith("q_")
    finally:
        await sidecar.close()


async def test_an_image_for_a_model_that_takes_none_is_refused_when_queued(
    tmp_path: Path,
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")  # the offline model reads text only
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 1 first")
        await sidecar.wait_state(sid, "running")
        blocks = [text("look"), image(png())]
        queued = await refusal(queue(sidecar, sid, *blocks))
        assert "no images" in queued.message
        after = await queue(sidecar, sid, text("after"))
        edited = await refusal(
            sidecar.call(
                "_session/queue/edit",
                {"sessionId": sid, "id": after["item"]["id"], "prompt": blocks},
            )
        )
        await first
        direct = await refusal(sidecar.call("session/prompt", {"sessionId": sid, "prompt": blocks}))
        assert queued.message == edited.message == direct.message
        await until_idle_and_empty(sidecar, sid)
        assert await user_texts(sidecar, sid) == ["/sleep 1 first", "after"]
    finally:
        await sidecar.close()


async def test_a_text_only_model_is_given_no_images(
    tmp_path: Path, fake: FakeServerProcess
) -> None:
    sidecar = await openai_sidecar(tmp_path / "data", fake, "--text-only-model", "test-*")
    try:
        init = await sidecar.call("initialize", {"protocolVersion": 1})
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is False
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        blocks = [text("look"), image(png())]
        direct = await refusal(sidecar.call("session/prompt", {"sessionId": sid, "prompt": blocks}))
        assert "'test-model' is given no images" in direct.message
        queued = await refusal(queue(sidecar, sid, *blocks))
        assert queued.message == direct.message
        assert await fake.requests() == [] and (await sidecar.status(sid))["turns"] == 0
    finally:
        await sidecar.close()
    other = await openai_sidecar(tmp_path / "data", fake, "--text-only-model", "llama*")
    try:  # a glob that names another model leaves this one its images
        init = await other.call("initialize", {"protocolVersion": 1})
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is True
    finally:
        await other.close()


async def test_a_message_its_turn_refuses_stays_at_the_head_and_pauses_the_queue(
    tmp_path: Path, fake: FakeServerProcess
) -> None:
    data = tmp_path / "data"
    sidecar = await openai_sidecar(data, fake)
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        await fake.script({"type": "text", "text": "slow", "delay": 60})
        first = sidecar.prompt_task(sid, "first")
        await sidecar.wait_state(sid, "running")
        picture = (await queue(sidecar, sid, text("picture"), image(png())))["item"]
        await queue(sidecar, sid, text("after"))
        await sidecar.call("session/cancel", {"sessionId": sid})  # paused, kept
        await first
    finally:
        await sidecar.close()
    # The same session, the model now configured as taking no images.
    again = await openai_sidecar(data, fake, "--text-only-model", "test-model")
    try:
        await again.call("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        await again.call("_session/queue/run", {"sessionId": sid})
        told = await again.wait_for(
            lambda m, p: m == "_session/queue_update" and p.get("refused") is not None
        )
        assert told["paused"] is True and told["refused"]["id"] == picture["id"]
        assert "no images" in told["refused"]["reason"]
        # Nothing lost: the message is still first, the rest waits behind it.
        now = await listed(again, sid)
        assert texts_of(now) == ["picture", "after"] and now["refused"] == told["refused"]
        status = await again.status(sid)
        assert status["status"] == "idle" and status["turns"] == 1
        await asyncio.sleep(0.3)  # a queue that went on would have started "after" by now
        assert await user_texts(again, sid) == ["first"]
        # The user takes it out and goes on.
        removed = await again.call("_session/queue/remove", {"sessionId": sid, "id": picture["id"]})
        assert removed["refused"] is None and removed["paused"] is True
        await again.call("_session/queue/run", {"sessionId": sid})
        await until_idle_and_empty(again, sid)
        assert await user_texts(again, sid) == ["first", "after"]
    finally:
        await again.close()
