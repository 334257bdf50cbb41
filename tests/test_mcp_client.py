"""The MCP client hub against real servers: SDK-built test servers, a hand-written one and the
published `mcp-server-time` / `mcp-server-git`. No mocks; every wait is bounded."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from sidecar.agent.mcp import (
    HttpServer,
    InvalidServers,
    McpHub,
    McpServerSpec,
    SseServer,
    StdioServer,
    ToolSpec,
    assign_names,
    parse_servers,
)
from sidecar.agent.mcp.naming import VALID_NAME
from sidecar.agent.mcp.tooldefs import tool_kind

SERVERS = Path(__file__).parent / "mcp_servers"
MARKER_VAR = "MCP_HUB_TEST_MARKER"
SECRET = "s3cr3t-value-that-must-not-leak"

pytestmark = pytest.mark.timeout(90)


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def marker() -> str:
    return f"mcp-test-{uuid.uuid4().hex}"


def stdio(
    name: str, script: str, *args: str, marker: str, env: tuple[tuple[str, str], ...] = ()
) -> StdioServer:
    return StdioServer(
        name=name,
        command=sys.executable,
        args=(str(SERVERS / script), *args),
        env=((MARKER_VAR, marker), *env),
    )


def live_pids(marker: str) -> list[int]:
    """Processes whose environment carries the marker; zombies count as dead (PID 1 here
    does not reap orphans)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[0]
        if needle in environ.split(b"\0") and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def running(specs: list[McpServerSpec], **options: Any) -> AsyncIterator[McpHub]:
    hub = McpHub(specs, **options)
    try:
        await asyncio.wait_for(hub.start(), 60)
        yield hub
    finally:
        await asyncio.wait_for(hub.aclose(), 60)


def status_of(hub: McpHub, name: str) -> Any:
    return next(status for status in hub.statuses() if status.name == name)


def tool_named(hub: McpHub, name: str) -> ToolSpec:
    return next(tool for tool in hub.tools() if tool.name == name)


@contextmanager
def http_server(tmp_path: Path, marker: str, *flags: str) -> Iterator[str]:
    """Run basic_server.py over HTTP in a subprocess; yield its base URL."""
    port_file = tmp_path / f"port-{uuid.uuid4().hex}"
    mode = "--sse" if "sse" in flags else "--http"
    extra = [flag for flag in flags if flag != "sse"]
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "basic_server.py"), mode, str(port_file), *extra],
        env={**os.environ, MARKER_VAR: marker},
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):
            assert process.poll() is None, "the HTTP test server exited"
            assert time.monotonic() < deadline, "the HTTP test server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


# -- parsing and naming ----------------------------------------------------------------------


def test_parse_servers_reads_acp_shapes() -> None:
    specs = parse_servers(
        [
            {
                "name": "files",
                "command": "npx",
                "args": ["-y", "server"],
                "env": [{"name": "TOKEN", "value": "x"}],
            },
            {"type": "stdio", "name": "bare", "command": "tool"},
            {
                "type": "http",
                "name": "web",
                "url": "https://example.com/mcp",
                "headers": [{"name": "Authorization", "value": "Bearer t"}],
            },
            {"type": "sse", "name": "old-web", "url": "http://127.0.0.1:9/sse", "headers": []},
        ]
    )
    assert specs == [
        StdioServer("files", "npx", ("-y", "server"), (("TOKEN", "x"),)),
        StdioServer("bare", "tool"),
        HttpServer("web", "https://example.com/mcp", (("Authorization", "Bearer t"),)),
        SseServer("old-web", "http://127.0.0.1:9/sse"),
    ]


