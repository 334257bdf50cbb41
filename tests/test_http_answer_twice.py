"""A second answer to a permission request over HTTP is 409, not 404 (issue 21, finding 8).

The real sidecar, a real per-session listener, a real aiohttp client: the first answer
wins (over HTTP or from the stdio client); every later answer to the same call is 409
"already answered", also once the turn has gone on and the request is no longer
pending; a call id the session never asked about stays 404.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
from harness import Sidecar, eventually


async def post_answer(
    http: aiohttp.ClientSession, url: str, token: str, call_id: str, option: str = "allow_once"
) -> tuple[int, Any]:
    async with http.post(
        f"{url}/agent/permissions",
        json={"toolCallId": call_id, "optionId": option},
        headers={"Authorization": f"Bearer {token}"},
    ) as response:
        return response.status, await response.json()


async def test_a_second_http_answer_is_409_even_after_the_turn_went_on(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    url, token = await sidecar.endpoint(sid)
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def silent(params: dict[str, Any]) -> Any:
        return await never  # the stdio client never answers

    sidecar.answer_permission = silent
    turn = asyncio.ensure_future(sidecar.prompt(sid, "$ touch first.txt"))
    assert await eventually(lambda: bool(sidecar.asked)), "the sidecar asked for consent"
    call_id = sidecar.asked[0]["toolCall"]["toolCallId"]
    async with aiohttp.ClientSession() as http:
        assert (await post_answer(http, url, token, call_id))[0] == 200
        assert (await asyncio.wait_for(turn, 15))["stopReason"] == "end_turn"
        assert (workspace / "first.txt").exists()
        # The request is no longer pending: still "already answered", never "not found".
        status, body = await post_answer(http, url, token, call_id, "reject_once")
        assert status == 409, body
        assert call_id in body["error"] and "already answered" in body["error"], body
        status, body = await post_answer(http, url, token, "call_that_never_was")
        assert status == 404, body
    never.cancel()


async def test_an_http_answer_after_the_stdio_client_answered_is_409(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    url, token = await sidecar.endpoint(sid)
    result = await sidecar.prompt(sid, "$ touch second.txt")  # answered "allow once" on stdio
    assert result["stopReason"] == "end_turn" and (workspace / "second.txt").exists()
    (asked,) = sidecar.asked
    async with aiohttp.ClientSession() as http:
        status, body = await post_answer(http, url, token, asked["toolCall"]["toolCallId"])
    assert status == 409 and "already answered" in body["error"], body
