"""MCP end to end: a real `python -m sidecar` connects the MCP servers an ACP client names in
`mcpServers` and offers their tools to the model; turns call them.

Everything is real: the sidecar is a child process driven over its pipes (tests/harness.py),
the servers are the SDK-built test servers (tests/mcp_servers/, over stdio, Streamable HTTP
and SSE), hand-written ones, and the published `mcp-server-time` / `mcp-server-git`; the
model is the offline provider (`/mcp SERVER TOOL {json}`) or the loopback OpenAI-compatible
fake. Every wait is bounded; nothing asserts how long something took.

Cost: an SDK-built server takes seconds to start on a busy machine, so the tests share one
sidecar and one session per group (`main`, `quick`), each test setting the session's approval
and rules it needs. Tests that use a short `--mcp-start-timeout` rely on hand-written servers
(raw_server.py, sleepy_server.py) that start in milliseconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
import pytest_asyncio
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    EnvVariable,
    Implementation,
    McpServerStdio,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
)
from fake_process import FakeServerProcess
from harness import INITIALIZE, Sidecar, allow_once, marked_processes
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from desktop.client import RpcError, SidecarClient
from protocol.errors import ErrorCode
from protocol.framing import MAX_MESSAGE_BYTES

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).parent / "mcp_servers"
MARK = "MCP_E2E_MARK"  # env var given to stdio servers through `mcpServers[].env`
SECRET_ENV = f"env-secret-{uuid.uuid4().hex}"
SECRET_TOKEN = f"header-secret-{uuid.uuid4().hex}"
AUTH = [{"name": "Authorization", "value": f"Bearer {SECRET_TOKEN}"}]
SETTLE = 75.0  # bound on servers connecting (SDK servers are slow to import under load)
GONE = 20.0  # bound on server processes disappearing
BASIC_TOOLS = 9  # echo, delete_thing, image, structured, sleep, crash, flood, fail, add_tool


# -- the sidecar, recording every line it writes ---------------------------------------------


class WireClient(SidecarClient):
    """The desktop's client, keeping every stdout and stderr line the sidecar wrote."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.stdout_lines: list[str] = []
        self.stderr_lines: list[str] = []
        super().__init__(process)

    def _dispatch(self, line: bytes) -> None:
        self.stdout_lines.append(line.decode("utf-8", "replace"))
        super()._dispatch(line)

    async def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        while line := await stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_lines.append(text)
            self.stderr_tail.append(text)


class Agent(Sidecar):
    wire: WireClient
    initialized: dict[str, Any]

    @classmethod
    async def launch(cls, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Agent:
        client = await WireClient.spawn(
            ["--data-dir", str(data_dir), "--log-level", "DEBUG", *args], env=env
        )
        agent = cls(client)
        agent.wire = client
        agent.initialized = await agent.call("initialize", INITIALIZE)
        return agent

    def log(self) -> str:
        return "\n".join(self.wire.stderr_lines[-60:])

    def leaks(self, *secrets: str) -> list[str]:
        lines = [*self.wire.stdout_lines, *self.wire.stderr_lines]
        return [line[:300] for line in lines if any(secret in line for secret in secrets)]


# -- helpers ---------------------------------------------------------------------------------


def new_mark() -> str:
    return uuid.uuid4().hex


def stdio(
    name: str, script: str, *args: str, mark: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """An ACP stdio server entry for a test server, marked so its processes can be found."""
    pairs = [
        {"name": MARK, "value": mark},
        *({"name": k, "value": v} for k, v in (env or {}).items()),
    ]
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(SERVERS / script), *args],
        "env": pairs,
    }