def test_parse_servers_rejects_duplicate_names() -> None:
    with pytest.raises(InvalidServers) as caught:
        parse_servers(
            [
                {"name": "git", "command": "a", "args": [], "env": []},
                {"type": "http", "name": "git", "url": "http://x", "headers": []},
            ]
        )
    assert caught.value.field == "mcpServers.1.name"
    assert "duplicate" in caught.value.reason


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("not an object", "mcpServers.0"),
        ({"command": "a"}, "mcpServers.0.name"),
        ({"name": "", "command": "a"}, "mcpServers.0.name"),
        ({"name": "has space", "command": "a"}, "mcpServers.0.name"),
        ({"name": "x" * 33, "command": "a"}, "mcpServers.0.name"),
        ({"name": 7, "command": "a"}, "mcpServers.0.name"),
        ({"name": "s"}, "mcpServers.0.command"),
        ({"name": "s", "command": 12}, "mcpServers.0.command"),
        ({"name": "s", "command": "a", "args": "-v"}, "mcpServers.0.args"),
        ({"name": "s", "command": "a", "args": ["ok", 3]}, "mcpServers.0.args.1"),
        ({"name": "s", "command": "a", "env": [{"name": "K"}]}, "mcpServers.0.env.0.value"),
        ({"name": "s", "command": "a", "env": [["K", "V"]]}, "mcpServers.0.env.0"),
        ({"type": "ws", "name": "s", "url": "ws://x"}, "mcpServers.0.type"),
        ({"type": "http", "name": "s"}, "mcpServers.0.url"),
        ({"type": "http", "name": "s", "url": "ftp://host/x"}, "mcpServers.0.url"),
        ({"type": "sse", "name": "s", "url": "http:///nohost"}, "mcpServers.0.url"),
        (
            {
                "type": "http",
                "name": "s",
                "url": "http://h",
                "headers": [{"name": "a b", "value": ""}],
            },
            "mcpServers.0.headers.0.name",
        ),
    ],
)
def test_parse_servers_names_the_bad_field(entry: object, field: str) -> None:
    with pytest.raises(InvalidServers) as caught:
        parse_servers([entry])
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ": ")


def test_parse_errors_do_not_quote_secret_values() -> None:
    bad_header = {"name": "Authorization", "value": f"Bearer {SECRET}\r\nX-Evil: 1"}
    with pytest.raises(InvalidServers) as caught:
        parse_servers([{"type": "http", "name": "s", "url": "http://h", "headers": [bad_header]}])
    assert caught.value.field == "mcpServers.0.headers.0.value"
    assert SECRET not in str(caught.value)


def test_tool_names_are_valid_unique_and_deterministic() -> None:
    pairs = [
        ("git", "status"),
        ("web", "search/advanced"),
        ("web", "search advanced"),
        ("a_", "b"),
        ("a", "_b"),
        ("long", "t" * 100),
        ("long", "t" * 101),
        ("uni", "café"),
    ]
    names = assign_names(pairs)
    assert names[("git", "status")] == "git__status"
    assert all(VALID_NAME.match(name) for name in names.values())
    assert len(set(names.values())) == len(pairs)
    assert assign_names(reversed(pairs)) == names
    # The clash between a___b and a___b is settled by hashing both, not by order.
    assert names[("a_", "b")] != "a___b" and names[("a", "_b")] != "a___b"
    # Adding an unrelated tool does not rename anyone.
    assert {k: v for k, v in assign_names([*pairs, ("x", "y")]).items() if k != ("x", "y")} == names


def test_kind_mapping_from_annotations() -> None:
    from mcp_types import ToolAnnotations as A

    assert tool_kind(None) == "other"
    assert tool_kind(A()) == "other"
    assert tool_kind(A(read_only_hint=True)) == "read"
    assert tool_kind(A(read_only_hint=True, open_world_hint=True)) == "fetch"
    assert tool_kind(A(destructive_hint=True)) == "delete"
    assert tool_kind(A(destructive_hint=False)) == "edit"
    assert tool_kind(A(read_only_hint=False)) == "edit"


# -- starting --------------------------------------------------------------------------------


