"""AnthropicProvider against a real loopback fake Messages API server (no SDK mocking).

The fake checks every request against the API's rules (roles alternate from "user",
tool_use answered by tool_result in the next message, system only at the top level,
tools in the Messages shape) and answers 400 otherwise, so these tests exercise the
provider's conversion against those rules, not just against its own expectations.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from anthropic import AsyncAnthropic, BadRequestError

from sidecar.agent.providers.anthropic_provider import (
    PLACEHOLDER_API_KEY,
    AnthropicProvider,
    to_anthropic_messages,
)
from sidecar.agent.providers.base import ToolCall
from sidecar.domain.errors import ProviderError

try:
    from tests.fake_anthropic_server import FakeAnthropicServer, RecordedRequest
except ImportError:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from fake_anthropic_server import FakeAnthropicServer, RecordedRequest

FAKE_SERVER = Path(__file__).with_name("fake_anthropic_server.py")
USER = [{"role": "user", "content": "hi"}]
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


@pytest.fixture
async def server() -> AsyncIterator[FakeAnthropicServer]:
    async with FakeAnthropicServer() as s:
        yield s


@pytest.fixture
async def provider(server: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider("test-model", base_url=server.base_url, api_key="sk-test", max_retries=0)
    yield p
    await p.aclose()


class Collect:
    def __init__(self) -> None:
        self.deltas: list[str] = []

    def __call__(self, delta: str) -> None:
        self.deltas.append(delta)


async def wait_for_requests(server: FakeAnthropicServer, n: int = 1) -> None:
    deadline = time.monotonic() + 5
    while len(server.requests) < n:
        assert time.monotonic() < deadline, "the server never saw the request"
        await asyncio.sleep(0.01)


def sent_key(rec: RecordedRequest) -> str | None:
    """The API key as sent: `x-api-key`, or (this SDK's choice) an Authorization bearer."""
    if "x-api-key" in rec.headers:
        return str(rec.headers["x-api-key"])
    auth = rec.headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# -- streaming and replies ------------------------------------------------------------------


async def test_streamed_text_arrives_in_order(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script({"type": "text", "chunks": ["Hel", "lo", ", wor", "ld", "!"]})
    on_text = Collect()
    reply = await provider.complete(USER, [], on_text)
    assert on_text.deltas == ["Hel", "lo", ", wor", "ld", "!"]
    assert reply.text == "Hello, world!"
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"
    assert server.requests[0].completed and server.requests[0].rejected is None


async def test_text_split_by_server_is_reassembled(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    server.script({"type": "text", "text": text})
    on_text = Collect()
    reply = await provider.complete(USER, [], on_text)
    assert len(on_text.deltas) > 1
    assert "".join(on_text.deltas) == reply.text == text


async def test_empty_queue_echoes_last_user_message(provider: AnthropicProvider) -> None:
    reply = await provider.complete(USER, [], Collect())
    assert reply.text == "echo: hi"


async def test_tool_use_is_assembled(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    args = {"command": "ls -la src", "note": "a longer value, split in many JSON fragments"}
    server.script(
        {
            "type": "tool_use",
            "text": "Let me look.",
            "id": "toolu_abc",
            "name": "bash",
            "input": args,
        }
    )
    on_text = Collect()
    reply = await provider.complete(USER, [BASH_TOOL], on_text)
    assert reply.text == "Let me look." == "".join(on_text.deltas)
    assert reply.finish_reason == "tool_calls"
    (tool_call,) = reply.tool_calls
    assert (tool_call.id, tool_call.name) == ("toolu_abc", "bash")
    assert json.loads(tool_call.arguments) == args


async def test_parallel_tool_uses_keep_their_order(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    calls = [
        {"id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
        {"id": "toolu_2", "name": "bash", "input": '{"command": "pwd"}'},
    ]
    server.script({"type": "tool_use", "calls": calls})
    reply = await provider.complete(USER, [BASH_TOOL], Collect())
    assert reply.text == ""
    assert reply.tool_calls == [
        ToolCall("toolu_1", "bash", json.dumps({"command": "ls"})),
        ToolCall("toolu_2", "bash", '{"command": "pwd"}'),
    ]


async def test_tool_use_without_input_has_empty_object_arguments(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script({"type": "tool_use", "id": "toolu_1", "name": "now", "input": ""})
    reply = await provider.complete(USER, [], Collect())
    assert reply.tool_calls == [ToolCall("toolu_1", "now", "{}")]


async def test_tool_input_sent_whole_in_block_start_is_used(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    """Some compatible servers put the whole input in content_block_start, no deltas."""
    args = {"command": "echo whole"}
    server.script(
        {"type": "tool_use", "id": "toolu_w", "name": "bash", "input": args, "input_in_start": True}
    )
    reply = await provider.complete(USER, [BASH_TOOL], Collect())
    (tool_call,) = reply.tool_calls
    assert json.loads(tool_call.arguments) == args


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
async def test_stop_reason_maps_to_finish_reason(
    server: FakeAnthropicServer, provider: AnthropicProvider, stop_reason: str, finish_reason: str
) -> None:
    server.script({"type": "text", "text": "cut", "stop_reason": stop_reason})
    assert (await provider.complete(USER, [], Collect())).finish_reason == finish_reason


# -- the request ------------------------------------------------------------------------------


async def test_tools_are_converted_and_sent(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    no_description = {"type": "function", "function": {"name": "now", "parameters": {}}}
    await provider.complete(USER, [BASH_TOOL, no_description], Collect())
    assert server.requests[0].body["tools"] == [
        {
            "name": "bash",
            "description": "Run a shell command",
            "input_schema": BASH_TOOL["function"]["parameters"],  # type: ignore[index]
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]


async def test_tools_are_omitted_when_empty(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.complete(USER, [], Collect())
    assert "tools" not in server.requests[0].body
    assert "system" not in server.requests[0].body


async def test_request_envelope_and_key(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    await provider.complete(USER, [], Collect())
    rec = server.requests[0]
    assert rec.body == {
        "model": "test-model",
        "max_tokens": 4096,
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert sent_key(rec) == "sk-test"
    assert rec.headers.get("anthropic-version")


async def test_max_tokens_is_configurable(server: FakeAnthropicServer) -> None:
    provider = AnthropicProvider("m", base_url=server.base_url, max_tokens=123)
    try:
        await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert server.requests[0].body["max_tokens"] == 123


async def test_multi_turn_context_with_tools_is_converted(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    """The exact body for a context with every shape the agent loop produces."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "list and count"},
        {
            "role": "assistant",
            "content": "Two commands.",
            "tool_calls": [
                call("toolu_1", "bash", '{"command": "ls"}'),
                call("toolu_2", "bash", '{"command": "wc -l a.py"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "name": "bash", "content": "a.py\nb.py"},
        {"role": "tool", "tool_call_id": "toolu_2", "name": "bash", "content": "3 a.py"},
        {
            "role": "assistant",
            "content": "",  # the loop records "" when the model only called tools
            "tool_calls": [call("toolu_3", "bash", '{"command": "cat a.py"}')],
        },
        {"role": "tool", "tool_call_id": "toolu_3", "name": "bash", "content": "print(1)"},
        {"role": "assistant", "content": "Done: two files."},
        {"role": "user", "content": "thanks"},
    ]
    await provider.complete(messages, [BASH_TOOL], Collect())
    rec = server.requests[0]
    assert rec.rejected is None and rec.completed
    body = rec.body
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list and count"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Two commands."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "bash",
                    "input": {"command": "wc -l a.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\nb.py"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "3 a.py"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_3",
                    "name": "bash",
                    "input": {"command": "cat a.py"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "print(1)"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done: two files."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]


async def test_irregular_history_is_made_to_alternate(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    """What cancelled and empty turns leave behind still makes a request the API accepts."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Part one."},
        {"role": "user", "content": "first (its turn was cancelled)"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": ""},  # an empty reply: dropped
        {"role": "user", "content": "third"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("toolu_9", "bash", '{"command": "sleep 100"}')],
        },
        {
            "role": "tool",
            "tool_call_id": "toolu_9",
            "content": "Cancelled: the command was stopped.",
        },
        {"role": "user", "content": "fourth, after cancelling the command"},
        {"role": "system", "content": "Part two."},
    ]
    await provider.complete(messages, [], Collect())
    rec = server.requests[0]
    assert rec.rejected is None and rec.completed
    assert rec.body["system"] == "Part one.\n\nPart two."
    assert rec.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first (its turn was cancelled)"},
                {"type": "text", "text": "second"},
                {"type": "text", "text": "third"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_9",
                    "name": "bash",
                    "input": {"command": "sleep 100"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_9",
                    "content": "Cancelled: the command was stopped.",
                },
                {"type": "text", "text": "fourth, after cancelling the command"},
            ],
        },
    ]


def test_malformed_tool_arguments_are_kept_not_lost() -> None:
    _, converted = to_anthropic_messages(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("t1", "bash", '{"command": "ls"'),
                    call("t2", "bash", "[1, 2]"),
                    call("t3", "now", ""),
                ],
            },
        ]
    )
    inputs = [b["input"] for b in converted[1]["content"]]
    assert inputs == [{"_raw_arguments": '{"command": "ls"'}, {"_raw_arguments": "[1, 2]"}, {}]


def test_unknown_role_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="role 'robot'"):
        to_anthropic_messages([{"role": "robot", "content": "beep"}])


# -- the fake enforces the API's rules ---------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "extra", "expected"),
    [
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], {}, "alternate"),
        ([{"role": "assistant", "content": "a"}], {}, 'first message must use the "user" role'),
        (
            [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}],
            {},
            "top-level `system` parameter",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
                },
                {"role": "user", "content": "no result"},
            ],
            {},
            "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
        ),
        (
            [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t7"}]},
            ],
            {},
            "unexpected `tool_use_id` found in `tool_result` blocks: t7",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], {}, "must be non-empty"),
        (
            [{"role": "user", "content": "a"}],
            {"tools": [BASH_TOOL]},
            "tools.0.custom.function: Extra inputs are not permitted",
        ),
        (
            [{"role": "tool", "tool_call_id": "t1", "content": "x"}],
            {},
            "Input should be 'user' or 'assistant'",
        ),
    ],
)
async def test_fake_server_rejects_what_the_api_rejects(
    server: FakeAnthropicServer,
    messages: list[dict[str, Any]],
    extra: dict[str, Any],
    expected: str,
) -> None:
    client = AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        with pytest.raises(BadRequestError) as info:
            await client.messages.create(
                model="m",
                max_tokens=10,
                messages=cast(Any, messages),
                **extra,
            )
    finally:
        await client.close()
    assert expected in str(info.value)
    (rec,) = server.requests
    assert rec.rejected is not None and expected in rec.rejected


