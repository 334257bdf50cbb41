"""Consent and containment through the real sidecar: approval settings, permission
requests over ACP (answered, refused, cancelled, malformed, never), rules, HTTP answers,
and the bubblewrap sandbox enforcing what the modes promise."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from acp import spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    Implementation,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from harness import Sidecar, eventually

from desktop.client import RpcError
from protocol.errors import ErrorCode

REPO = Path(__file__).resolve().parent.parent


def choose(option: str) -> Any:
    return lambda params: {"outcome": {"outcome": "selected", "optionId": option}}


def results(messages: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in messages["messages"] if m["type"] == "tool_result"]


async def settle(sidecar: Sidecar, sid: str) -> None:
    assert await eventually(lambda: True)
    for _ in range(100):
        if (await sidecar.status(sid))["status"] != "running":
            return
        await asyncio.sleep(0.05)


# ---- settings ------------------------------------------------------------------------


async def test_settings_at_new_as_config_options_kept_by_resume_and_fork(
    sidecar: Sidecar, workspace: Path
) -> None:
    result = await sidecar.call(
        "session/new",
        {
            "cwd": str(workspace),
            "mcpServers": [],
            "_meta": {"approval": "auto", "sandbox": "read-only"},
        },
    )
    sid, summary = result["sessionId"], result["_meta"]
    assert (summary["approval"], summary["sandbox"], summary["effectiveSandbox"]) == (
        "auto",
        "read-only",
        "read-only",
    )
    options = {o["id"]: o for o in result["configOptions"]}
    assert set(options) >= {"mode", "model", "approval", "sandbox"}
    assert options["approval"]["currentValue"] == "auto"
    assert {o["value"] for o in options["sandbox"]["options"]} == {"read-only", "workspace", "off"}

    changed = await sidecar.call(
        "session/set_config_option", {"sessionId": sid, "configId": "approval", "value": "deny"}
    )
    assert {o["id"]: o["currentValue"] for o in changed["configOptions"]}["approval"] == "deny"
    with pytest.raises(RpcError) as bad_value:
        await sidecar.call(
            "session/set_config_option", {"sessionId": sid, "configId": "sandbox", "value": "x"}
        )
    assert bad_value.value.code == ErrorCode.INVALID_PARAMS
    assert bad_value.value.data["field"] == "value"
    with pytest.raises(RpcError) as bad_id:
        await sidecar.call(
            "session/set_config_option", {"sessionId": sid, "configId": "colour", "value": "x"}
        )
    assert bad_id.value.data["field"] == "configId"

    await sidecar.call("session/close", {"sessionId": sid})
    resumed = await sidecar.call(
        "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    )
    assert (resumed["_meta"]["approval"], resumed["_meta"]["sandbox"]) == ("deny", "read-only")
    forked = await sidecar.call(
        "session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    )
    assert (forked["_meta"]["approval"], forked["_meta"]["sandbox"]) == ("deny", "read-only")


async def test_plan_mode_runs_commands_read_only_whatever_is_set(
    sidecar: Sidecar, workspace: Path
) -> None:
    (workspace / "app.py").write_text("original\n")
    summary = await sidecar.new_session(workspace, mode="plan", sandbox="off")
    assert summary["effectiveSandbox"] == "read-only"
    sid = summary["sessionId"]
    result = await sidecar.prompt(sid, "$ echo changed >> app.py")
    assert (workspace / "app.py").read_text() == "original\n"
    assert "status 0" not in result["_meta"]["response"]
    assert sidecar.asked == [], "a read-only command cannot change anything: nobody is asked"


# ---- the sandbox, enforced by bubblewrap -----------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


async def test_workspace_writes_only_inside_the_cwd(
    sidecar: Sidecar, workspace: Path, outside: Path
) -> None:
    sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
    (workspace / "link").symlink_to(outside)
    await sidecar.prompt(sid, "$ echo in > inside.txt")
    assert (workspace / "inside.txt").read_text() == "in\n"
    for attempt in (
        f"echo out > {outside}/direct.txt",
        "echo out > link/through-link.txt",
        "echo out > ../outside/dotdot.txt",
        f"touch {Path.home()}/sandbox-escape-{os.getpid()}",
    ):
        result = await sidecar.prompt(sid, f"$ {attempt}")
        assert "status 0" not in result["_meta"]["response"], attempt
    assert list(outside.iterdir()) == []
    assert not (Path.home() / f"sandbox-escape-{os.getpid()}").exists()


async def test_read_only_writes_nowhere_and_has_no_network(
    sidecar: Sidecar, workspace: Path
) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    try:
        read_only = (await sidecar.new_session(workspace, approval="auto", sandbox="read-only"))[
            "sessionId"
        ]
        workspace_sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
        probe = (
            f"$ python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
        )
        blocked = await sidecar.prompt(read_only, probe)
        assert "status 0" not in blocked["_meta"]["response"]
        reached = await sidecar.prompt(workspace_sid, probe)
        assert "status 0" in reached["_meta"]["response"], reached
        written = await sidecar.prompt(read_only, "$ touch inside.txt")
        assert "status 0" not in written["_meta"]["response"]
        assert not (workspace / "inside.txt").exists()
    finally:
        server.close()


async def test_off_writes_as_the_user(sidecar: Sidecar, workspace: Path, outside: Path) -> None:
    sid = (await sidecar.new_session(workspace, approval="auto", sandbox="off"))["sessionId"]
    await sidecar.prompt(sid, f"$ echo out > {outside}/allowed.txt")
    assert (outside / "allowed.txt").read_text() == "out\n"


async def test_bubblewrap_missing_means_nothing_runs_and_everyone_is_told(
    data_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    for tool in ("bash", "sh", "python3", "env"):
        found = next(
            (Path(d) / tool for d in os.environ["PATH"].split(":") if (Path(d) / tool).exists()),
            None,
        )
        if found is not None:
            (empty / tool).symlink_to(found)
    env = {"PATH": f"{empty}"}
    sidecar = await Sidecar.start(data_dir, env=env)
    try:
        summary = await sidecar.new_session(workspace, approval="auto")
        assert "bwrap" in (summary["sandboxProblem"] or "")
        result = await sidecar.prompt(summary["sessionId"], "$ touch ran.txt")
        assert not (workspace / "ran.txt").exists()
        (tool,) = results(await sidecar.messages(summary["sessionId"]))
        assert "NOT run" in tool["text"] and "bubblewrap" in tool["text"]
        assert result["stopReason"] == "end_turn"
    finally:
        await sidecar.close()


# ---- permission requests ------------------------------------------------------------


async def test_a_command_asks_first_with_what_will_run(sidecar: Sidecar, workspace: Path) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    result = await sidecar.prompt(sid, "$ echo hello > made.txt")
    assert (workspace / "made.txt").read_text() == "hello\n"
    assert result["stopReason"] == "end_turn"
    (asked,) = sidecar.asked
    call = asked["toolCall"]
    assert asked["sessionId"] == sid
    assert (call["kind"], call["status"], call["title"]) == (
        "execute",
        "pending",
        "echo hello > made.txt",
    )
    assert call["rawInput"] == {"command": "echo hello > made.txt"}
    assert str(workspace) in call["content"][0]["content"]["text"]
    assert "workspace" in call["content"][0]["content"]["text"]
    kinds = [(o["optionId"], o["kind"]) for o in asked["options"]]
    assert kinds == [
        ("allow_once", "allow_once"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
        ("reject_always", "reject_always"),
    ]
    started = sidecar.updates(sid, "tool_call")
    assert started and started[-1]["toolCallId"] == call["toolCallId"]


async def test_every_permission_request_says_where_it_acts_in_acp_shape(
    sidecar: Sidecar, workspace: Path
) -> None:
    """`toolCall.locations`: a command's cwd; a write's file (line 1); an edit's file at its
    first changed line. Every request validates against the ACP SDK's own schema."""
    from acp.schema import RequestPermissionRequest

    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    sid = (await sidecar.new_session(workspace))["sessionId"]
    await sidecar.prompt(sid, "$ true")
    await sidecar.prompt(sid, "/write todo.md buy milk")
    await sidecar.prompt(sid, "/edit notes.txt three THREE")
    assert [asked["toolCall"]["locations"] for asked in sidecar.asked] == [
        [{"path": str(workspace)}],
        [{"path": str(workspace / "todo.md"), "line": 1}],
        [{"path": str(workspace / "notes.txt"), "line": 3}],
    ]
    for asked in sidecar.asked:
        parsed = RequestPermissionRequest.model_validate(asked)
        assert parsed.tool_call.locations and parsed.tool_call.locations[0].path.startswith("/")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (choose("reject_once"), "refused"),
        (choose("made_up_option"), "refused"),
        (lambda params: {"outcome": "yes please"}, "refused"),
        (lambda params: (_ for _ in ()).throw(RuntimeError("the client broke")), "refused"),
    ],
    ids=["reject", "unknown-option", "malformed", "error-response"],
)
async def test_refused_or_unreadable_answers_run_nothing_and_the_turn_goes_on(
    sidecar: Sidecar, workspace: Path, answer: Any, why: str
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    sidecar.answer_permission = answer
    result = await sidecar.prompt(sid, "$ touch refused.txt")
    assert result["stopReason"] == "end_turn"
    assert not (workspace / "refused.txt").exists()
    (tool,) = results(await sidecar.messages(sid))
    assert tool["text"].startswith("Not run:") and why in tool["text"], tool
    assert (await sidecar.status(sid))["status"] == "idle"
    sidecar.answer_permission = choose("allow_once")
    assert "status 0" in (await sidecar.prompt(sid, "$ true"))["_meta"]["response"]


async def test_cancelled_answer_ends_the_turn_cancelled(sidecar: Sidecar, workspace: Path) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    sidecar.answer_permission = lambda params: {"outcome": {"outcome": "cancelled"}}
    result = await sidecar.prompt(sid, "$ touch never.txt")
    assert result["stopReason"] == "cancelled"
    assert not (workspace / "never.txt").exists()
    (tool,) = results(await sidecar.messages(sid))
    assert tool["text"].startswith("Not run") and tool["exitCode"] is None


async def test_a_client_that_never_answers_keeps_the_turn_waiting_visibly(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    forever: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    sidecar.answer_permission = lambda params: forever
    turn = sidecar.prompt_task(sid, "$ touch waiting.txt")
    assert await eventually(lambda: bool(sidecar.asked))
    await asyncio.sleep(0.5)
    status = await sidecar.status(sid)
    waiting = status["awaitingPermission"]
    assert status["status"] == "running" and waiting is not None
    assert waiting["title"] == "touch waiting.txt" and waiting["since"]
    state = await sidecar.wait_for(
        lambda m, p: (
            m == "_session/state"
            and p.get("sessionId") == sid
            and (p.get("awaitingPermission") or {}).get("title") == "touch waiting.txt"
        )
    )
    assert state["status"] == "running"
    await sidecar.call("session/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 10)
    assert result["stopReason"] == "cancelled"
    assert not (workspace / "waiting.txt").exists()
    after = await sidecar.status(sid)
    assert after["awaitingPermission"] is None and after["status"] == "idle"
    (tool,) = results(await sidecar.messages(sid))
    assert "cancelled while waiting" in tool["text"]
    forever.set_result({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    await asyncio.sleep(0.3)
    assert not (workspace / "waiting.txt").exists(), "a late answer changed nothing"


async def test_close_while_waiting_answers_the_prompt_and_a_late_approval_does_nothing(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    late: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    sidecar.answer_permission = lambda params: late
    turn = sidecar.prompt_task(sid, "$ touch late.txt")
    assert await eventually(lambda: bool(sidecar.asked))
    closed = await sidecar.call("session/close", {"sessionId": sid})
    assert closed["_meta"]["status"] == "closed"
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "cancelled"
    late.set_result({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    await asyncio.sleep(0.3)
    assert not (workspace / "late.txt").exists()
    assert (await sidecar.status(sid))["status"] == "closed"


# ---- rules ----------------------------------------------------------------------------


async def test_always_answers_become_rules_that_hold(sidecar: Sidecar, workspace: Path) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    sidecar.answer_permission = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "allow_always"},
        "_meta": {"rule": {"match": "prefix", "value": "echo"}},
    }
    await sidecar.prompt(sid, "$ echo one")
    sidecar.answer_permission = choose("reject_always")
    await sidecar.prompt(sid, "$ rm -f nothing")
    asked = len(sidecar.asked)
    assert "status 0" in (await sidecar.prompt(sid, "$ echo two"))["_meta"]["response"]
    refused = await sidecar.prompt(sid, "$ rm -f nothing")
    assert "not run" in refused["_meta"]["response"].lower()
    assert len(sidecar.asked) == asked, "rules decided; nobody was asked again"
    # A prefix never allows a chained command.
    sidecar.answer_permission = choose("reject_once")
    await sidecar.prompt(sid, "$ echo three; touch chained.txt")
    assert len(sidecar.asked) == asked + 1 and not (workspace / "chained.txt").exists()

    rules = (await sidecar.call("_session/permissions", {"sessionId": sid}))["rules"]
    assert rules == [
        {"decision": "allow", "tool": "bash", "match": "prefix", "value": "echo"},
        {"decision": "deny", "tool": "bash", "match": "exact", "value": "rm -f nothing"},
    ]
    # Durable: kept by a resume and copied by a fork.
    await sidecar.call("session/close", {"sessionId": sid})
    await sidecar.call(
        "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    )
    assert (await sidecar.call("_session/permissions", {"sessionId": sid}))["rules"] == rules
    fork = await sidecar.call(
        "session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    )
    assert (await sidecar.call("_session/permissions", {"sessionId": fork["sessionId"]}))[
        "rules"
    ] == rules


async def test_deny_wins_and_rules_are_validated(sidecar: Sidecar, workspace: Path) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    rules = [
        {"decision": "allow", "tool": "bash", "match": "prefix", "value": "touch"},
        {"decision": "deny", "tool": "bash", "match": "exact", "value": "touch denied.txt"},
    ]
    await sidecar.call("_session/permissions/set", {"sessionId": sid, "rules": rules})
    await sidecar.prompt(sid, "$ touch denied.txt")
    await sidecar.prompt(sid, "$ touch allowed.txt")
    assert sidecar.asked == []
    assert (workspace / "allowed.txt").exists() and not (workspace / "denied.txt").exists()
    for bad, field in [
        ("not a list", "rules"),
        (
            [{"decision": "maybe", "tool": "bash", "match": "exact", "value": "x"}],
            "rules.0.decision",
        ),
        ([{"decision": "allow", "tool": "bash", "match": "regex", "value": "x"}], "rules.0.match"),
        ([rules[0], {"decision": "allow", "tool": "bash", "match": "exact"}], "rules.1.value"),
        ([{**rules[0], "extra": 1}], "rules.0"),
    ]:
        with pytest.raises(RpcError) as refused:
            await sidecar.call("_session/permissions/set", {"sessionId": sid, "rules": bad})
        assert refused.value.code == ErrorCode.INVALID_PARAMS
        assert refused.value.data["field"] == field
    assert (await sidecar.call("_session/permissions", {"sessionId": sid}))["rules"] == rules


# ---- every way in is governed the same ---------------------------------------------------


async def test_http_turns_ask_the_stdio_client_and_http_can_answer_first(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    url, token = await sidecar.endpoint(sid)
    headers = {"Authorization": f"Bearer {token}"}
    stdio_answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    sidecar.answer_permission = lambda params: stdio_answer
    async with aiohttp.ClientSession() as http:
        send = asyncio.ensure_future(
            http.post(
                f"{url}/agent/send", json={"message": "$ touch via-http.txt"}, headers=headers
            )
        )
        assert await eventually(lambda: bool(sidecar.asked)), "the stdio client was asked"
        async with http.get(f"{url}/agent/permissions", headers=headers) as resp:
            pending = (await resp.json())["pending"]
        (waiting,) = pending
        assert waiting["title"] == "touch via-http.txt" and "allow_once" in waiting["options"]
        body = {"toolCallId": waiting["toolCallId"], "optionId": "allow_once"}
        async with http.post(f"{url}/agent/permissions", json=body, headers=headers) as resp:
            assert resp.status == 200
        async with http.post(f"{url}/agent/permissions", json=body, headers=headers) as resp:
            assert resp.status in (404, 409), "a second answer is refused"
        async with http.post(
            f"{url}/agent/permissions", json={**body, "optionId": "perhaps"}, headers=headers
        ) as resp:
            assert resp.status in (400, 404)
        async with http.post(
            f"{url}/agent/permissions",
            json={"toolCallId": "nope", "optionId": "allow_once"},
            headers=headers,
        ) as resp:
            assert resp.status == 404
        response = await asyncio.wait_for(send, 10)
        assert response.status == 200
        assert (await response.json())["stopReason"] == "end_turn"
    assert (workspace / "via-http.txt").exists()
    stdio_answer.set_result({"outcome": {"outcome": "selected", "optionId": "reject_once"}})


async def test_a_crash_while_waiting_leaves_a_well_formed_transcript(
    data_dir: Path, workspace: Path
) -> None:
    first = await Sidecar.start(data_dir)
    sid = (await first.new_session(workspace))["sessionId"]
    first.answer_permission = lambda params: asyncio.get_running_loop().create_future()
    first.prompt_task(sid, "$ touch crash.txt")
    assert await eventually(lambda: bool(first.asked))
    first.sigkill()
    await first.wait_exit()
    second = await Sidecar.start(data_dir)
    try:
        status = await second.status(sid)
        assert status["status"] == "closed" and status["interrupted"] is True
        await second.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        entries = (await second.messages(sid))["messages"]
        kinds = [e["type"] for e in entries]
        assert kinds == ["user", "assistant", "marker"], kinds  # the call was never run
        assert entries[-1]["kind"] == "interrupted"
        assert "Echo: after" in (await second.prompt(sid, "after"))["_meta"]["response"]
        assert not (workspace / "crash.txt").exists()
    finally:
        await second.close()


# ---- a client someone else wrote ----------------------------------------------------


class RejectingClient:
    """The official SDK's client, with a "deny all permissions" switch on."""

    def __init__(self) -> None:
        self.asked: list[ToolCallUpdate] = []

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.asked.append(tool_call)
        reject = next(o for o in options if o.kind == "reject_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=reject.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        return None


async def test_an_acp_sdk_client_that_rejects_everything_gets_no_file_written(
    tmp_path: Path, workspace: Path
) -> None:
    client = RejectingClient()
    async with spawn_agent_process(
        client,
        sys.executable,
        "-m",
        "sidecar",
        "--data-dir",
        str(tmp_path / "data"),
        cwd=REPO,
        transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
    ) as (conn, process):
        await conn.initialize(protocol_version=1, client_info=Implementation(name="t", version="0"))
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        reply = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id, prompt=[text_block("$ echo pwned > created.txt")]
            ),
            20,
        )
        assert reply.stop_reason == "end_turn"
    await asyncio.wait_for(process.wait(), 10)
    assert len(client.asked) == 1 and client.asked[0].kind == "execute"
    assert not (workspace / "created.txt").exists()
    assert json.dumps([]) == "[]"
