"""Command output end to end: plain text for the model from both backends, cut on a line
boundary, kept whole on disk (`_session/output`), kept when the user stops the command;
and a cancelled turn marked in the transcript. The real sidecar, real commands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode


async def session(sidecar: Sidecar, cwd: Path, **meta: Any) -> str:
    return str((await sidecar.new_session(cwd, approval="auto", **meta))["sessionId"])


def tool_results(page: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in page["messages"] if m["type"] == "tool_result"]


@pytest.mark.parametrize("backend", ["pipe", "pty"])
async def test_the_model_gets_plain_text_from_either_backend(
    sidecar: Sidecar, workspace: Path, backend: str
):
    sid = await session(sidecar, workspace, backend=backend)
    await sidecar.prompt(sid, r"$ printf '\033[1;31mred\033[0m \033]0;title\007plain\a\n'")
    (result,) = tool_results(await sidecar.messages(sid))
    assert result["text"] == "Exited with status 0.\nred plain\n"
    # The live stream is the command's own bytes (a client renders the colours).
    streamed = "".join(
        u.get("_meta", {}).get("output", "") for u in sidecar.updates(sid, "tool_call_update")
    )
    assert "\x1b[1;31m" in streamed


async def test_long_output_is_cut_at_a_line_end_and_kept_whole(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir, "--tool-output-cap", "1000")
    try:
        sid = await session(sidecar, workspace)
        await sidecar.prompt(sid, "$ seq 1 20000")
        (result,) = tool_results(await sidecar.messages(sid))
        body = result["text"].split("\n", 1)[1]
        kept, note = body.rsplit("\n[", 1)
        assert kept.splitlines() == [str(n) for n in range(1, len(kept.splitlines()) + 1)]
        assert len(kept) <= 1000
        everything = "".join(f"{n}\n" for n in range(1, 20001))
        assert f"{len(everything)} bytes in all, kept whole for the user" in note

        call_id = result["toolCallId"]
        text, offset = "", 0
        while True:
            page = await sidecar.call(
                "_session/output",
                {"sessionId": sid, "toolCallId": call_id, "offset": offset, "limit": 7000},
            )
            text += page["text"]
            offset = page["next"]
            if offset >= page["total"]:
                break
        assert text == everything

        with pytest.raises(RpcError) as unknown:
            await sidecar.call("_session/output", {"sessionId": sid, "toolCallId": "call_nope"})
        assert unknown.value.code == ErrorCode.INVALID_PARAMS
        await sidecar.call("session/close", {"sessionId": sid})
        await sidecar.call("session/delete", {"sessionId": sid})
        assert not (data_dir / "output" / sid).exists()
    finally:
        await sidecar.close()


async def test_pages_of_output_never_split_a_character(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir, "--tool-output-cap", "100")
    try:
        sid = await session(sidecar, workspace)
        await sidecar.prompt(sid, "$ for i in $(seq 1 300); do printf 'é€😀'; done; echo")
        call_id = tool_results(await sidecar.messages(sid))[0]["toolCallId"]
        text, offset = "", 0
        while offset < 300 * 9 + 1:
            page = await sidecar.call(
                "_session/output",
                {"sessionId": sid, "toolCallId": call_id, "offset": offset, "limit": 1000},
            )
            assert "\ufffd" not in page["text"]
            text += page["text"]
            offset = page["next"]
        assert text == "é€😀" * 300 + "\n"
    finally:
        await sidecar.close()


async def test_stopping_keeps_what_was_printed_and_marks_the_turn(
    sidecar: Sidecar, workspace: Path
):
    sid = await session(sidecar, workspace)
    running = sidecar.prompt_task(sid, "$ echo starting; sleep 60")

    def printed(method: str, params: dict[str, Any]) -> bool:
        update = params.get("update", {})
        return "starting" in str(update.get("_meta", {}).get("output", ""))

    await sidecar.wait_for(printed)
    await sidecar.call("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(running, 20))["stopReason"] == "cancelled"
    page = await sidecar.messages(sid)
    (result,) = tool_results(page)
    assert result["text"] == "Cancelled: the command was stopped.\nstarting\n"
    assert result["ok"] is False
    markers = [m for m in page["messages"] if m["type"] == "marker"]
    assert [(m["kind"], m["text"]) for m in markers] == [
        ("cancelled", "[turn cancelled by the user]")
    ]
    # The next turn goes on as usual.
    await sidecar.prompt(sid, "hello")
    assert (await sidecar.status(sid))["status"] == "idle"


async def test_a_hosted_provider_without_a_key_says_so_before_any_request(
    data_dir: Path, workspace: Path
):
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    sidecar = await Sidecar.start(data_dir, "--provider", "openai", env=env)
    try:
        result = await sidecar.call("initialize", {"protocolVersion": 1})
        assert "OPENAI_API_KEY" in result["_meta"]["providerProblem"]
        sid = (await sidecar.new_session(workspace))["sessionId"]
        with pytest.raises(RpcError) as refused:
            await sidecar.prompt(sid, "hi")
        assert refused.value.code == ErrorCode.PROVIDER_ERROR
        assert "no API key for api.openai.com: set OPENAI_API_KEY" in str(refused.value)
    finally:
        await sidecar.close()


async def test_transcript_pages_by_turn_never_split_a_call_from_its_result(
    sidecar: Sidecar, workspace: Path
):
    sid = await session(sidecar, workspace)
    for n in range(1, 6):
        await sidecar.prompt(sid, f"$ echo turn{n}")
    seen: list[dict[str, Any]] = []
    turn: int | None = 1
    while turn is not None:
        page = await sidecar.call("_session/messages", {"sessionId": sid, "turn": turn, "turns": 2})
        assert page["turns"] == 5 and page["messages"][0]["type"] == "user"
        calls = {c["toolCallId"] for m in page["messages"] for c in m.get("toolCalls", [])}
        results = {m["toolCallId"] for m in tool_results(page)}
        assert calls == results  # every call on the page has its result on the page
        seen += page["messages"]
        turn = page["nextTurn"]
    assert [m["turn"] for m in seen if m["type"] == "user"] == [1, 2, 3, 4, 5]
    everything = await sidecar.messages(sid, limit=1000)
    assert seen == everything["messages"]
    with pytest.raises(RpcError) as beyond:
        await sidecar.call("_session/messages", {"sessionId": sid, "turn": 9})
    assert beyond.value.code == ErrorCode.INVALID_PARAMS