async def test_a_rejected_request_is_a_provider_error_and_keeps_the_script(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    """An orphan tool result (a corrupted history) reaches the API, which refuses it."""
    server.script({"type": "text", "text": "still queued"})
    orphan = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "toolu_gone", "content": "x"},
    ]
    with pytest.raises(ProviderError) as info:
        await provider.complete(orphan, [], Collect())
    assert "HTTP 400" in str(info.value)
    assert "invalid_request_error" in str(info.value)
    assert "toolu_gone" in str(info.value)
    assert (await provider.complete(USER, [], Collect())).text == "still queued"


# -- errors -----------------------------------------------------------------------------------


async def test_http_400_becomes_provider_error(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    message = "model: test-model is not a valid model"
    server.script({"type": "error", "status": 400, "message": message})
    with pytest.raises(ProviderError) as info:
        await provider.complete(USER, [], Collect())
    text = str(info.value)
    assert "HTTP 400" in text and message in text and "invalid_request_error" in text
    assert "'test-model'" in text and f"{server.base_url}/v1/messages" in text
    assert "request id req_" in text
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "message"),
    [(529, "overloaded_error", "Overloaded"), (500, "api_error", "Internal server error")],
)
async def test_server_errors_become_provider_errors_without_retry(
    server: FakeAnthropicServer,
    provider: AnthropicProvider,
    status: int,
    error_type: str,
    message: str,
) -> None:
    server.script({"type": "error", "status": status, "message": message})
    with pytest.raises(ProviderError) as info:
        await provider.complete(USER, [], Collect())
    assert f"HTTP {status}: {error_type}: {message}" in str(info.value)
    assert len(server.requests) == 1  # max_retries=0: no retry


