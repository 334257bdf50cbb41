"""Real ACP agents from npm (claude-agent-acp, codex-acp) complete a tool-call turn offline.

Each agent is driven directly with the official Python ACP SDK's client side, inside a
network namespace where only loopback is up and the fake model server is the one thing
listening (tests/agents/netns.py). A turn: initialize, session/new, a prompt, the scripted
tool call that writes hello.txt (the client allows it when asked), end_turn. The agent
must have reached nothing but the model server (no unknown path, no DNS lookup), and
after closing (stdin EOF, SIGTERM, SIGKILL to its process group) none of its processes
may remain. Proves the infrastructure the sidecar's external-agent engine is tested on.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TextContentBlock,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from agents.model_servers import ServerControl
from agents.netns import Netns
from agents.real_agents import Launch, claude_launch, codex_launch, ensure_installed, pids_with

MODEL_SERVERS = Path(__file__).parent / "agents" / "model_servers.py"
TEXT = "hello from the scripted model\n"
WAIT = 60.0


@dataclass
class Terminal:
    process: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    reader: asyncio.Task[None] | None = None


class AgentClient:
    """The client side: records updates, allows what is asked, serves fs and terminals
    (commands run inside the same namespace, so a terminal cannot leave loopback either)."""

    def __init__(self, ns: Netns) -> None:
        self.ns = ns
        self.updates: list[Any] = []
        self.permissions: list[list[PermissionOption]] = []
        self.writes: list[str] = []
        self.terminals: dict[str, Terminal] = {}

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(options)
        allow = [o for o in options if o.kind == "allow_once"] or [
            o for o in options if o.kind.startswith("allow")
        ]
        if not allow:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow[0].option_id)
        )

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append(path)
        Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return ReadTextFileResponse(content="".join(lines[start:end]))

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        argv = self.ns.enter([command, *(args or [])], Path(cwd or "/"))
        extra = {v.name: v.value for v in env or []}
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=os.environ | extra,
            start_new_session=True,
        )
        terminal = Terminal(process)
        terminal.reader = asyncio.create_task(self._read(terminal))
        terminal_id = f"term-{len(self.terminals)}"
        self.terminals[terminal_id] = terminal
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def _read(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        while chunk := await terminal.process.stdout.read(65536):
            terminal.output += chunk

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        t = self.terminals[terminal_id]
        status = None if t.process.returncode is None else exit_status(t.process.returncode)
        text = t.output.decode("utf-8", "replace")
        return TerminalOutputResponse(output=text, truncated=False, exit_status=status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        status = exit_status(await self.terminals[terminal_id].process.wait())
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.terminals[terminal_id].process.pid, signal.SIGKILL)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        await self.kill_terminal(session_id, terminal_id)
        await self.terminals.pop(terminal_id).process.wait()
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, message: str, mode: Any, **kwargs: Any
    ) -> CreateElicitationResponse:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def exit_status(returncode: int) -> TerminalExitStatus:
    if returncode < 0:
        return TerminalExitStatus(signal=signal.Signals(-returncode).name)
    return TerminalExitStatus(exit_code=returncode)


@dataclass
class World:
    """One namespace with a model server in it, and the paths of this test."""

    ns: Netns
    control: ServerControl
    base_url: str
    tmp: Path
    workspace: Path


@pytest.fixture(scope="module")
def installed() -> Path:
    return ensure_installed()


async def start_world(kind: str, tmp: Path) -> World:
    sock = tmp / "control.sock"
    ns = Netns.start([sys.executable, str(MODEL_SERVERS), kind, "--control", str(sock)], tmp)
    try:
        await asyncio.to_thread(ns.wait_for, sock)
        control = ServerControl(sock)
        workspace = tmp / "workspace"
        workspace.mkdir()
        return World(ns, control, await control.base_url(), tmp, workspace)
    except BaseException:
        ns.stop()
        raise


@pytest.fixture
async def anthropic_world(installed: Path, tmp_path: Path) -> AsyncIterator[World]:
    world = await start_world("anthropic", tmp_path)
    yield world
    world.ns.stop()


@pytest.fixture
async def responses_world(installed: Path, tmp_path: Path) -> AsyncIterator[World]:
    world = await start_world("responses", tmp_path)
    yield world
    world.ns.stop()


def host_address() -> str | None:
    """This machine's own non-loopback IPv4 address (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.1", 80))
        except OSError:
            return None
        return str(s.getsockname()[0])


def check_isolated(world: World) -> None:
    port = int(world.base_url.rsplit(":", 1)[1])
    assert world.ns.probe("127.0.0.1", port) == "connected"
    unreachable = str(errno.ENETUNREACH)
    assert world.ns.probe("10.255.255.1", 80) == unreachable
    assert world.ns.probe("2001:db8::1", 80) == unreachable
    if (own := host_address()) is not None:
        assert world.ns.probe(own, 80) == unreachable


@dataclass
class Turn:
    init: Any
    stop_reason: str
    client: AgentClient
    stderr: str