def by_name(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {server["name"]: server for server in summary["mcpServers"]}


def settled(
    session_id: str, generation: int | None = None
) -> Callable[[str, dict[str, Any]], bool]:
    """A `_session/state` of the session in which no server is still connecting."""

    def match(method: str, params: dict[str, Any]) -> bool:
        return (
            method == "_session/state"
            and params.get("sessionId") == session_id
            and (generation is None or params.get("generation") == generation)
            and bool(params.get("mcpServers"))
            and all(s["status"] != "connecting" for s in params["mcpServers"])
        )

    return match


async def open_session(
    agent: Agent, cwd: Path, servers: list[dict[str, Any]], **meta: Any
) -> dict[str, Any]:
    result: dict[str, Any] = await agent.call(
        "session/new", {"cwd": str(cwd), "mcpServers": servers, "_meta": meta}
    )
    return result


async def until(check: Callable[[], Any], what: str, timeout: float = GONE) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def until_status(
    agent: Agent, session_id: str, check: Callable[[dict[str, dict[str, Any]]], bool], what: str
) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE
    while True:
        summary = await agent.status(session_id)
        if check(by_name(summary)):
            return summary
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {summary['mcpServers']}")
        await asyncio.sleep(0.1)


async def wait_new(
    agent: Agent,
    since: int,
    predicate: Callable[[str, dict[str, Any]], bool],
    timeout: float = SETTLE,
) -> dict[str, Any]:
    """The first notification after the first `since` ones matching `predicate`."""
    old = {id(params) for _, params in agent.seen[:since]}
    return await agent.wait_for(lambda m, p: id(p) not in old and predicate(m, p), timeout)


def cmdlines(mark: str) -> list[str]:
    lines = []
    for pid in marked_processes(MARK, mark):
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            lines.append(raw.replace(b"\0", b" ").decode("utf-8", "replace"))
    return lines


async def no_process_left(mark: str) -> None:
    deadline = time.monotonic() + GONE
    while marked_processes(MARK, mark):
        if time.monotonic() > deadline:
            raise AssertionError(f"MCP server processes outlived their session: {cmdlines(mark)}")
        await asyncio.sleep(0.1)


@dataclass
class Turn:
    result: dict[str, Any]
    start: dict[str, Any]  # the ACP tool_call
    final: dict[str, Any]  # the last tool_call_update (with the result)
    asked: list[dict[str, Any]]  # session/request_permission params for this call

    @property
    def text(self) -> str:
        text: str = self.final["content"][0]["content"]["text"]
        return text


async def mcp_turn(agent: Agent, session_id: str, words: str) -> Turn:
    """One turn in which the offline provider calls `/mcp <words>`; its one tool call."""
    seen, asked = len(agent.seen), len(agent.asked)
    result = await agent.prompt(session_id, f"/mcp {words}")
    updates = [
        p["update"]
        for m, p in agent.seen[seen:]
        if m == "session/update" and p.get("sessionId") == session_id
    ]
    starts = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert len(starts) == 1, f"expected one tool call for /mcp {words}: {updates} {result}"
    call_id = starts[0]["toolCallId"]
    finals = [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update"
        and u["toolCallId"] == call_id
        and u.get("status") in ("completed", "failed")
    ]
    assert len(finals) == 1, updates
    questions = [q for q in agent.asked[asked:] if q["toolCall"]["toolCallId"] == call_id]
    return Turn(result, starts[0], finals[0], questions)


async def set_approval(agent: Agent, session_id: str, value: str) -> None:
    await agent.call(
        "session/set_config_option",
        {"sessionId": session_id, "configId": "approval", "value": value},
    )


async def listed_schema(url: str, tool: str) -> dict[str, Any]:
    """The input schema the server itself lists for `tool` (the official SDK as client)."""
    headers = {pair["name"]: pair["value"] for pair in AUTH}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            listing = await asyncio.wait_for(client.list_tools(), 20)
    schema: dict[str, Any] = next(t.input_schema for t in listing.tools if t.name == tool)
    return schema


# -- servers the tests run themselves (HTTP) -------------------------------------------------


@dataclass
class Web:
    http: str  # Streamable HTTP, requires `Authorization: Bearer SECRET_TOKEN`
    sse: str  # legacy HTTP+SSE, open


async def _serve(flag: str, port_file: Path, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVERS / "basic_server.py"),
        flag,
        str(port_file),
        *extra,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        cwd=SERVERS,
    )


async def _port(process: asyncio.subprocess.Process, port_file: Path) -> int:
    deadline = time.monotonic() + 60
    while not (port_file.exists() and port_file.read_text()):
        assert process.returncode is None, "the HTTP test server exited"
        assert time.monotonic() < deadline, "the HTTP test server did not start"
        await asyncio.sleep(0.05)
    return int(port_file.read_text())


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    root = tmp_path_factory.mktemp("mcp-web")
    http_port, sse_port = root / "http.port", root / "sse.port"
    processes = [
        await _serve("--http", http_port, "--token", SECRET_TOKEN),
        await _serve("--sse", sse_port),
    ]
    try:
        ports = [await _port(processes[0], http_port), await _port(processes[1], sse_port)]
        yield Web(f"http://127.0.0.1:{ports[0]}/mcp", f"http://127.0.0.1:{ports[1]}/sse")
    finally:
        for process in processes:
            if process.returncode is None:
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


# -- the main group: one sidecar, one session with every kind of server ----------------------


@dataclass
class Main:
    agent: Agent
    session_id: str
    opened: dict[str, Any]  # the session/new answer
    settled: dict[str, Any]  # the _session/state once every server connected or failed
    workspace: Path
    repo: Path
    mark: str


