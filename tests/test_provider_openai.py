"""OpenAIProvider against a real loopback fake Chat Completions server (no SDK mocking)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai import AsyncOpenAI

from sidecar.agent.providers.base import ToolCall
from sidecar.agent.providers.openai_provider import OpenAIProvider
from sidecar.domain.errors import ProviderError

try:
    from tests.fake_chat_server import FakeChatServer
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from fake_chat_server import FakeChatServer

FAKE_SERVER = Path(__file__).with_name("fake_chat_server.py")
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def server() -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer() as s:
        yield s


@pytest.fixture
async def provider(server: FakeChatServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("test-model", base_url=server.base_url, api_key="sk-test", max_retries=0)
    yield p
    await p.aclose()


class Collect:
    def __init__(self) -> None:
        self.deltas: list[str] = []

    def __call__(self, delta: str) -> None:
        self.deltas.append(delta)


async def wait_for_requests(server: FakeChatServer, n: int = 1) -> None:
    deadline = time.monotonic() + 5
    while len(server.requests) < n:
        assert time.monotonic() < deadline, "the server never saw the request"
        await asyncio.sleep(0.01)


async def test_streamed_text_arrives_in_order(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    server.script({"type": "text", "chunks": ["Hel", "lo", ", wor", "ld", "!"]})
    on_text = Collect()
    reply = await provider.complete(USER, [], on_text)
    assert on_text.deltas == ["Hel", "lo", ", wor", "ld", "!"]
    assert reply.text == "Hello, world!"
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"


async def test_text_split_by_server_is_reassembled(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.script({"type": "text", "text": text})
    on_text = Collect()
    reply = await provider.complete(USER, [], on_text)
    assert len(on_text.deltas) > 1
    assert "".join(on_text.deltas) == reply.text == text


async def test_empty_queue_echoes_last_user_message(provider: OpenAIProvider) -> None:
    reply = await provider.complete(USER, [], Collect())
    assert reply.text == "echo: hi"


async def test_tool_call_is_assembled(server: FakeChatServer, provider: OpenAIProvider) -> None:
    args = {"path": "src/main.py", "limit": 10, "note": "a longer value, split in fragments"}
    server.script(
        {
            "type": "tool_call",
            "text": "Let me look.",
            "id": "call_abc",
            "name": "read_file",
            "arguments": args,
        }
    )
    on_text = Collect()
    reply = await provider.complete(USER, [], on_text)
    assert reply.text == "Let me look."
    assert reply.finish_reason == "tool_calls"
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert (call.id, call.name) == ("call_abc", "read_file")
    assert json.loads(call.arguments) == args


async def test_parallel_tool_calls_keep_their_order(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    calls = [
        {"id": "call_1", "name": "read_file", "arguments": {"path": "a.py"}},
        {"id": "call_2", "name": "list_dir", "arguments": '{"path": "."}'},
    ]
    server.script({"type": "tool_call", "calls": calls})
    reply = await provider.complete(USER, [], Collect())
    assert reply.tool_calls == [
        ToolCall("call_1", "read_file", json.dumps({"path": "a.py"})),
        ToolCall("call_2", "list_dir", '{"path": "."}'),
    ]


async def test_tools_are_sent(server: FakeChatServer, provider: OpenAIProvider) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
    ]
    await provider.complete(USER, tools, Collect())
    assert server.requests[0].body["tools"] == tools


async def test_tools_are_omitted_when_empty(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    await provider.complete(USER, [], Collect())
    assert "tools" not in server.requests[0].body


async def test_model_and_messages_are_sent_as_given(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "read a.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
    ]
    await provider.complete(messages, [], Collect())
    body = server.requests[0].body
    assert body["model"] == "test-model"
    assert body["messages"] == messages
    assert body["stream"] is True


async def test_http_500_becomes_provider_error(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    server.script({"type": "error", "status": 500, "message": "The engine is on fire"})
    with pytest.raises(ProviderError) as info:
        await provider.complete(USER, [], Collect())
    assert "500" in str(info.value)
    assert "The engine is on fire" in str(info.value)
    assert len(server.requests) == 1  # max_retries=0: no retry


async def test_http_400_becomes_provider_error(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    message = "Invalid 'messages[0].role': unknown role 'robot'."
    server.script(
        {"type": "error", "status": 400, "message": message, "error_type": "invalid_request_error"}
    )
    with pytest.raises(ProviderError) as info:
        await provider.complete(USER, [], Collect())
    assert "400" in str(info.value)
    assert message in str(info.value)


async def test_sdk_retries_a_500(server: FakeChatServer) -> None:
    provider = OpenAIProvider("m", base_url=server.base_url, max_retries=1)
    try:
        server.script(
            {"type": "error", "status": 503, "message": "busy"}, {"type": "text", "text": "ok"}
        )
        reply = await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert reply.text == "ok"
    assert len(server.requests) == 2


async def test_connection_refused_becomes_provider_error() -> None:
    async with FakeChatServer() as server:
        base_url = server.base_url
    provider = OpenAIProvider("m", base_url=base_url, max_retries=0)
    try:
        with pytest.raises(ProviderError) as info:
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert "connection failed" in str(info.value)
    assert "ConnectionRefusedError" in str(info.value)
    assert base_url in str(info.value)


async def test_server_dying_mid_stream_becomes_provider_error() -> None:
    server = await FakeChatServer().start()
    provider = OpenAIProvider("m", base_url=server.base_url, max_retries=0)
    got_text = asyncio.Event()
    server.script({"type": "text", "text": "one two three four five", "chunk_delay": 0.3})
    task = asyncio.create_task(provider.complete(USER, [], lambda d: got_text.set()))
    try:
        await asyncio.wait_for(got_text.wait(), 5)
        await server.stop()
        with pytest.raises(ProviderError, match="connection lost mid-stream"):
            await task
    finally:
        await provider.aclose()


async def test_timeout_becomes_provider_error(server: FakeChatServer) -> None:
    provider = OpenAIProvider("m", base_url=server.base_url, timeout=0.3, max_retries=0)
    server.script({"type": "text", "text": "too late", "delay": 5})
    try:
        with pytest.raises(ProviderError, match="timed out"):
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()


async def test_malformed_stream_becomes_provider_error(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    server.script({"type": "malformed"})
    with pytest.raises(ProviderError, match="malformed"):
        await provider.complete(USER, [], Collect())


async def test_on_text_errors_are_not_disguised(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    def boom(delta: str) -> None:
        raise ValueError("callback bug")

    server.script({"type": "text", "text": "some words here"})
    with pytest.raises(ValueError, match="callback bug"):
        await provider.complete(USER, [], boom)


async def test_cancel_during_slow_answer_abandons_request(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    server.script({"type": "text", "text": "never", "delay": 30})
    task = asyncio.create_task(provider.complete(USER, [], Collect()))
    await wait_for_requests(server)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    abandoned = await server.wait_abandoned()
    assert not abandoned.completed


async def test_cancel_mid_stream_abandons_request(
    server: FakeChatServer, provider: OpenAIProvider
) -> None:
    first = asyncio.Event()
    server.script({"type": "text", "text": "one two three four five", "chunk_delay": 0.3})
    task = asyncio.create_task(provider.complete(USER, [], lambda d: first.set()))
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    abandoned = await server.wait_abandoned()
    assert not abandoned.completed


async def test_env_fallback_and_placeholder_key(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    provider = OpenAIProvider("m", max_retries=0)
    try:
        assert provider.base_url.startswith(server.base_url)
        assert (await provider.complete(USER, [], Collect())).text == "echo: hi"
    finally:
        await provider.aclose()


async def test_fake_server_non_stream_reply_parses_with_sdk(server: FakeChatServer) -> None:
    server.script({"type": "tool_call", "text": "hm", "name": "f", "arguments": {"x": 1}})
    client = AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        completion = await client.chat.completions.create(model="m", messages=[])
    finally:
        await client.close()
    message = completion.choices[0].message
    assert message.content == "hm"
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.name == "f"  # type: ignore[union-attr]
    assert completion.choices[0].finish_reason == "tool_calls"


async def test_fake_server_standalone_process(tmp_path: Path) -> None:
    """The mode the sidecar end-to-end tests use: a subprocess scripted over HTTP."""
    port_file, script = tmp_path / "port", tmp_path / "script.json"
    script.write_text(json.dumps([{"type": "text", "text": "from file"}]))
    cmd = [sys.executable, str(FAKE_SERVER), "--port-file", str(port_file), "--script", str(script)]
    proc = await asyncio.create_subprocess_exec(*cmd)
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists():
            assert proc.returncode is None and time.monotonic() < deadline, "server did not start"
            await asyncio.sleep(0.05)
        base = f"http://127.0.0.1:{int(port_file.read_text())}"
        provider = OpenAIProvider("m", base_url=f"{base}/v1", max_retries=0)
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/_script", json={"type": "text", "text": "pushed"}) as r:
                assert (await r.json()) == {"queued": 2}
            async with http.post(f"{base}/_script", json={"type": "bogus"}) as r:
                assert r.status == 400
            try:
                assert (await provider.complete(USER, [], Collect())).text == "from file"
                assert (await provider.complete(USER, [], Collect())).text == "pushed"
            finally:
                await provider.aclose()
            async with http.get(f"{base}/_requests") as r:
                requests = (await r.json())["requests"]
        assert [r["body"]["model"] for r in requests] == ["m", "m"]
        assert all(r["completed"] and not r["abandoned"] for r in requests)
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
