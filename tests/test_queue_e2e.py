"""The durable queue and edit-and-resend, end to end: the real sidecar over its pipes, the
offline provider (`/sleep S` holds a turn open), real SQLite files, a SIGKILL. Messages
queued while a turn runs run in order as turns end, can be edited, moved and removed
until their turn, survive a restart (paused after a crash until the user says go on),
and every client is told of each change; `_session/edit` rewinds and sends again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from harness import Sidecar

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(240)


def blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


async def queue(sidecar: Sidecar, sid: str, text: str, **extra: Any) -> Any:
    return await sidecar.call("_session/queue", {"sessionId": sid, "prompt": blocks(text), **extra})


async def listed(sidecar: Sidecar, sid: str) -> Any:
    return await sidecar.call("_session/queue/list", {"sessionId": sid})


async def user_texts(sidecar: Sidecar, sid: str) -> list[str]:
    page = await sidecar.messages(sid, 0, 1000)
    return [m["text"] for m in page["messages"] if m["type"] == "user"]


async def until_idle_and_empty(sidecar: Sidecar, sid: str) -> None:
    for _ in range(600):
        if (await listed(sidecar, sid))["queue"] == [] and (await sidecar.status(sid))[
            "status"
        ] == "idle":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the queue did not drain")


async def running(sidecar: Sidecar, sid: str) -> None:
    await sidecar.wait_state(sid, "running")


async def test_queued_messages_run_in_order_and_can_be_changed_until_their_turn(
    tmp_path: Path,
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 1.5 first")
        await running(sidecar, sid)
        a = await queue(sidecar, sid, "second")
        b = await queue(sidecar, sid, "third")
        c = await queue(sidecar, sid, "fourth")
        assert a["item"]["prompt"] == blocks("second") and a["item"]["id"].startswith("q_")
        assert [i["prompt"][0]["text"] for i in c["queue"]] == ["second", "third", "fourth"]
        await sidecar.call(
            "_session/queue/edit",
            {"sessionId": sid, "id": b["item"]["id"], "prompt": blocks("third, edited")},
        )
        await sidecar.call(
            "_session/queue/move", {"sessionId": sid, "id": c["item"]["id"], "index": 0}
        )
        await sidecar.call("_session/queue/remove", {"sessionId": sid, "id": a["item"]["id"]})
        now = await listed(sidecar, sid)
        assert [i["prompt"][0]["text"] for i in now["queue"]] == ["fourth", "third, edited"]
        assert now["paused"] is False
        await first
        await until_idle_and_empty(sidecar, sid)
        assert await user_texts(sidecar, sid) == ["/sleep 1.5 first", "fourth", "third, edited"]
        # Every change was told to the client that asked for our notifications.
        told = [p for m, p in sidecar.seen if m == "_session/queue_update"]
        assert [len(p["queue"]) for p in told][:3] == [1, 2, 3] and told[-1]["queue"] == []
        # A queued message's turn is shown to clients like any other (it was not theirs).
        echoed = [u["content"]["text"] for u in sidecar.updates(sid, "user_message_chunk")]
        assert echoed == ["fourth", "third, edited"]
        # Too late to edit one that ran; bad input names its field.
        with pytest.raises(RpcError) as caught:
            await sidecar.call(
                "_session/queue/edit",
                {"sessionId": sid, "id": b["item"]["id"], "prompt": blocks("x")},
            )
        assert caught.value.code == -32602 and "it ran, or was removed" in str(caught.value)
        for method, params, field in [
            ("_session/queue", {"prompt": []}, "prompt"),
            ("_session/queue", {"prompt": [{"type": "text"}]}, "prompt"),
            ("_session/queue", {"prompt": blocks("   ")}, "prompt"),
            ("_session/queue/move", {"id": "q_0123456789abcdef", "index": 0}, "id"),
            ("_session/queue/remove", {"id": "nope"}, "id"),
        ]:
            with pytest.raises(RpcError) as caught:
                await sidecar.call(method, {"sessionId": sid, **params})
            assert caught.value.code == -32602 and field in str(caught.value), (method, params)
    finally:
        await sidecar.close()


async def test_a_hundred_queued_messages_run_in_order(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 1 start")
        await running(sidecar, sid)
        for n in range(100):
            await queue(sidecar, sid, f"message {n}")
        await first
        await until_idle_and_empty(sidecar, sid)
        assert await user_texts(sidecar, sid) == ["/sleep 1 start"] + [
            f"message {n}" for n in range(100)
        ]
        assert (await sidecar.status(sid))["turns"] == 101
    finally:
        await sidecar.close()


async def test_cancel_pauses_the_queue_clear_empties_it_and_send_now_runs_next(
    tmp_path: Path,
) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        turn = sidecar.prompt_task(sid, "/sleep 30 long")
        await running(sidecar, sid)
        await queue(sidecar, sid, "kept")
        await sidecar.call("session/cancel", {"sessionId": sid})
        assert (await turn)["stopReason"] == "cancelled"
        await asyncio.sleep(0.3)  # a queue that went on would have started by now
        paused = await listed(sidecar, sid)
        assert paused["paused"] is True and [i["prompt"][0]["text"] for i in paused["queue"]] == [
            "kept"
        ]
        assert (await sidecar.status(sid))["status"] == "idle"
        # Go on: the paused message runs.
        await sidecar.call("_session/queue/run", {"sessionId": sid})
        await until_idle_and_empty(sidecar, sid)
        assert (await user_texts(sidecar, sid))[-1] == "kept"
        # clearQueue: cancelled and emptied.
        turn = sidecar.prompt_task(sid, "/sleep 30 long again")
        await running(sidecar, sid)
        await queue(sidecar, sid, "dropped")
        await sidecar.call("session/cancel", {"sessionId": sid, "_meta": {"clearQueue": True}})
        await turn
        assert await listed(sidecar, sid) == {"queue": [], "paused": False, "refused": None}
        # Send now: the running turn is cancelled and this one runs next, ahead of the rest.
        turn = sidecar.prompt_task(sid, "/sleep 30 third long")
        await running(sidecar, sid)
        await queue(sidecar, sid, "later")
        await queue(sidecar, sid, "urgent", now=True)
        assert (await turn)["stopReason"] == "cancelled"
        await until_idle_and_empty(sidecar, sid)
        assert (await user_texts(sidecar, sid))[-2:] == ["urgent", "later"]
        # Idle: a queued message runs at once.
        await queue(sidecar, sid, "at once")
        await until_idle_and_empty(sidecar, sid)
        assert (await user_texts(sidecar, sid))[-1] == "at once"
    finally:
        await sidecar.close()


async def test_session_prompt_with_meta_queue_waits_for_its_turn(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 1 first")
        await running(sidecar, sid)
        # Without _meta.queue: busy, as ACP clients expect.
        with pytest.raises(RpcError) as caught:
            await sidecar.prompt(sid, "refused")
        assert caught.value.code == -32042
        queued = asyncio.ensure_future(
            sidecar.call(
                "session/prompt",
                {"sessionId": sid, "prompt": blocks("second"), "_meta": {"queue": True}},
            )
        )
        await first
        answer = await queued
        assert answer["stopReason"] == "end_turn" and answer["_meta"]["turn"] == 2
        assert answer["_meta"]["response"] == "Echo: second"
    finally:
        await sidecar.close()


async def test_the_queue_survives_a_restart_and_a_crash_pauses_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sidecar = await Sidecar.start(data)
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        sidecar.prompt_task(sid, "/sleep 60 cut short")
        await running(sidecar, sid)
        await queue(sidecar, sid, "one")
        await queue(sidecar, sid, "two")
        sidecar.sigkill()
        await sidecar.wait_exit()
    finally:
        await sidecar.close()
    again = await Sidecar.start(data)
    try:
        stored = await listed(again, sid)  # readable before the session is resumed
        assert [i["prompt"][0]["text"] for i in stored["queue"]] == ["one", "two"]
        await again.call("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        await asyncio.sleep(0.3)
        after = await listed(again, sid)
        assert after["paused"] is True and len(after["queue"]) == 2  # kept, not run
        assert await user_texts(again, sid) == ["/sleep 60 cut short"]
        await again.call("_session/queue/run", {"sessionId": sid})
        await until_idle_and_empty(again, sid)
        assert await user_texts(again, sid) == ["/sleep 60 cut short", "one", "two"]
        # A clean restart with a turn running and a message waiting: stored, and it goes on
        # when the session is resumed (nothing crashed).
        again.prompt_task(sid, "/sleep 60 cut by the shutdown")
        await running(again, sid)
        await queue(again, sid, "after the restart")
    finally:
        await again.close()
    third = await Sidecar.start(data)
    try:
        waiting = await listed(third, sid)
        assert [i["prompt"][0]["text"] for i in waiting["queue"]] == ["after the restart"]
        await third.call("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        await until_idle_and_empty(third, sid)
        assert (await user_texts(third, sid))[-1] == "after the restart"
    finally:
        await third.close()


async def test_edit_rewinds_the_conversation_and_sends_again(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path, approval="auto"))["sessionId"]
        await sidecar.prompt(sid, "one")
        await sidecar.prompt(sid, "/write notes.txt from turn two")
        await sidecar.prompt(sid, "three")
        answer = await sidecar.call(
            "_session/edit", {"sessionId": sid, "turn": 2, "text": "two, edited", "scope": "both"}
        )
        assert answer["stopReason"] == "end_turn" and answer["_meta"]["turn"] == 4
        assert answer["_meta"]["response"] == "Echo: two, edited"
        assert not (tmp_path / "notes.txt").exists()  # the code went back too
        page = await sidecar.messages(sid, 0, 100)
        texts = [m["text"] for m in page["messages"]]
        # The earlier branch stays in the transcript, behind the rewind's marker.
        assert "three" in texts and "two, edited" in texts
        marker = next(t for t in texts if t.startswith("[conversation rewound"))
        assert texts.index(marker) < texts.index("two, edited")
        # The code rewind is still undone the usual way.
        await sidecar.call("_session/rewind", {"sessionId": sid, "undo": True, "scope": "code"})
        assert (tmp_path / "notes.txt").read_text() == "from turn two"
        for params, field in [
            ({"turn": 9, "text": "x"}, "turn"),
            ({"turn": 1, "text": "x", "scope": "code"}, "scope"),
        ]:
            with pytest.raises(RpcError) as caught:
                await sidecar.call("_session/edit", {"sessionId": sid, **params})
            assert caught.value.code == -32602 and field in str(caught.value)
    finally:
        await sidecar.close()


async def test_an_external_agent_runs_queued_messages_too(tmp_path: Path) -> None:
    setup = AgentSetup(tmp_path / "agents").add("scripted")
    sidecar = await Sidecar.start(tmp_path / "data", *setup.args())
    try:
        sid = (await sidecar.new_session(tmp_path, agent="scripted"))["sessionId"]
        first = sidecar.prompt_task(sid, "sleep 1\nsay first done")
        await running(sidecar, sid)
        await queue(sidecar, sid, "say from the queue")
        await first
        await until_idle_and_empty(sidecar, sid)
        page = await sidecar.messages(sid, 0, 100)
        said = [m["text"] for m in page["messages"] if m["type"] == "assistant"]
        assert said[-1].endswith("from the queue")
        # An external agent keeps its own conversation: no edit-and-resend.
        with pytest.raises(RpcError) as caught:
            await sidecar.call("_session/edit", {"sessionId": sid, "turn": 1, "text": "x"})
        assert caught.value.code == -32602 and "scope" in str(caught.value)
    finally:
        await sidecar.close()


async def test_a_waiting_prompt_is_answered_when_its_session_closes(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 30 long")
        await running(sidecar, sid)
        waiting = asyncio.ensure_future(
            sidecar.call(
                "session/prompt",
                {"sessionId": sid, "prompt": blocks("never run"), "_meta": {"queue": True}},
            )
        )
        await asyncio.sleep(0.2)
        await sidecar.call("session/close", {"sessionId": sid})
        assert (await waiting)["stopReason"] == "cancelled"  # answered, not left hanging
        assert (await first)["stopReason"] == "cancelled"
        kept = await listed(sidecar, sid)  # still stored for the next runtime
        assert [i["prompt"][0]["text"] for i in kept["queue"]] == ["never run"]
    finally:
        await sidecar.close()


async def test_a_queued_mention_is_read_when_its_turn_comes(tmp_path: Path) -> None:
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        (tmp_path / "notes.md").write_text("the-mentioned-text-42\n")
        sid = (await sidecar.new_session(tmp_path))["sessionId"]
        first = sidecar.prompt_task(sid, "/sleep 1 first")
        await running(sidecar, sid)
        link = {
            "type": "resource_link",
            "name": "notes.md",
            "uri": (tmp_path / "notes.md").as_uri(),
        }
        await sidecar.call(
            "_session/queue", {"sessionId": sid, "prompt": [*blocks("look at"), link]}
        )
        (tmp_path / "notes.md").write_text("the-text-at-its-turn-43\n")  # read then, not now
        await first
        await until_idle_and_empty(sidecar, sid)
        texts = await user_texts(sidecar, sid)
        assert "the-text-at-its-turn-43" in texts[-1] and texts[-1].startswith("look at")
    finally:
        await sidecar.close()


async def test_an_edit_racing_the_start_of_its_turn_is_applied_whole_or_refused(
    tmp_path: Path,
) -> None:
    """Edits fired back to back while the drain takes the message: each is applied before
    the turn starts or refused as too late (-32602 naming `id`), never after. The turn
    runs the text of the last edit that was applied (or the original): never a mix,
    never twice. Edits go two at a time, so one can be in flight while the turn starts."""
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        sid = (await sidecar.new_session(tmp_path))["sessionId"]

        async def edit(item_id: str, text: str) -> bool:
            try:
                await sidecar.call(
                    "_session/queue/edit", {"sessionId": sid, "id": item_id, "prompt": blocks(text)}
                )
            except RpcError as exc:
                assert exc.code == -32602 and "id" in exc.message and "it ran" in exc.message
                return False
            return True

        for round_ in range(6):
            first = sidecar.prompt_task(sid, f"/sleep 0.3 round {round_}")
            await running(sidecar, sid)
            item = (await queue(sidecar, sid, f"original {round_}"))["item"]
            applied: dict[str, int] = {}  # text -> the step (pair) it was sent in
            refused: list[str] = []
            step = 0
            while not refused:
                texts = [f"edit {round_}.{step}.{n}" for n in range(2)]
                results = await asyncio.gather(*(edit(item["id"], t) for t in texts))
                for text, ok in zip(texts, results, strict=True):
                    if ok:
                        applied[text] = step
                    else:
                        refused.append(text)
                step += 1
                assert step < 2000, "the message never left the queue"
            await first
            await until_idle_and_empty(sidecar, sid)
            users = await user_texts(sidecar, sid)
            ran = [t for t in users if t.startswith((f"original {round_}", f"edit {round_}."))]
            assert len(ran) == 1, ran  # never both, never twice
            assert ran[0] not in refused  # a refused edit never reached the turn
            if not applied:
                assert ran[0] == f"original {round_}"
            else:
                # Whole, applied, and of the last pair any edit of was applied (the two
                # of a pair are concurrent: either may have been the later).
                last = max(applied.values())
                assert applied.get(ran[0]) == last, (ran, last, refused)
    finally:
        await sidecar.close()