def _git_repo(path: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README").write_text("hello\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (path / "new.txt").write_text("untracked\n")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def main(tmp_path_factory: pytest.TempPathFactory, web: Web) -> AsyncIterator[Main]:
    root = tmp_path_factory.mktemp("mcp-main")
    workspace, repo = root / "workspace", root / "repo"
    workspace.mkdir()
    repo.mkdir()
    _git_repo(repo)
    mark = new_mark()
    marked = [{"name": MARK, "value": mark}]
    servers = [
        stdio("basic", "basic_server.py", mark=mark),
        {"type": "http", "name": "web", "url": web.http, "headers": AUTH},
        {"type": "sse", "name": "old", "url": web.sse, "headers": []},
        {"type": "http", "name": "anon", "url": web.http, "headers": []},
        {"name": "missing", "command": "/nonexistent/mcp-server", "args": [], "env": marked},
        stdio("exits", "exit_server.py", mark=mark),
        stdio("many", "many_tools_server.py", mark=mark),
        stdio("raw", "raw_server.py", mark=mark),
        {
            "name": "time",
            "command": sys.executable,
            "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            "env": marked,
        },
        {
            "name": "git",
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
            "env": marked,
        },
    ]
    agent = await Agent.launch(root / "data", "--mcp-start-timeout", "60")
    try:
        opened = await open_session(agent, workspace, servers)
        session_id = opened["sessionId"]
        state = await agent.wait_for(settled(session_id), SETTLE)
        yield Main(agent, session_id, opened, state, workspace, repo, mark)
    finally:
        code = await agent.close()
    assert code == 0, agent.log()
    await no_process_left(mark)
    assert agent.leaks(SECRET_TOKEN) == []


@pytest_asyncio.fixture(loop_scope="module")
async def tools(main: Main) -> AsyncIterator[Main]:
    """The main session as each test expects it: approval `ask`, no rules, allow once."""
    agent, session_id = main.agent, main.session_id
    agent.answer_permission = allow_once
    await set_approval(agent, session_id, "ask")
    await agent.call("_session/permissions/set", {"sessionId": session_id, "rules": []})
    yield main
    agent.answer_permission = allow_once


async def test_initialize_advertises_http_and_sse(main: Main) -> None:
    capabilities = main.agent.initialized["agentCapabilities"]
    assert capabilities["mcpCapabilities"]["http"] is True
    assert capabilities["mcpCapabilities"]["sse"] is True


async def test_servers_connect_and_a_failing_one_stays_contained(main: Main) -> None:
    opened = main.opened["_meta"]
    assert opened["status"] == "idle", opened  # the session does not wait for its servers
    names = ["basic", "web", "old", "anon", "missing", "exits", "many", "raw", "time", "git"]
    assert [s["name"] for s in opened["mcpServers"]] == names
    first = by_name(opened)
    # SDK-built stdio servers take far longer to start than the answer takes to write.
    for name in ("basic", "many", "time", "git"):
        assert first[name]["status"] == "connecting", first[name]
    # Each server goes connecting -> its outcome, once, as the _session/state stream shows.
    history: dict[str, list[str]] = {name: [first[name]["status"]] for name in names}
    for method, params in main.agent.seen:
        if method == "_session/state" and params["sessionId"] == main.session_id:
            for server in params["mcpServers"]:
                if history[server["name"]][-1] != server["status"]:
                    history[server["name"]].append(server["status"])
            if params is main.settled:
                break
    final = by_name(main.settled)
    for name in names:
        assert history[name] in (["connecting", final[name]["status"]], [final[name]["status"]])
        assert history[name][-1] != "connecting"

    expected = {
        "basic": ("stdio", BASIC_TOOLS),
        "web": ("http", BASIC_TOOLS),
        "old": ("sse", BASIC_TOOLS),
        "many": ("stdio", 500),
        "raw": ("stdio", 3),  # four tools with invalid schemas are skipped, not fatal
        "time": ("stdio", 2),
    }
    for name, (transport, count) in expected.items():
        server = final[name]
        assert (server["status"], server["transport"], server["tools"], server["error"]) == (
            "connected",
            transport,
            count,
            None,
        ), server
    assert final["git"]["status"] == "connected" and final["git"]["tools"] > 0, final["git"]

    for name in ("anon", "missing", "exits"):
        assert final[name]["status"] == "failed" and final[name]["tools"] == 0, final[name]
    assert "HTTP 401" in final["anon"]["error"] and "headers" in final["anon"]["error"]
    missing = final["missing"]["error"]
    assert "/nonexistent/mcp-server" in missing, missing
    assert "No such file" in missing or "not found" in missing, missing
    assert "exited" in final["exits"]["error"]
    assert "missing configuration file" in final["exits"]["error"]  # its last stderr line
    # The session works while some of its servers failed.
    status = await main.agent.status(main.session_id)
    assert status["status"] == "idle" and status["lastError"] is None


async def test_read_only_tool_runs_without_asking(tools: Main) -> None:
    turn = await mcp_turn(tools.agent, tools.session_id, 'basic echo {"text": "hello mcp"}')
    assert turn.asked == []
    assert turn.start["kind"] == "read"
    assert turn.start["title"] == "basic: echo"
    assert turn.start["rawInput"] == {"text": "hello mcp"}
    assert turn.final["status"] == "completed"
    assert turn.text == "hello mcp"
    assert turn.result["stopReason"] == "end_turn"
    assert "hello mcp" in turn.result["_meta"]["response"]


async def test_destructive_tool_asks_first(tools: Main) -> None:
    turn = await mcp_turn(tools.agent, tools.session_id, 'basic delete_thing {"thing": "t1"}')
    assert len(turn.asked) == 1
    assert turn.asked[0]["toolCall"]["kind"] == "delete"
    assert (turn.start["kind"], turn.start["title"]) == ("delete", "basic: delete_thing")
    assert turn.start["rawInput"] == {"thing": "t1"}
    assert (turn.final["status"], turn.text) == ("completed", "deleted t1")


async def test_approval_auto_never_asks(tools: Main) -> None:
    await set_approval(tools.agent, tools.session_id, "auto")
    turn = await mcp_turn(tools.agent, tools.session_id, 'basic delete_thing {"thing": "t2"}')
    assert turn.asked == []
    assert (turn.final["status"], turn.text) == ("completed", "deleted t2")


async def test_approval_deny_refuses_what_would_be_asked(tools: Main, tmp_path: Path) -> None:
    agent, session_id = tools.agent, tools.session_id
    await set_approval(agent, session_id, "deny")
    turn = await mcp_turn(agent, session_id, 'basic delete_thing {"thing": "t3"}')
    assert turn.asked == []
    assert turn.final["status"] == "failed"
    assert "refused" in turn.text and "deny" in turn.text, turn.text
    assert turn.result["stopReason"] == "end_turn"
    # Refused means not run: the sleep tool would have written its marker file at once.
    flag = tmp_path / "never"
    args = json.dumps({"seconds": 0, "marker": str(flag)})
    refused = await mcp_turn(agent, session_id, f"basic sleep {args}")
    assert "refused" in refused.text and not flag.exists()
    # A read-only tool is never asked about, so `deny` does not stop it.
    echo = await mcp_turn(agent, session_id, 'basic echo {"text": "still reads"}')
    assert (echo.asked, echo.text) == ([], "still reads")


async def test_always_allow_does_not_silence_a_destructive_tool(tools: Main) -> None:
    agent, session_id = tools.agent, tools.session_id
    agent.answer_permission = lambda params: {
        "outcome": {"outcome": "selected", "optionId": "allow_always"}
    }
    first = await mcp_turn(agent, session_id, 'basic delete_thing {"thing": "a"}')
    assert len(first.asked) == 1 and first.text == "deleted a"
    rules = (await agent.call("_session/permissions", {"sessionId": session_id}))["rules"]
    assert any(r["decision"] == "allow" and r["tool"] == "basic__delete_thing" for r in rules), (
        rules
    )
    agent.answer_permission = allow_once
    second = await mcp_turn(agent, session_id, 'basic delete_thing {"thing": "b"}')
    assert len(second.asked) == 1, "an allow rule must not skip asking about a destructive tool"
    assert second.text == "deleted b"


async def test_images_and_structured_content_reach_the_client(tools: Main) -> None:
    image = await mcp_turn(tools.agent, tools.session_id, "basic image {}")
    assert image.final["status"] == "completed"
    blocks = [item["content"] for item in image.final["content"]]
    pictures = [block for block in blocks if block["type"] == "image"]
    assert len(pictures) == 1, blocks
    assert pictures[0]["mimeType"] == "image/png"
    assert base64.b64decode(pictures[0]["data"]).startswith(b"\x89PNG")

    structured = await mcp_turn(tools.agent, tools.session_id, 'basic structured {"a": 2, "b": 3}')
    assert structured.final["status"] == "completed"
    assert json.loads(structured.text) == {"sum": 5, "inputs": [2, 3]}


async def test_tool_error_is_a_result_and_the_turn_goes_on(tools: Main) -> None:
    turn = await mcp_turn(tools.agent, tools.session_id, "basic fail {}")
    assert turn.final["status"] == "failed"
    assert "always fails" in turn.text
    assert turn.result["stopReason"] == "end_turn"
    assert "always fails" in turn.result["_meta"]["response"]  # the model read the error
    page = await tools.agent.messages(tools.session_id, limit=1000)
    assert page["messages"][-1]["type"] == "assistant"
    assert any(m["type"] == "tool_result" and "always fails" in m["text"] for m in page["messages"])


async def test_cancel_during_a_long_call_reaches_the_server(tools: Main, tmp_path: Path) -> None:
    agent, session_id = tools.agent, tools.session_id
    await set_approval(agent, session_id, "auto")
    flag = tmp_path / "sleep-flag"
    args = json.dumps({"seconds": 120, "marker": str(flag)})
    turn = agent.prompt_task(session_id, f"/mcp basic sleep {args}")
    await until(lambda: flag.exists() and flag.read_text() == "started", "the sleep to start")
    await agent.client.notify("session/cancel", {"sessionId": session_id})
    result = await asyncio.wait_for(turn, 20)
    assert result["stopReason"] == "cancelled"
    # The SDK sent notifications/cancelled; the server's handler was cancelled.
    await until(lambda: flag.read_text() == "cancelled", "the server to see the cancel")
    finals = [
        u for u in agent.updates(session_id, "tool_call_update") if u.get("status") == "failed"
    ]
    assert finals and finals[-1]["rawOutput"]["cancelled"] is True
    after = await mcp_turn(agent, session_id, 'basic echo {"text": "after cancel"}')
    assert after.text == "after cancel"


async def test_crash_mid_call_then_reconnect(tools: Main) -> None:
    agent, session_id = tools.agent, tools.session_id
    await set_approval(agent, session_id, "auto")
    turn = await mcp_turn(agent, session_id, "basic crash {}")
    assert turn.final["status"] == "failed"
    assert "disconnected during the call" in turn.text, turn.text
    assert turn.result["stopReason"] == "end_turn"
    status = by_name(await agent.status(session_id))["basic"]
    assert status["status"] == "failed" and status["tools"] == 0, status
    await until_status(
        agent,
        session_id,
        lambda s: "crashing on purpose" in (s["basic"]["error"] or ""),
        "the crash's stderr line in the status",
    )
    # Its tools are gone: the model is no longer offered them.
    gone = await agent.prompt(session_id, '/mcp basic echo {"text": "x"}')
    assert "No MCP tool" in gone["_meta"]["response"], gone

    with pytest.raises(RpcError) as unknown:
        await agent.call("_session/mcp/reconnect", {"sessionId": session_id, "name": "nope"})
    assert unknown.value.code == ErrorCode.INVALID_PARAMS
    assert unknown.value.data["field"] == "name"

    since = len(agent.seen)
    back = await asyncio.wait_for(
        agent.client.request("_session/mcp/reconnect", {"sessionId": session_id, "name": "basic"}),
        SETTLE,
    )
    assert (back["name"], back["status"], back["tools"], back["error"]) == (
        "basic",
        "connected",
        BASIC_TOOLS,
        None,
    )
    state = await wait_new(
        agent,
        since,
        lambda m, p: (
            m == "_session/state"
            and p["sessionId"] == session_id
            and by_name(p)["basic"]["status"] == "connected"
        ),
    )
    assert by_name(state)["basic"]["tools"] == BASIC_TOOLS
    again = await mcp_turn(agent, session_id, 'basic echo {"text": "back again"}')
    assert again.text == "back again"


async def test_third_party_time_and_git_servers(tools: Main) -> None:
    now = await mcp_turn(
        tools.agent, tools.session_id, 'time get_current_time {"timezone": "Europe/Paris"}'
    )
    assert now.start["kind"] == "read" and now.asked == []
    assert now.final["status"] == "completed" and "Europe/Paris" in now.text, now.text
    args = json.dumps({"repo_path": str(tools.repo)})
    status = await mcp_turn(tools.agent, tools.session_id, f"git git_status {args}")
    assert status.final["status"] == "completed", status.text
    assert "new.txt" in status.text, status.text


async def test_load_replays_a_successful_mcp_call_as_completed(tools: Main) -> None:
    agent, session_id = tools.agent, tools.session_id
    live = await mcp_turn(agent, session_id, 'basic echo {"text": "replay me"}')
    assert live.final["status"] == "completed"
    call_id = live.start["toolCallId"]
    since = len(agent.seen)
    loaded = await agent.call(
        "session/load", {"sessionId": session_id, "cwd": str(tools.workspace), "mcpServers": []}
    )
    assert by_name(loaded["_meta"])["basic"]["status"] == "connected"  # live: kept as it was
    replayed = [
        p["update"]
        for m, p in agent.seen[since:]
        if m == "session/update"
        and p["sessionId"] == session_id
        and p["update"].get("toolCallId") == call_id
    ]
    starts = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
    assert [u["rawInput"] for u in starts] == [{"text": "replay me"}], replayed
    (result,) = [u for u in replayed if u["sessionUpdate"] == "tool_call_update"]
    assert result["content"][0]["content"]["text"] == "replay me"
    # What the client saw live: the call succeeded.
    assert result["status"] == "completed", result


async def test_many_tools_and_invalid_schemas_still_work(tools: Main) -> None:
    await set_approval(tools.agent, tools.session_id, "auto")
    many = await mcp_turn(tools.agent, tools.session_id, 'many tool_499 {"value": "v"}')
    assert many.text == "tool 499: v"
    good = await mcp_turn(tools.agent, tools.session_id, "raw good {}")
    assert good.text == "called good"


BAD_SERVERS = [
    ([{"name": "s", "command": 3, "args": [], "env": []}], "mcpServers.0.command"),
    ([{"name": "s", "command": "x", "args": "x", "env": []}], "mcpServers.0.args"),
    ([{"name": "s", "command": "x", "args": [], "env": [{"name": 1}]}], "mcpServers.0.env.0.name"),
    ([{"type": "http", "name": "s", "url": "ftp://x", "headers": []}], "mcpServers.0.url"),
    (
        [
            {"name": "s", "command": "x", "args": [], "env": []},
            {"type": "http", "name": "s", "url": "http://127.0.0.1:9/mcp", "headers": []},
        ],
        "mcpServers.1.name",
    ),
]


async def test_bad_mcp_servers_are_refused_naming_the_field(main: Main) -> None:
    agent = main.agent
    before = len((await agent.call("session/list", {}))["sessions"])
    for servers, field in BAD_SERVERS:
        with pytest.raises(RpcError) as refused:
            await open_session(agent, main.workspace, servers)
        assert refused.value.code == ErrorCode.INVALID_PARAMS, (servers, refused.value.message)
        assert refused.value.data["field"] == field, (servers, refused.value.data)
    assert len((await agent.call("session/list", {}))["sessions"]) == before  # none created

    # A resume with bad servers is refused too, and the stored ones stay.
    kept = [stdio("kept", "raw_server.py", mark=main.mark)]
    opened = await open_session(agent, main.workspace, kept)
    session_id = opened["sessionId"]
    await agent.call("session/close", {"sessionId": session_id})
    for servers, field in BAD_SERVERS:
        with pytest.raises(RpcError) as refused:
            await agent.call(
                "session/resume",
                {"sessionId": session_id, "cwd": str(main.workspace), "mcpServers": servers},
            )
        assert refused.value.data["field"] == field
    status = await agent.status(session_id)
    assert status["status"] == "closed" and [s["name"] for s in status["mcpServers"]] == ["kept"]


async def test_close_leaves_no_server_process(main: Main) -> None:
    agent, mark = main.agent, new_mark()
    servers = [
        stdio("raw", "raw_server.py", mark=mark),
        stdio("sleepy", "sleepy_server.py", "--spawn-child", mark=mark),  # and a grandchild
        stdio("hang", "hang_server.py", mark=mark),  # ignores EOF and SIGTERM; still connecting
    ]
    session_id = (await open_session(agent, main.workspace, servers))["sessionId"]
    await running_servers(agent, session_id, mark)
    closed = (await agent.call("session/close", {"sessionId": session_id}))["_meta"]
    assert closed["status"] == "closed"
    assert all(s["status"] == "closed" for s in closed["mcpServers"]), closed["mcpServers"]
    await no_process_left(mark)


async def running_servers(agent: Agent, session_id: str, mark: str) -> None:
    """Wait until raw and sleepy are connected and hang and sleepy's child are running."""
    await until_status(
        agent,
        session_id,
        lambda s: s["raw"]["status"] == "connected" and s["sleepy"]["status"] == "connected",
        "raw and sleepy to connect",
    )

    def started() -> bool:
        lines = cmdlines(mark)
        return any("hang_server.py" in line for line in lines) and any(
            "time.sleep(600)" in line for line in lines
        )

    await until(started, "the hang server and sleepy's child to run")


# -- short timeouts: hand-written servers that start at once ---------------------------------


@dataclass
class Quick:
    agent: Agent
    session_id: str
    settled: dict[str, Any]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def quick(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Quick]:
    root = tmp_path_factory.mktemp("mcp-quick")
    workspace = root / "workspace"
    workspace.mkdir()
    mark = new_mark()
    servers = [
        stdio("raw", "raw_server.py", mark=mark),
        stdio("sleepy", "sleepy_server.py", mark=mark),
        stdio("hang", "hang_server.py", mark=mark),
        stdio("junk", "junk_server.py", mark=mark),
    ]
    agent = await Agent.launch(root / "data", "--mcp-start-timeout", "2", "--mcp-call-timeout", "2")
    try:
        opened = await open_session(agent, workspace, servers, approval="auto")
        session_id = opened["sessionId"]
        state = await agent.wait_for(settled(session_id), SETTLE)
        yield Quick(agent, session_id, state)
    finally:
        code = await agent.close()
    assert code == 0, agent.log()
    await no_process_left(mark)


async def test_start_timeout_fails_only_the_slow_servers(quick: Quick) -> None:
    final = by_name(quick.settled)
    assert (final["raw"]["status"], final["raw"]["tools"]) == ("connected", 3), final["raw"]
    assert (final["sleepy"]["status"], final["sleepy"]["tools"]) == ("connected", 3)
    hang = final["hang"]
    assert hang["status"] == "failed", hang
    assert "timed out after 2s" in hang["error"] and "handshake" in hang["error"], hang
    junk = final["junk"]
    assert junk["status"] == "failed", junk
    assert "timed out after 2s" in junk["error"], junk
    assert "not JSON-RPC" in junk["error"] and "Welcome to the junk server" in junk["error"]
    assert (await quick.agent.status(quick.session_id))["status"] == "idle"


async def test_call_timeout_is_a_result_and_cancels_on_the_server(
    quick: Quick, tmp_path: Path
) -> None:
    flag = tmp_path / "sleep-flag"
    args = json.dumps({"seconds": 60, "marker": str(flag)})
    turn = await mcp_turn(quick.agent, quick.session_id, f"sleepy sleep {args}")
    assert turn.final["status"] == "failed"
    assert "timed out after 2s" in turn.text, turn.text
    assert turn.result["stopReason"] == "end_turn"
    await until(lambda: flag.read_text() == "cancelled", "the server to see the cancel")
    ping = await mcp_turn(quick.agent, quick.session_id, "sleepy ping {}")
    assert (ping.final["status"], ping.text) == ("completed", "pong")


async def test_structured_content_without_a_text_mirror(quick: Quick) -> None:
    turn = await mcp_turn(quick.agent, quick.session_id, "sleepy stats {}")
    assert turn.final["status"] == "completed"
    assert json.loads(turn.text) == {"sum": 5, "inputs": [2, 3]}


async def test_fork_keeps_or_replaces_the_servers(quick: Quick, tmp_path: Path) -> None:
    agent, source = quick.agent, quick.session_id
    cwd = str(tmp_path)
    kept = await agent.call("session/fork", {"sessionId": source, "cwd": cwd, "mcpServers": []})
    fork_id = kept["sessionId"]
    assert [s["name"] for s in kept["_meta"]["mcpServers"]] == ["raw", "sleepy", "hang", "junk"]
    await agent.wait_for(settled(fork_id), SETTLE)
    assert (await mcp_turn(agent, fork_id, "sleepy ping {}")).text == "pong"
    await agent.call("session/close", {"sessionId": fork_id})

    mark = new_mark()
    replaced = await agent.call(
        "session/fork",
        {
            "sessionId": source,
            "cwd": cwd,
            "mcpServers": [stdio("solo", "sleepy_server.py", mark=mark)],
        },
    )
    fork_id = replaced["sessionId"]
    assert [s["name"] for s in replaced["_meta"]["mcpServers"]] == ["solo"]
    await agent.wait_for(settled(fork_id), SETTLE)
    assert (await mcp_turn(agent, fork_id, "solo ping {}")).text == "pong"
    await agent.call("session/close", {"sessionId": fork_id})
    await no_process_left(mark)
    # The source is untouched.
    source_servers = (await agent.status(source))["mcpServers"]
    assert [s["name"] for s in source_servers] == ["raw", "sleepy", "hang", "junk"]


async def test_a_server_dying_while_idle_is_announced(quick: Quick, tmp_path: Path) -> None:
    """Clients are told of every change of the summary (`_session/state`), so a UI never
    polls: a server that goes away between turns must show as failed without a poll."""
    agent, mark = quick.agent, new_mark()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    opened = await open_session(agent, workspace, [stdio("lone", "sleepy_server.py", mark=mark)])
    session_id = opened["sessionId"]
    await agent.wait_for(settled(session_id), SETTLE)
    since = len(agent.seen)
    server = [
        pid
        for pid in marked_processes(MARK, mark)
        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
        == [sys.executable.encode(), str(SERVERS / "sleepy_server.py").encode()]
    ]
    assert len(server) == 1, cmdlines(mark)
    os.kill(server[0], signal.SIGKILL)
    await until_status(
        agent, session_id, lambda s: s["lone"]["status"] == "failed", "the server to fail"
    )
    try:
        # The status already says failed: its announcement is due now, not after a poll.
        await wait_new(
            agent,
            since,
            lambda m, p: (
                m == "_session/state"
                and p["sessionId"] == session_id
                and by_name(p)["lone"]["status"] == "failed"
            ),
            timeout=5,
        )
    except TimeoutError:
        states = [p["mcpServers"] for m, p in agent.seen[since:] if m == "_session/state"]
        raise AssertionError(
            "_session/status says the server failed, but no _session/state announced it;"
            f" states sent since it died: {states}"
        ) from None
    finally:
        await agent.call("session/close", {"sessionId": session_id})
    await no_process_left(mark)


# -- secrets, persistence, restart, and processes that must not outlive the sidecar ----------


async def agent_status_over_http(agent: Agent, session_id: str) -> str:
    url, token = await agent.endpoint(session_id)
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{url}/agent/status",
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=10),
        ) as response:
            assert response.status == 200
            return await response.text()