async def test_sdk_retries_an_overloaded_server(server: FakeAnthropicServer) -> None:
    provider = AnthropicProvider("m", base_url=server.base_url, max_retries=1)
    try:
        server.script(
            {"type": "error", "status": 529, "message": "Overloaded"},
            {"type": "text", "text": "ok"},
        )
        reply = await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert reply.text == "ok"
    assert len(server.requests) == 2


async def test_connection_refused_becomes_provider_error() -> None:
    async with FakeAnthropicServer() as server:
        base_url = server.base_url
    provider = AnthropicProvider("m", base_url=base_url, max_retries=0)
    try:
        with pytest.raises(ProviderError) as info:
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert "connection failed" in str(info.value)
    assert "ConnectionRefusedError" in str(info.value)
    assert base_url in str(info.value)


async def test_base_url_with_v1_gets_a_hint(server: FakeAnthropicServer) -> None:
    provider = AnthropicProvider("m", base_url=f"{server.base_url}/v1", max_retries=0)
    try:
        with pytest.raises(ProviderError) as info:
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert "HTTP 404" in str(info.value) and "without /v1" in str(info.value)


async def test_server_dying_mid_stream_becomes_provider_error() -> None:
    server = await FakeAnthropicServer().start()
    provider = AnthropicProvider("m", base_url=server.base_url, max_retries=0)
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


