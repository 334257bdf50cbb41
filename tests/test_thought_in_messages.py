"""The model's reasoning is served with the message it preceded: `_session/messages` and
`GET /agent/messages` give the assistant entry's `thought` where the provider streamed
one, and no `thought` where it did not. Through a real `python -m sidecar --provider
openai` talking to the loopback fake Chat Completions server (`reasoning_content`
deltas, as DeepSeek and vLLM stream them); the HTTP page is checked against
protocol/openapi.json and the stdio one against the wire model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
from fake_process import FakeServerProcess
from harness import Sidecar

from protocol.models import AssistantEntry, MessagesPage

OPENAPI = Path(__file__).resolve().parent.parent / "protocol" / "openapi.json"
REASONING = "The user wants a greeting. A short one will do."


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def agent(data_dir: Path, fake: FakeServerProcess) -> AsyncIterator[Sidecar]:
    running = await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        yield running
    finally:
        await running.close()


def assistants(page: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in page["messages"] if m["type"] == "assistant"]


async def test_the_reasoning_of_a_reply_is_in_both_message_listings(
    agent: Sidecar, fake: FakeServerProcess, workspace: Path
) -> None:
    sid = (await agent.new_session(workspace))["sessionId"]
    await fake.script(
        {"type": "text", "text": "Hello there!", "reasoning": REASONING},
        {"type": "text", "text": "No thinking this time."},
    )
    await agent.prompt(sid, "say hello")
    await agent.prompt(sid, "again")
    thoughts = "".join(u["content"]["text"] for u in agent.updates(sid, "agent_thought_chunk"))
    assert thoughts == REASONING, "streamed live as thought chunks"

    over_stdio = await agent.messages(sid)
    first, second = assistants(over_stdio)
    assert (first["text"], first["thought"]) == ("Hello there!", REASONING)
    assert "thought" not in second, "no reasoning streamed: no thought key"
    parsed = MessagesPage.model_validate(over_stdio).messages[1]
    assert isinstance(parsed, AssistantEntry) and parsed.thought == REASONING

    url, token = await agent.endpoint(sid)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{url}/agent/messages", headers={"Authorization": f"Bearer {token}"}) as response,
    ):
        assert response.status == 200
        over_http = await response.json()
    assert over_http == over_stdio
    doc = json.loads(OPENAPI.read_text())
    root = {"$ref": "#/components/schemas/MessagesResponse", "components": doc["components"]}
    jsonschema.Draft202012Validator(root).validate(over_http)