async def test_parallel_start_isolates_failing_servers(marker: str) -> None:
    specs: list[McpServerSpec] = [
        stdio("basic", "basic_server.py", marker=marker),
        stdio("exits", "exit_server.py", marker=marker),
        StdioServer("missing", "/nonexistent/mcp-server-binary"),
        stdio("junk", "junk_server.py", marker=marker),
    ]
    started = time.monotonic()
    async with running(specs, start_timeout=6.0) as hub:
        assert time.monotonic() - started < 6.0 + 3.0
        assert status_of(hub, "basic").status == "connected"
        exits = status_of(hub, "exits")
        assert exits.status == "failed"
        assert "exited" in exits.error and "missing configuration file" in exits.error
        missing = status_of(hub, "missing")
        assert missing.status == "failed"
        assert "command not found" in missing.error
        junk = status_of(hub, "junk")
        assert junk.status == "failed"
        assert "timed out after 6s" in junk.error
        assert "not JSON-RPC" in junk.error and "Welcome to the junk server" in junk.error
        assert {tool.server for tool in hub.tools()} == {"basic"}
        result = await hub.call("basic__echo", {"text": "still fine"})
        assert (result.text, result.is_error) == ("still fine", False)
    assert all(status.status == "closed" for status in hub.statuses())


async def test_start_timeout_on_a_hanging_server_and_staged_kill(marker: str) -> None:
    specs: list[McpServerSpec] = [stdio("hang", "hang_server.py", marker=marker)]
    hub = McpHub(specs, start_timeout=1.5)
    started = time.monotonic()
    await asyncio.wait_for(hub.start(), 30)
    assert time.monotonic() - started < 1.5 + 1.0
    status = status_of(hub, "hang")
    assert status.status == "failed"
    assert "timed out after 1.5s waiting for the MCP handshake" in status.error
    await asyncio.wait_for(hub.aclose(), 30)  # ignores EOF and SIGTERM: needs SIGKILL
    assert live_pids(marker) == []
    assert status_of(hub, "hang").status == "closed"


async def test_secrets_never_appear_in_statuses(tmp_path: Path, marker: str) -> None:
    with http_server(tmp_path, marker, "--token", "right-token") as base:
        specs: list[McpServerSpec] = [
            stdio("leaky", "exit_server.py", "API_KEY", marker=marker, env=(("API_KEY", SECRET),)),
            stdio("basic", "basic_server.py", marker=marker, env=(("API_KEY", SECRET),)),
            HttpServer("web", f"{base}/mcp", (("Authorization", f"Bearer {SECRET}"),)),
        ]
        async with running(specs, start_timeout=15.0) as hub:
            statuses = hub.statuses()
            leaky = status_of(hub, "leaky")
            assert leaky.status == "failed" and "API_KEY=*** was rejected" in leaky.error
            web = status_of(hub, "web")
            assert web.status == "failed" and "HTTP 401" in web.error
            assert SECRET not in repr(statuses)
            assert "Bearer" not in repr(statuses)
        assert SECRET not in repr(hub.statuses())


# -- tools and calls -------------------------------------------------------------------------


async def test_tools_and_result_shapes(marker: str) -> None:
    async with running([stdio("basic", "basic_server.py", marker=marker)], output_cap=1000) as hub:
        echo = tool_named(hub, "basic__echo")
        assert (echo.server, echo.tool, echo.read_only, echo.destructive, echo.kind) == (
            "basic",
            "echo",
            True,
            False,
            "read",
        )
        assert echo.parameters["type"] == "object" and "text" in echo.parameters["properties"]
        assert echo.description == "Return the text unchanged."
        delete = tool_named(hub, "basic__delete_thing")
        assert (delete.read_only, delete.destructive, delete.kind) == (False, True, "delete")
        assert tool_named(hub, "basic__image").destructive  # unannotated: spec default

        structured = await hub.call("basic__structured", {"a": 2, "b": 3})
        assert not structured.is_error
        assert structured.text.count('"sum"') == 1 and "5" in structured.text

        image = await hub.call("basic__image", {})
        assert image.images and image.images[0][0] == "image/png"

        failed = await hub.call("basic__fail", {})
        assert failed.is_error and "always fails" in failed.text

        flood = await hub.call("basic__flood", {"size": 5_000_000})
        assert not flood.is_error and len(flood.text) <= 1000
        assert "output truncated" in flood.text and "5000000 characters" in flood.text

        unknown = await hub.call("basic__nope", {})
        assert unknown.is_error and "unknown tool" in unknown.text
        bad_args = await hub.call("basic__echo", {"wrong": 1})
        assert bad_args.is_error