async def close_agent(process: asyncio.subprocess.Process, marker: str) -> None:
    """stdin EOF, then SIGTERM, then SIGKILL, each to the whole process group; then no
    process carrying the marker may remain (reaped or not)."""
    assert process.stdin is not None
    process.stdin.close()
    for sig, grace in ((None, 2.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace)
            if not pids_with(marker):
                break
    for _ in range(50):  # orphans are reaped by init, not at once
        if not (left := pids_with(marker)):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"agent processes left after SIGKILL: {left}")


async def run_turn(world: World, launch: Launch, prompt: str) -> Turn:
    marker = f"AGENT_TEST_MARKER={uuid.uuid4()}"
    env = launch.env | dict([marker.split("=", 1)])
    client = AgentClient(world.ns)
    stderr_path = world.tmp / "agent.stderr"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *world.ns.enter(launch.argv, world.workspace),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
    assert process.stdin is not None and process.stdout is not None
    conn: ClientSideConnection = connect_to_agent(client, process.stdin, process.stdout)
    try:
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=Implementation(name="real-agents-test", version="0"),
            ),
            WAIT,
        )
        session = await asyncio.wait_for(conn.new_session(cwd=str(world.workspace)), WAIT)
        done = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text=prompt)]
            ),
            WAIT,
        )
        stop_reason = done.stop_reason
    finally:
        await conn.close()
        await close_agent(process, marker)
    return Turn(init, stop_reason, client, stderr_path.read_text(errors="replace"))


async def check_reached_only_the_model(world: World, model_path: str) -> list[dict[str, Any]]:
    calls = await world.control.calls()
    unknown = [(c["method"], c["path"]) for c in calls if not c["known"]]
    assert unknown == [], f"the agent called paths the fake does not serve: {unknown}"
    assert any(c["path"] == model_path for c in calls), [c["path"] for c in calls]
    looked_up = await world.control.dns()
    assert looked_up == [], f"the agent looked up hosts (tried to leave loopback): {looked_up}"
    return calls


def report(name: str, turn: Turn, calls: list[dict[str, Any]]) -> None:
    """What the agent advertised, asked and sent, for whoever reads the test's output."""
    summary = {
        "agent": name,
        "initialize": turn.init.model_dump(mode="json", by_alias=True, exclude_none=True),
        "permission_options": [
            [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in opts]
            for opts in turn.client.permissions
        ],
        "client_writes": turn.client.writes,
        "calls": [f"{c['method']} {c['path']}?{c['query']}" for c in calls],
    }
    print(json.dumps(summary, indent=1))


async def test_claude_agent_acp_writes_a_file_offline(anthropic_world: World) -> None:
    world = anthropic_world
    check_isolated(world)
    target = world.workspace / "hello.txt"
    await world.control.script(
        {"type": "tool_use", "name": "Write", "input": {"file_path": str(target), "content": TEXT}},
        {"type": "text", "text": "Wrote hello.txt."},
    )
    turn = await run_turn(
        world, claude_launch(world.tmp / "home", world.base_url), "write hello.txt"
    )
    calls = await check_reached_only_the_model(world, "/v1/messages")
    report("claude-agent-acp", turn, calls)
    assert turn.stop_reason == "end_turn", turn.stderr[-3000:]
    assert target.read_text(encoding="utf-8") == TEXT
    assert turn.client.permissions, "the agent wrote without asking"
    assert turn.init.agent_capabilities is not None


async def test_codex_acp_writes_a_file_offline(responses_world: World) -> None:
    world = responses_world
    check_isolated(world)
    target = world.workspace / "hello.txt"
    patch = f"*** Begin Patch\n*** Add File: {target}\n+{TEXT.rstrip()}\n*** End Patch\n"
    await world.control.script(
        {"type": "apply_patch", "input": patch}, {"type": "text", "text": "Wrote hello.txt."}
    )
    turn = await run_turn(
        world, codex_launch(world.tmp / "home", world.base_url), "write hello.txt"
    )
    calls = await check_reached_only_the_model(world, "/v1/responses")
    report("codex-acp", turn, calls)
    assert turn.stop_reason == "end_turn", turn.stderr[-3000:]
    assert target.read_text(encoding="utf-8") == TEXT
    assert turn.client.permissions, "the agent wrote without asking"
    assert turn.init.agent_capabilities is not None


async def test_codex_acp_runs_a_shell_command_in_its_own_sandbox(responses_world: World) -> None:
    # As root in the namespace, codex runs the command under its bwrap + seccomp sandbox
    # (read-only filesystem, no sockets) without asking; the output goes back to the model.
    world = responses_world
    target = world.workspace / "shell.txt"
    command = f"echo ran-$((6*7)); echo shell > {target}"
    await world.control.script(
        {"type": "function_call", "name": "exec_command", "arguments": {"cmd": command}},
        {"type": "text", "text": "Ran it."},
    )
    turn = await run_turn(world, codex_launch(world.tmp / "home", world.base_url), "run it")
    calls = await check_reached_only_the_model(world, "/v1/responses")
    report("codex-acp shell", turn, calls)
    assert turn.stop_reason == "end_turn", turn.stderr[-3000:]
    outputs = [
        item["output"]
        for item in calls[-1]["body"]["input"]
        if item.get("type") == "function_call_output"
    ]
    assert len(outputs) == 1 and "ran-42" in outputs[0], outputs
    assert "Read-only file system" in outputs[0], outputs
    assert not target.exists()