async def test_error_event_mid_stream_becomes_provider_error(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script({"type": "stream_error", "text": "partial answer", "message": "Overloaded"})
    on_text = Collect()
    with pytest.raises(ProviderError) as info:
        await provider.complete(USER, [], on_text)
    assert "mid-stream" in str(info.value)
    assert "overloaded_error: Overloaded" in str(info.value)
    assert "".join(on_text.deltas) == "partial answer"


async def test_stream_cut_before_message_stop_becomes_provider_error(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script({"type": "text", "text": "half of it", "truncate": True})
    with pytest.raises(ProviderError, match="before message_stop"):
        await provider.complete(USER, [], Collect())


async def test_timeout_becomes_provider_error(server: FakeAnthropicServer) -> None:
    provider = AnthropicProvider("m", base_url=server.base_url, timeout=0.3, max_retries=0)
    server.script({"type": "text", "text": "too late", "delay": 5})
    try:
        with pytest.raises(ProviderError, match="timed out after 0.3s"):
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()


async def test_stalled_stream_becomes_provider_error(server: FakeAnthropicServer) -> None:
    # The headers and the first chunk must arrive inside the timeout (else it is the
    # request's timeout, not the stream's): a second is room enough on a loaded machine.
    provider = AnthropicProvider("m", base_url=server.base_url, timeout=1.0, max_retries=0)
    server.script({"type": "text", "text": "one two", "chunk_delay": 6})
    try:
        with pytest.raises(ProviderError, match="stream timed out: no data for 1s"):
            await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()


async def test_malformed_stream_becomes_provider_error(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script({"type": "malformed"})
    with pytest.raises(ProviderError, match="malformed"):
        await provider.complete(USER, [], Collect())


async def test_on_text_errors_are_not_disguised(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    def boom(delta: str) -> None:
        raise ValueError("callback bug")

    server.script({"type": "text", "text": "some words here"})
    with pytest.raises(ValueError, match="callback bug"):
        await provider.complete(USER, [], boom)


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_during_slow_answer_abandons_request(
    server: FakeAnthropicServer, provider: AnthropicProvider
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
    server: FakeAnthropicServer, provider: AnthropicProvider
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


# -- configuration ----------------------------------------------------------------------------


async def test_env_fallback_for_key_and_base_url(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    provider = AnthropicProvider("m", max_retries=0)
    try:
        assert provider.base_url.startswith(server.base_url)
        assert (await provider.complete(USER, [], Collect())).text == "echo: hi"
    finally:
        await provider.aclose()
    assert sent_key(server.requests[0]) == "sk-from-env"


async def test_placeholder_key_without_any(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    provider = AnthropicProvider("m", base_url=server.base_url, max_retries=0)
    try:
        assert (await provider.complete(USER, [], Collect())).text == "echo: hi"
    finally:
        await provider.aclose()
    assert sent_key(server.requests[0]) == PLACEHOLDER_API_KEY


async def test_empty_base_url_env_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")
    provider = AnthropicProvider("m")
    try:
        assert provider.endpoint == "https://api.anthropic.com/v1/messages"
    finally:
        await provider.aclose()


async def test_explicit_arguments_win_over_env(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/unused")
    provider = AnthropicProvider("m", base_url=server.base_url, api_key="sk-arg", max_retries=0)
    try:
        await provider.complete(USER, [], Collect())
    finally:
        await provider.aclose()
    assert sent_key(server.requests[0]) == "sk-arg"


# -- the fake itself --------------------------------------------------------------------------


async def test_fake_server_non_stream_reply_parses_with_sdk(server: FakeAnthropicServer) -> None:
    server.script({"type": "tool_use", "text": "hm", "name": "f", "input": {"x": 1}, "id": "t1"})
    client = AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        message = await client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}]
        )
    finally:
        await client.close()
    assert message.stop_reason == "tool_use"
    text, tool_use = message.content
    assert text.type == "text" and text.text == "hm"
    assert tool_use.type == "tool_use" and (tool_use.id, tool_use.name) == ("t1", "f")
    assert tool_use.input == {"x": 1}


async def test_fake_server_stream_accumulates_with_sdk_helper(server: FakeAnthropicServer) -> None:
    """The SDK's own stream accumulator agrees with the events the fake sends."""
    server.script({"type": "tool_use", "text": "Running it.", "name": "bash", "input": {"a": [1]}})
    client = AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
    try:
        async with client.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}]
        ) as stream:
            message = await stream.get_final_message()
    finally:
        await client.close()
    assert message.stop_reason == "tool_use"
    text, tool_use = message.content
    assert text.type == "text" and text.text == "Running it."
    assert tool_use.type == "tool_use" and tool_use.input == {"a": [1]}


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
        provider = AnthropicProvider("m", base_url=base, max_retries=0)
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
            async with http.post(f"{base}/_reset") as r:
                assert (await r.json()) == {"ok": True}
            async with http.get(f"{base}/_requests") as r:
                assert (await r.json()) == {"requests": []}
        assert [r["body"]["model"] for r in requests] == ["m", "m"]
        assert all(r["completed"] and not r["abandoned"] for r in requests)
        assert all(r["rejected"] is None for r in requests)
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0