async def test_call_timeout_cancels_on_the_server(tmp_path: Path, marker: str) -> None:
    flag = tmp_path / "sleep-flag"
    async with running([stdio("basic", "basic_server.py", marker=marker)], call_timeout=1.5) as hub:
        started = time.monotonic()
        result = await hub.call("basic__sleep", {"seconds": 60, "marker": str(flag)})
        assert time.monotonic() - started < 5
        assert result.is_error and "timed out after 1.5s" in result.text
        await eventually(lambda: flag.read_text() == "cancelled")
        after = await hub.call("basic__echo", {"text": "next"})
        assert (after.text, after.is_error) == ("next", False)


async def test_cancelling_the_caller_cancels_the_request(tmp_path: Path, marker: str) -> None:
    flag = tmp_path / "sleep-flag"
    async with running([stdio("basic", "basic_server.py", marker=marker)]) as hub:
        call = asyncio.create_task(hub.call("basic__sleep", {"seconds": 60, "marker": str(flag)}))
        await eventually(lambda: flag.exists() and flag.read_text() == "started")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, 10)
        # The SDK sent notifications/cancelled; the server cancelled the handler.
        await eventually(lambda: flag.read_text() == "cancelled")
        after = await hub.call("basic__echo", {"text": "still usable"})
        assert (after.text, after.is_error) == ("still usable", False)
        assert status_of(hub, "basic").status == "connected"


async def test_server_dying_mid_call_and_reconnect(marker: str) -> None:
    async with running([stdio("basic", "basic_server.py", marker=marker)]) as hub:
        result = await hub.call("basic__crash", {})
        assert result.is_error and "disconnected during the call" in result.text
        assert status_of(hub, "basic").status == "failed"
        await eventually(lambda: "crashing on purpose" in (status_of(hub, "basic").error or ""))
        assert hub.tools() == []
        gone = await hub.call("basic__echo", {"text": "x"})
        assert gone.is_error and "not connected" in gone.text

        status = await asyncio.wait_for(hub.reconnect("basic"), 30)
        assert status.status == "connected" and status.error is None
        back = await hub.call("basic__echo", {"text": "back"})
        assert (back.text, back.is_error) == ("back", False)


async def test_list_changed_refreshes_tools(marker: str) -> None:
    specs: list[McpServerSpec] = [
        stdio("basic", "basic_server.py", marker=marker),  # 2026-07-28: listen stream
        stdio("raw", "raw_server.py", marker=marker),  # 2025-06-18: plain notification
    ]
    async with running(specs) as hub:
        names = {tool.name for tool in hub.tools()}
        assert "basic__late" not in names and "raw__announced" not in names
        assert not (await hub.call("basic__add_tool", {"name": "late"})).is_error
        assert not (await hub.call("raw__announce", {})).is_error
        await eventually(lambda: {"basic__late", "raw__announced"} <= {t.name for t in hub.tools()})
        late = await hub.call("basic__late", {})
        assert (late.text, late.is_error) == ("added tool", False)