def stored_servers(db: Path, session_id: str) -> list[dict[str, Any]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        row = connection.execute(
            "SELECT mcp_servers FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
    servers: list[dict[str, Any]] = json.loads(row[0])
    return servers


async def test_secrets_stay_private_and_a_restart_reconnects(tmp_path: Path, web: Web) -> None:
    data, workspace, mark = tmp_path / "data", tmp_path / "workspace", new_mark()
    workspace.mkdir()
    secret = {"API_KEY": SECRET_ENV}
    servers = [
        stdio("raw", "raw_server.py", mark=mark, env=secret),
        stdio("leaky", "exit_server.py", "API_KEY", mark=mark, env=secret),  # quotes it on stderr
        {"type": "http", "name": "web", "url": web.http, "headers": AUTH},
        stdio("sleepy", "sleepy_server.py", "--spawn-child", mark=mark),
    ]
    first = await Agent.launch(data)
    try:
        session_id = (await open_session(first, workspace, servers))["sessionId"]
        state = by_name(await first.wait_for(settled(session_id), SETTLE))
        assert [state[n]["status"] for n in ("raw", "web", "sleepy")] == ["connected"] * 3, state
        # The value reached the server (it quoted it) and was scrubbed from its status.
        assert "API_KEY=*** was rejected" in state["leaky"]["error"], state["leaky"]
        assert (await mcp_turn(first, session_id, "raw good {}")).text == "called good"
        web_echo = await mcp_turn(first, session_id, 'web echo {"text": "public words"}')
        assert web_echo.text == "public words"
        await first.call("session/list", {})
        await first.status(session_id)
        await first.call("_session/permissions", {"sessionId": session_id})
        over_http = await agent_status_over_http(first, session_id)
        assert [s["name"] for s in json.loads(over_http)["mcpServers"]] == [
            "raw",
            "leaky",
            "web",
            "sleepy",
        ]
        assert SECRET_ENV not in over_http and SECRET_TOKEN not in over_http
        await until(lambda: any("time.sleep(600)" in c for c in cmdlines(mark)), "sleepy's child")
    finally:
        code = await first.close()  # stdin EOF, with stdio servers (and a grandchild) running
    assert code == 0, first.log()
    await no_process_left(mark)
    assert first.leaks(SECRET_ENV, SECRET_TOKEN) == []
    assert any("API_KEY=***" in line for line in first.wire.stderr_lines), "no redacted line"

    db = data / "sessions.db"
    for path in (db, db.with_name("sessions.db-wal"), db.with_name("sessions.db-shm")):
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stored_servers(db, session_id) == servers  # as given: env and headers included

    second = await Agent.launch(data)
    try:
        resumed = await second.call(
            "session/resume", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
        )
        generation = resumed["_meta"]["generation"]
        assert [s["name"] for s in resumed["_meta"]["mcpServers"]] == [
            "raw",
            "leaky",
            "web",
            "sleepy",
        ]
        state = by_name(await second.wait_for(settled(session_id, generation), SETTLE))
        assert [state[n]["status"] for n in ("raw", "web", "sleepy")] == ["connected"] * 3, state
        assert (await mcp_turn(second, session_id, "raw good {}")).text == "called good"
        again = await mcp_turn(second, session_id, 'web echo {"text": "after restart"}')
        assert again.text == "after restart"

        await second.call("session/close", {"sessionId": session_id})
        replacement = [stdio("pinger", "sleepy_server.py", mark=mark)]
        replaced = await second.call(
            "session/resume",
            {"sessionId": session_id, "cwd": str(workspace), "mcpServers": replacement},
        )
        assert [s["name"] for s in replaced["_meta"]["mcpServers"]] == ["pinger"]
        generation = replaced["_meta"]["generation"]
        state = by_name(await second.wait_for(settled(session_id, generation), SETTLE))
        assert state["pinger"]["status"] == "connected", state
        assert (await mcp_turn(second, session_id, "pinger ping {}")).text == "pong"
        old = await second.prompt(session_id, "/mcp raw good {}")
        assert "No MCP tool" in old["_meta"]["response"], old  # raw is gone
    finally:
        code = await second.close()
    assert code == 0, second.log()
    await no_process_left(mark)
    assert second.leaks(SECRET_ENV, SECRET_TOKEN) == []
    assert stored_servers(db, session_id) == replacement


async def test_sigkill_of_the_sidecar_leaves_no_server_process(tmp_path: Path) -> None:
    workspace, mark = tmp_path / "workspace", new_mark()
    workspace.mkdir()
    servers = [
        stdio("raw", "raw_server.py", mark=mark),
        stdio("sleepy", "sleepy_server.py", "--spawn-child", mark=mark),
        stdio("hang", "hang_server.py", mark=mark),
    ]
    agent = await Agent.launch(tmp_path / "data", "--mcp-start-timeout", "60")
    try:
        session_id = (await open_session(agent, workspace, servers))["sessionId"]
        await running_servers(agent, session_id, mark)
    finally:
        agent.sigkill()
        await agent.wait_exit()
    # bubblewrap's --die-with-parent: the kernel ends each server's namespace.
    await no_process_left(mark)


# -- other clients and providers -------------------------------------------------------------


class SdkClient:
    """A minimal ACP client for the official SDK: records updates, allows once."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append(tool_call)
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError(method)


async def test_official_acp_sdk_client_passes_mcp_servers(tmp_path: Path) -> None:
    workspace, mark = tmp_path / "workspace", new_mark()
    workspace.mkdir()
    client = SdkClient()
    log_path = tmp_path / "sidecar.log"
    with log_path.open("wb") as sidecar_log:
        async with spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "sidecar",
            "--data-dir",
            str(tmp_path / "data"),
            cwd=REPO,
            transport_kwargs={"limit": MAX_MESSAGE_BYTES, "stderr": sidecar_log.fileno()},
        ) as (conn, process):
            await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_info=Implementation(name="mcp-e2e", version="0"),
                    client_capabilities=ClientCapabilities(),
                ),
                60,
            )
            server = McpServerStdio(
                name="raw",
                command=sys.executable,
                args=[str(SERVERS / "raw_server.py")],
                env=[EnvVariable(name=MARK, value=mark)],
            )
            session = await asyncio.wait_for(
                conn.new_session(cwd=str(workspace), mcp_servers=[server]), 60
            )
            assert session.field_meta is not None
            assert [s["name"] for s in session.field_meta["mcpServers"]] == ["raw"]
            response = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("/mcp raw good {}")]),
                SETTLE,
            )
            assert response.stop_reason == "end_turn"
            starts = [u for u in client.updates if isinstance(u, ToolCallStart)]
            assert len(starts) == 1 and "good" in starts[0].title
            call_id = starts[0].tool_call_id
            finals = [
                u
                for u in client.updates
                if isinstance(u, ToolCallProgress)
                and u.tool_call_id == call_id
                and u.status == "completed"
            ]
            assert len(finals) == 1 and finals[0].content is not None
            assert finals[0].content[0].content.text == "called good"  # type: ignore[union-attr]
            assert len(client.asked) == 1  # unannotated: may change something
        code = await asyncio.wait_for(process.wait(), 20)
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
    await no_process_left(mark)


async def test_openai_compatible_model_calls_an_mcp_tool(tmp_path: Path, web: Web) -> None:
    fake = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        agent = await Agent.launch(
            tmp_path / "data",
            "--provider",
            "openai",
            "--model",
            "test-model",
            "--base-url",
            fake.base_url,
            env={"OPENAI_API_KEY": "test"},
        )
        try:
            workspace = tmp_path / "workspace"
            workspace.mkdir()
            servers = [{"type": "http", "name": "basic", "url": web.http, "headers": AUTH}]
            session_id = (await open_session(agent, workspace, servers))["sessionId"]
            await agent.wait_for(settled(session_id), SETTLE)

            await fake.script(
                {
                    "type": "tool_call",
                    "name": "basic__echo",
                    "arguments": {"text": "via openai"},
                    "id": "call_mcp_1",
                },
                {"type": "text", "text": "The tool said via openai."},
            )
            result = await agent.prompt(session_id, "echo it through the tool")
            assert result["stopReason"] == "end_turn"
            assert result["_meta"]["response"] == "The tool said via openai."
            first, second = await fake.wait_requests(2)
            offered = {t["function"]["name"]: t["function"] for t in first["body"]["tools"]}
            assert "bash" in offered and "basic__echo" in offered, sorted(offered)
            schema = await listed_schema(web.http, "echo")
            assert offered["basic__echo"]["parameters"] == schema
            assert offered["basic__echo"]["description"] == "Return the text unchanged."
            replies = [m for m in second["body"]["messages"] if m["role"] == "tool"]
            assert [(m["tool_call_id"], m["content"]) for m in replies] == [
                ("call_mcp_1", "via openai")
            ]
            (start,) = [
                u for u in agent.updates(session_id, "tool_call") if u["toolCallId"] == "call_mcp_1"
            ]
            assert start["kind"] == "read" and start["rawInput"] == {"text": "via openai"}
            assert agent.asked == []  # read-only: nothing to ask

            # A tool name the model made up is a result too, and the turn goes on.
            await fake.script(
                {"type": "tool_call", "name": "basic__nope", "arguments": {}, "id": "call_mcp_2"},
                {"type": "text", "text": "That tool does not exist."},
            )
            result = await agent.prompt(session_id, "call a tool that is not there")
            assert result["stopReason"] == "end_turn"
            assert result["_meta"]["response"] == "That tool does not exist."
            requests = await fake.wait_requests(4)
            replies = [m for m in requests[3]["body"]["messages"] if m["role"] == "tool"]
            assert replies[-1]["tool_call_id"] == "call_mcp_2"
            assert "Unknown tool 'basic__nope'" in replies[-1]["content"], replies[-1]
            assert "basic__echo" in replies[-1]["content"]  # it says which tools there are
        finally:
            code = await agent.close()
        assert code == 0, agent.log()
        assert agent.leaks(SECRET_TOKEN) == []
    finally:
        await fake.stop()