async def test_invalid_tool_schemas_are_skipped_with_notes(marker: str) -> None:
    async with running([stdio("raw", "raw_server.py", marker=marker)]) as hub:
        status = status_of(hub, "raw")
        assert status.status == "connected"
        names = {tool.tool: tool.name for tool in hub.tools()}
        assert set(names) == {"good", "announce", "weird name/with spaces"}
        assert VALID_NAME.match(names["weird name/with spaces"])
        notes = " | ".join(status.notes)
        for skipped in ("array_schema", "bad_properties", "bad_property", "no_schema"):
            assert skipped in notes
        called = await hub.call(names["weird name/with spaces"], {})
        assert called.text == "called weird name/with spaces"


async def test_five_hundred_tools(marker: str) -> None:
    async with running([stdio("many", "many_tools_server.py", marker=marker)]) as hub:
        assert status_of(hub, "many").tools == 500
        started = time.perf_counter()
        for _ in range(100):
            tools = hub.tools()
        assert time.perf_counter() - started < 0.5
        assert len({tool.name for tool in tools}) == 500
        result = await hub.call("many__tool_499", {"value": "v"})
        assert result.text == "tool 499: v"


# -- HTTP transports -------------------------------------------------------------------------


async def test_streamable_http_with_and_without_credentials(tmp_path: Path, marker: str) -> None:
    with http_server(tmp_path, marker, "--token", SECRET) as base:
        specs: list[McpServerSpec] = [
            HttpServer("anon", f"{base}/mcp"),
            HttpServer("authed", f"{base}/mcp", (("Authorization", f"Bearer {SECRET}"),)),
        ]
        async with running(specs, start_timeout=15.0) as hub:
            anon = status_of(hub, "anon")
            assert anon.status == "failed"
            assert "HTTP 401" in anon.error and "check the configured headers" in anon.error
            assert status_of(hub, "authed").status == "connected"
            result = await hub.call("authed__echo", {"text": "over http"})
            assert (result.text, result.is_error) == ("over http", False)
            assert SECRET not in repr(hub.statuses())


async def test_http_cancel_and_unreachable(tmp_path: Path, marker: str) -> None:
    flag = tmp_path / "sleep-flag"
    with http_server(tmp_path, marker) as base:
        specs: list[McpServerSpec] = [
            HttpServer("web", f"{base}/mcp"),
            HttpServer("down", "http://127.0.0.1:9/mcp"),
        ]
        async with running(specs, start_timeout=15.0, call_timeout=1.5) as hub:
            assert status_of(hub, "down").status == "failed"
            assert "connect" in status_of(hub, "down").error
            result = await hub.call("web__sleep", {"seconds": 60, "marker": str(flag)})
            assert result.is_error and "timed out" in result.text
            await eventually(lambda: flag.read_text() == "cancelled")
            after = await hub.call("web__echo", {"text": "ok"})
            assert after.text == "ok"


async def test_http_server_dying_mid_call(tmp_path: Path, marker: str) -> None:
    with http_server(tmp_path, marker) as base:
        async with running([HttpServer("web", f"{base}/mcp")], start_timeout=15.0) as hub:
            result = await hub.call("web__crash", {})
            assert result.is_error and "disconnected during the call" in result.text
            assert status_of(hub, "web").status == "failed"
            await eventually(lambda: "Server disconnected" in (status_of(hub, "web").error or ""))


async def test_sse_transport(tmp_path: Path, marker: str) -> None:
    with http_server(tmp_path, marker, "sse") as base:
        async with running([SseServer("old", f"{base}/sse")], start_timeout=15.0) as hub:
            assert status_of(hub, "old").status == "connected"
            result = await hub.call("old__echo", {"text": "over sse"})
            assert (result.text, result.is_error) == ("over sse", False)


# -- third-party servers ---------------------------------------------------------------------


async def test_mcp_server_time_and_git(tmp_path: Path, marker: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "README").write_text("hello\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (repo / "new.txt").write_text("untracked\n")
    env = ((MARKER_VAR, marker),)
    specs: list[McpServerSpec] = [
        StdioServer(
            "time", sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"), env
        ),
        StdioServer(
            "git", sys.executable, ("-m", "mcp_server_git", "--repository", str(repo)), env
        ),
    ]
    async with running(specs, start_timeout=20.0) as hub:
        assert [s.status for s in hub.statuses()] == ["connected", "connected"], hub.statuses()
        now = await hub.call("time__get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error and "Europe/Paris" in now.text
        assert tool_named(hub, "time__get_current_time").kind == "read"
        status = await hub.call("git__git_status", {"repo_path": str(repo)})
        assert not status.is_error and "new.txt" in status.text
    assert live_pids(marker) == []


# -- closing ---------------------------------------------------------------------------------


async def test_aclose_leaves_no_server_process(marker: str) -> None:
    specs: list[McpServerSpec] = [
        stdio("basic", "basic_server.py", "--spawn-child", marker=marker),
        stdio("many", "many_tools_server.py", marker=marker),
        stdio("exits", "exit_server.py", marker=marker),
    ]
    hub = McpHub(specs, start_timeout=15.0)
    await asyncio.wait_for(hub.start(), 60)
    # Two live servers and the child of one; the basic server exits promptly on EOF, so only
    # the hub's sweep of its process group stops the child.
    assert len(live_pids(marker)) == 3
    await asyncio.wait_for(hub.aclose(), 60)
    assert live_pids(marker) == []
    await asyncio.wait_for(hub.aclose(), 5)  # idempotent
    after = await hub.call("basic__echo", {"text": "x"})
    assert after.is_error and "closed" in after.text
    assert [s.status for s in hub.statuses()] == ["closed"] * 3


async def test_close_while_starting_leaves_nothing(marker: str) -> None:
    specs: list[McpServerSpec] = [
        stdio("basic", "basic_server.py", "--spawn-child", marker=marker),
        stdio("hang", "hang_server.py", marker=marker),
    ]
    hub = McpHub(specs, start_timeout=30.0)
    start = asyncio.create_task(hub.start())
    await eventually(lambda: len(live_pids(marker)) >= 2)
    start.cancel()  # the session went away while its runtime was starting
    with pytest.raises(asyncio.CancelledError):
        await start
    await asyncio.wait_for(hub.aclose(), 30)
    assert [s.status for s in hub.statuses()] == ["closed", "closed"]
    assert live_pids(marker) == []


async def test_concurrent_calls_on_one_server(marker: str) -> None:
    async with running([stdio("basic", "basic_server.py", marker=marker)]) as hub:
        results = await asyncio.gather(
            *(hub.call("basic__echo", {"text": f"call {i}"}) for i in range(40))
        )
        assert [r.text for r in results] == [f"call {i}" for i in range(40)]


async def test_close_mid_call_returns_an_error(tmp_path: Path, marker: str) -> None:
    flag = tmp_path / "sleep-flag"
    hub = McpHub([stdio("basic", "basic_server.py", marker=marker)])
    await asyncio.wait_for(hub.start(), 30)
    call = asyncio.create_task(hub.call("basic__sleep", {"seconds": 60, "marker": str(flag)}))
    await eventually(lambda: flag.exists())
    await asyncio.wait_for(hub.aclose(), 30)
    result = await asyncio.wait_for(call, 10)
    assert result.is_error and "closed during the call" in result.text
    assert live_pids(marker) == []


async def test_launcher_wraps_the_stdio_command(marker: str) -> None:
    seen: list[list[str]] = []

    def launcher(argv: list[str]) -> list[str]:
        seen.append(argv)
        return ["/usr/bin/env", "WRAPPED=1", *argv]

    async with running(
        [stdio("basic", "basic_server.py", marker=marker)], launcher=launcher
    ) as hub:
        assert status_of(hub, "basic").status == "connected"
    assert seen == [[sys.executable, str(SERVERS / "basic_server.py")]]
    assert live_pids(marker) == []
