"""The scripted ACP agent (tests/agents/scripted_agent.py), driven directly by the
official SDK's client side over a real subprocess's pipes.

Tests of the sidecar use that agent as an external engine and rely on each directive
and each env var doing what it says; these tests pin that down. The recording client
below is a real client: it writes and reads real files and runs real terminals.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ClientCapabilities,
    ConfigOptionUpdate,
    CreateTerminalResponse,
    CurrentModeUpdate,
    DeniedOutcome,
    FileEditToolCallContent,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    NewSessionResponse,
    PromptResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from pydantic import ValidationError

pytestmark = pytest.mark.timeout(30)

AGENT = Path(__file__).parent / "agents" / "scripted_agent.py"


@dataclass
class RecordingClient:
    """An ACP client that records what the agent sent and serves fs/terminal for real."""

    permission: str | None = "yes-once"  # the optionId chosen; None answers `cancelled`
    fs_error: str | None = None
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    read_for: list[str] = field(default_factory=list)  # the sessionId of each read
    terminals: list[dict[str, Any]] = field(default_factory=list)
    _procs: dict[str, tuple[asyncio.subprocess.Process, asyncio.Task[bytes]]] = field(
        default_factory=dict
    )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        if self.permission is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.permission)
        )

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        if self.fs_error is not None:
            raise RequestError(-32000, self.fs_error)
        self.writes.append((path, content))
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def read_text_file(
        self, session_id: str, path: str, **kwargs: Any
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        self.read_for.append(session_id)
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except OSError as exc:
            raise RequestError(-32002, f"cannot read {path}: {exc.strerror}") from None

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self.terminals.append({"command": command, "args": args, "cwd": cwd})
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert proc.stdout is not None
        terminal_id = f"term-{len(self.terminals)}"
        self._procs[terminal_id] = (proc, asyncio.ensure_future(proc.stdout.read()))
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        proc, _ = self._procs[terminal_id]
        return WaitForTerminalExitResponse(exit_code=await proc.wait())

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        proc, output = self._procs[terminal_id]
        return TerminalOutputResponse(
            output=(await output).decode(),
            truncated=False,
            exit_status={"exitCode": proc.returncode},
        )

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        proc, _ = self._procs.pop(terminal_id)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return ReleaseTerminalResponse()

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        proc, _ = self._procs[terminal_id]
        if proc.returncode is None:
            proc.kill()
        return KillTerminalResponse()

    def of(self, kind: type, session_id: str | None = None) -> list[Any]:
        return [u for s, u in self.updates if isinstance(u, kind) and session_id in (None, s)]

    def texts(self, session_id: str | None = None) -> list[str]:
        return [u.content.text for u in self.of(AgentMessageChunk, session_id)]


class TolerantTransport:
    """NDJSON over the agent's pipes that sets aside lines that are not JSON objects
    (the SDK's own reader would end the connection on `[1,2,3]`)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        self._stdout = proc.stdout
        self.stray: list[bytes] = []

    async def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message).encode() + b"\n")
        await self._stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._stdout.readline()
            if not line:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict):
                return message
            self.stray.append(line)

    async def close(self) -> None:
        self._stdin.close()


@dataclass
class Run:
    proc: asyncio.subprocess.Process
    conn: ClientSideConnection
    client: RecordingClient
    cwd: Path
    stderr: list[str]
    transport: TolerantTransport | None

    async def init(self, *, fs: bool = True, terminal: bool = True) -> Any:
        return await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
            ),
            client_info=Implementation(name="test-client", version="0"),
        )

    async def session(self, **caps: bool) -> str:
        await self.init(**caps)
        created: NewSessionResponse = await self.conn.new_session(cwd=str(self.cwd), mcp_servers=[])
        return created.session_id

    async def prompt(self, session_id: str, script: str) -> PromptResponse:
        return await self.conn.prompt(session_id=session_id, prompt=[text_block(script)])

    async def stderr_has(self, text: str) -> None:
        await until(lambda: any(text in line for line in self.stderr))


async def until(condition: Callable[[], bool]) -> None:
    """Wait for a condition the agent will make true (the test timeout bounds it)."""
    while not condition():
        await asyncio.sleep(0.01)


async def _collect(stream: asyncio.StreamReader, lines: list[str]) -> None:
    while line := await stream.readline():
        lines.append(line.decode(errors="replace").rstrip("\n"))


@asynccontextmanager
async def agent(
    tmp_path: Path, client: RecordingClient | None = None, *, tolerant: bool = False, **env: str
) -> AsyncIterator[Run]:
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(AGENT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
        limit=8 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr: list[str] = []
    reader = asyncio.ensure_future(_collect(proc.stderr, stderr))
    client = client or RecordingClient()
    transport = TolerantTransport(proc) if tolerant else None
    if transport is not None:
        conn = connect_to_agent(client, transport, use_unstable_protocol=True)
    else:
        conn = connect_to_agent(client, proc.stdin, proc.stdout, use_unstable_protocol=True)
    try:
        yield Run(proc, conn, client, cwd, stderr, transport)
    finally:
        await conn.close()
        if env.get("SCRIPTED_AGENT_IGNORE_EOF") == "1":
            proc.kill()
        elif proc.returncode is None:
            proc.stdin.close()  # EOF: the agent exits
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
        await proc.wait()
        await reader
    assert not [line for line in stderr if "Traceback" in line], "\n".join(stderr)


def log_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- lifecycle -------------------------------------------------------------------------


async def test_initialize_new_session_and_the_log(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    async with agent(tmp_path, SCRIPTED_AGENT_LOG=str(log)) as run:
        init = await run.init()
        caps = init.agent_capabilities
        assert init.agent_info.name == "scripted-agent" and init.agent_info.version == "1.0"
        assert caps.load_session is True
        assert (
            caps.session_capabilities.resume is not None
            and caps.session_capabilities.close is not None
        )
        assert caps.session_capabilities.list is None and caps.session_capabilities.fork is None
        created = await run.conn.new_session(cwd=str(run.cwd), mcp_servers=[])
        assert created.modes.current_mode_id == "default"
        assert [m.id for m in created.modes.available_modes] == ["default", "plan"]
        (model,) = created.config_options
        assert (model.id, model.current_value) == ("model", "fast")
        assert [o.value for o in model.options] == ["fast", "smart"]
        await run.stderr_has(f"scripted agent {run.proc.pid} started")
    entries = log_entries(log)
    assert [e["method"] for e in entries] == ["initialize", "session/new"]
    assert entries[0]["params"]["clientCapabilities"]["fs"]["writeTextFile"] is True
    assert entries[1]["params"] == {"cwd": str(run.cwd), "mcpServers": []}


async def test_caps_env_sets_the_session_capabilities(tmp_path: Path) -> None:
    async with agent(tmp_path, SCRIPTED_AGENT_CAPS="") as run:
        caps = (await run.init()).agent_capabilities
        assert caps.load_session is False
        s = caps.session_capabilities
        assert (s.list, s.fork, s.resume, s.close) == (None, None, None, None)
        with pytest.raises(RequestError) as err:
            await run.conn.load_session(cwd=str(run.cwd), session_id="x", mcp_servers=[])
        assert err.value.code == -32601
    async with agent(tmp_path, SCRIPTED_AGENT_CAPS="list,fork") as run:
        caps = (await run.init()).agent_capabilities
        s = caps.session_capabilities
        assert caps.load_session is False and s.resume is None and s.close is None
        assert s.list is not None and s.fork is not None


async def test_state_dir_load_replays_resume_does_not(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"SCRIPTED_AGENT_STATE": str(state), "SCRIPTED_AGENT_CAPS": "load,resume,list,fork,close"}
    async with agent(tmp_path, **env) as run:
        sid = await run.session()
        await run.prompt(sid, "say hi")
        assert run.proc.stdin is not None
        run.proc.stdin.close()
        assert await run.proc.wait() == 0  # stdin EOF: the agent exits
    assert json.loads((state / f"{sid}.json").read_text())["cwd"] == str(run.cwd)
    async with agent(tmp_path, **env) as run:
        await run.init()
        await run.conn.load_session(cwd=str(run.cwd), session_id=sid, mcp_servers=[])
        replay = [(type(u), u.content.text) for _, u in run.client.updates]
        assert replay == [(UserMessageChunk, "say hi"), (AgentMessageChunk, "hi")]
        await run.conn.resume_session(cwd=str(run.cwd), session_id=sid, mcp_servers=[])
        assert len(run.client.updates) == 2
        with pytest.raises(RequestError) as err:
            await run.conn.resume_session(
                cwd=str(run.cwd), session_id="sess-unknown", mcp_servers=[]
            )
        assert err.value.code == -32002
        listed = await run.conn.list_sessions()
        assert [(s.session_id, s.cwd) for s in listed.sessions] == [(sid, str(run.cwd))]
        fork = await run.conn.fork_session(cwd=str(run.cwd), session_id=sid, mcp_servers=[])
        assert fork.session_id != sid
        run.client.updates.clear()
        await run.conn.load_session(cwd=str(run.cwd), session_id=fork.session_id, mcp_servers=[])
        assert [u.content.text for _, u in run.client.updates] == ["say hi", "hi"]
        await run.conn.close_session(session_id=sid)


async def test_mode_and_config_option_notify(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        await run.conn.set_session_mode(session_id=sid, mode_id="plan")
        changed = await run.conn.set_config_option(config_id="model", session_id=sid, value="smart")
        assert changed.config_options[0].current_value == "smart"
        assert [u.current_mode_id for u in run.client.of(CurrentModeUpdate)] == ["plan"]
        (update,) = run.client.of(ConfigOptionUpdate)
        assert update.config_options[0].current_value == "smart"
        with pytest.raises(RequestError) as err:
            await run.conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert err.value.code == -32602


@pytest.mark.parametrize(
    ("fail", "code", "message"),
    [
        ("initialize-exit", 3, "scripted agent: failing at initialize"),
        ("new-exit", 4, "scripted agent: failing at session/new"),
    ],
)
async def test_fail_exit_modes(tmp_path: Path, fail: str, code: int, message: str) -> None:
    async with agent(tmp_path, SCRIPTED_AGENT_FAIL=fail) as run:
        with pytest.raises(ConnectionError):
            await run.session()
        assert await run.proc.wait() == code
        await run.stderr_has(message)


@pytest.mark.parametrize("fail", ["initialize-hang", "new-hang"])
async def test_fail_hang_modes_never_answer(tmp_path: Path, fail: str) -> None:
    log = tmp_path / "agent.jsonl"
    async with agent(tmp_path, SCRIPTED_AGENT_FAIL=fail, SCRIPTED_AGENT_LOG=str(log)) as run:
        if fail == "new-hang":
            await run.init()
        call = run.session() if fail == "new-hang" else run.init()
        task = asyncio.ensure_future(call)
        method = "session/new" if fail == "new-hang" else "initialize"
        await until(lambda: log.exists() and method in log.read_text())
        # A later request is answered: the agent is alive and past it, the hung one is not.
        await run.conn.authenticate(method_id="none")
        assert not task.done() and run.proc.returncode is None
        task.cancel()


async def test_ignore_eof_keeps_the_process(tmp_path: Path) -> None:
    async with agent(tmp_path, SCRIPTED_AGENT_IGNORE_EOF="1") as run:
        await run.init()
        assert run.proc.stdin is not None
        run.proc.stdin.close()
        await run.stderr_has("stdin closed, staying alive")
        assert run.proc.returncode is None


async def test_ignore_term_survives_sigterm_and_sigint(tmp_path: Path) -> None:
    async with agent(tmp_path, SCRIPTED_AGENT_IGNORE_TERM="1") as run:
        await run.stderr_has("started")
        run.proc.send_signal(signal.SIGTERM)
        run.proc.send_signal(signal.SIGINT)
        await run.session()  # answered after both signals were sent: it is alive
        assert run.proc.returncode is None


# -- directives ------------------------------------------------------------------------


async def test_talk_directives_in_order_and_stop(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        script = "think hmm\nsay hello \nplan A | B | C\nusage 10 5\ncommands\nnot a directive\nstop max_tokens\nsay never"
        reply = await run.prompt(sid, script)
        assert reply.stop_reason == "max_tokens"
        assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.total_tokens) == (
            10,
            5,
            15,
        )
        kinds = [type(u) for _, u in run.client.updates]
        assert kinds == [
            AgentThoughtChunk,
            AgentMessageChunk,
            AgentPlanUpdate,
            UsageUpdate,
            AvailableCommandsUpdate,
            AgentMessageChunk,
        ]
        assert run.client.of(AgentThoughtChunk)[0].content.text == "hmm"
        assert run.client.texts() == ["hello ", "echo: not a directive"]
        (plan,) = run.client.of(AgentPlanUpdate)
        assert [(e.content, e.status) for e in plan.entries] == [
            ("A", "in_progress"),
            ("B", "pending"),
            ("C", "pending"),
        ]
        assert run.client.of(UsageUpdate)[0].used == 15
        assert [c.name for c in run.client.of(AvailableCommandsUpdate)[0].available_commands] == [
            "hello",
            "bye",
        ]


async def test_stop_with_an_unknown_reason_sends_it_as_is(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        with pytest.raises(ValidationError, match="stopReason"):
            await run.prompt(sid, "stop bogus")


async def test_plain_text_is_echoed(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        reply = await run.prompt(sid, "hi there\nfriend")
        assert reply.stop_reason == "end_turn"
        assert run.client.texts() == ["echo: hi there\nfriend"]


async def test_write_through_fs_asks_and_reports(tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    async with agent(tmp_path, SCRIPTED_AGENT_LOG=str(log)) as run:
        sid = await run.session()
        target = run.cwd / "f.txt"
        target.write_text("old")
        await run.prompt(sid, "write f.txt new text")
        (start,) = run.client.of(ToolCallStart)
        assert (start.tool_call_id, start.kind, start.title) == ("call-1", "edit", "Write f.txt")
        assert [loc.path for loc in start.locations] == [str(target)]
        (diff,) = start.content
        assert isinstance(diff, FileEditToolCallContent)
        assert (diff.old_text, diff.new_text) == ("old", "new text")
        (asked, options) = run.client.permissions[0]
        assert asked.tool_call_id == "call-1"
        assert [(o.option_id, o.kind) for o in options] == [
            ("yes-once", "allow_once"),
            ("yes-always", "allow_always"),
            ("no-once", "reject_once"),
            ("no-always", "reject_always"),
        ]
        assert run.client.writes == [(str(target), "new text")]
        assert run.client.of(ToolCallProgress)[-1].status == "completed"
        answers = [e for e in log_entries(log) if "response_to" in e]
        assert answers == [
            {
                "response_to": "session/request_permission",
                "result": {"outcome": {"outcome": "selected", "optionId": "yes-once"}},
            },
            {"response_to": "fs/write_text_file", "result": {}},
        ]

        run.client.permission = "no-once"
        await run.prompt(sid, "write g.txt nope")
        start = run.client.of(ToolCallStart)[-1]
        assert start.tool_call_id == "call-2" and start.content[0].old_text is None
        last = run.client.of(ToolCallProgress)[-1]
        assert (last.status, last.content[0].content.text) == ("failed", "rejected")
        assert not (run.cwd / "g.txt").exists()

        run.client.permission = None  # the client answers `cancelled`
        await run.prompt(sid, "write g.txt nope")
        assert run.client.of(ToolCallProgress)[-1].status == "failed"
        assert not (run.cwd / "g.txt").exists()


async def test_write_without_fs_capability_writes_itself(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session(fs=False)
        await run.prompt(sid, "write sub.txt direct")
        assert (run.cwd / "sub.txt").read_text() == "direct"
        assert run.client.writes == []
        assert run.client.of(ToolCallProgress)[-1].status == "completed"


async def test_write_fs_error_fails_with_its_message(tmp_path: Path) -> None:
    client = RecordingClient(fs_error="outside the workspace")
    async with agent(tmp_path, client) as run:
        sid = await run.session()
        await run.prompt(sid, "write /etc/nope x")
        last = run.client.of(ToolCallProgress)[-1]
        assert (last.status, last.content[0].content.text) == ("failed", "outside the workspace")


async def test_shell_write_uses_its_own_open(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()  # fs/* offered, and still not used
        await run.prompt(sid, "shell-write out.txt shell text")
        (start,) = run.client.of(ToolCallStart)
        assert (start.kind, start.title) == ("execute", "echo > out.txt")
        assert (run.cwd / "out.txt").read_text() == "shell text"
        assert run.client.writes == []
        assert run.client.of(ToolCallProgress)[-1].status == "completed"
        await run.prompt(sid, "shell-write missing/dir/out.txt x")
        last = run.client.of(ToolCallProgress)[-1]
        assert (
            last.status == "failed" and "No such file or directory" in last.content[0].content.text
        )


@pytest.mark.parametrize("fs", [True, False])
async def test_read(tmp_path: Path, fs: bool) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session(fs=fs)
        (run.cwd / "in.txt").write_text("content")
        await run.prompt(sid, "read in.txt\nread absent.txt")
        texts = run.client.texts()
        assert texts[0] == "read: content"
        assert texts[1].startswith("read failed: ") and "absent.txt" in texts[1]
        assert [u.kind for u in run.client.of(ToolCallStart)] == ["read", "read"]
        assert [u.status for u in run.client.of(ToolCallProgress)] == ["completed", "failed"]
        assert bool(run.client.reads) is fs


async def test_run_uses_the_clients_terminal(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        await run.prompt(sid, "run echo hi; pwd")
        assert run.client.terminals == [
            {"command": "bash", "args": ["-c", "echo hi; pwd"], "cwd": str(run.cwd)}
        ]
        expected = f"hi\n{run.cwd}\n"
        assert run.client.texts() == [f"ran: {expected}"]
        assert run.client.of(ToolCallStart)[0].kind == "execute"
        last = run.client.of(ToolCallProgress)[-1]
        assert (last.status, last.content[0].content.text) == ("completed", expected)


async def test_run_without_terminal_fails(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session(terminal=False)
        await run.prompt(sid, "run echo hi")
        assert run.client.terminals == []
        assert run.client.of(ToolCallProgress)[-1].status == "failed"
        assert run.client.texts()[0].startswith("run failed: ")


@pytest.mark.parametrize("waiting", ["sleep 60", "wait-cancel"])
async def test_cancel_ends_the_turn_cancelled(tmp_path: Path, waiting: str) -> None:
    log = tmp_path / "agent.jsonl"
    async with agent(tmp_path, SCRIPTED_AGENT_LOG=str(log)) as run:
        sid = await run.session()
        turn = asyncio.ensure_future(run.prompt(sid, f"say before\n{waiting}\nsay after"))
        await until(lambda: run.client.texts() == ["before"])
        await run.conn.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"
        assert run.client.texts() == ["before"]
    assert {"method": "session/cancel", "params": {"sessionId": sid}} in log_entries(log)


async def test_one_process_serves_several_sessions_each_its_own(tmp_path: Path) -> None:
    """A shared agent process: concurrent turns, each session's updates under its own id,
    a cancel reaching only the session it names, a stubborn turn leaving the others be."""
    log = tmp_path / "agent.jsonl"
    async with agent(tmp_path, SCRIPTED_AGENT_LOG=str(log)) as run:
        first = await run.session()
        second = (await run.conn.new_session(cwd=str(run.cwd), mcp_servers=[])).session_id
        assert first != second
        turns = await asyncio.gather(run.prompt(first, "say one"), run.prompt(second, "say two"))
        assert [t.stop_reason for t in turns] == ["end_turn", "end_turn"]
        assert run.client.texts(first) == ["one"] and run.client.texts(second) == ["two"]
        waiting = asyncio.ensure_future(run.prompt(first, "say a\nwait-cancel"))
        working = asyncio.ensure_future(run.prompt(second, "say b\nsleep 0.5\nsay b-done"))
        await until(lambda: "a" in run.client.texts(first))
        await run.conn.cancel(session_id=first)
        assert (await waiting).stop_reason == "cancelled"
        assert (await working).stop_reason == "end_turn"
        assert run.client.texts(second)[-1] == "b-done"
        # A turn that ignores its cancel runs on; the other session is not held up.
        stubborn = asyncio.ensure_future(run.prompt(first, "say c\nignore-cancel 600\nsay c"))
        await until(lambda: "c" in run.client.texts(first))
        await run.conn.cancel(session_id=first)
        assert (await run.prompt(second, "say meanwhile")).stop_reason == "end_turn"
        assert not stubborn.done()  # it sleeps on, for longer than the test may run
        stubborn.cancel()
    cancels = [e["params"] for e in log_entries(log) if e.get("method") == "session/cancel"]
    assert cancels == [{"sessionId": first}, {"sessionId": first}]


async def test_commands_on_new_come_before_the_answer(tmp_path: Path) -> None:
    async with agent(tmp_path, SCRIPTED_AGENT_COMMANDS_ON_NEW="1") as run:
        await run.init()
        created = await run.conn.new_session(cwd=str(run.cwd), mcp_servers=[])
        (update,) = run.client.of(AvailableCommandsUpdate, created.session_id)
        assert [c.name for c in update.available_commands] == ["hello", "bye"]


async def test_read_as_names_another_session_in_its_request(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        (run.cwd / "f.txt").write_text("text")
        await run.prompt(sid, "read-as someone-else f.txt")
        assert run.client.read_for == ["someone-else"]
        assert run.client.texts() == ["read-as: text"]
        await run.prompt(sid, "read-as someone-else missing.txt")
        assert run.client.texts()[-1].startswith("read-as failed: -32002 ")


async def test_crash_exits_7_mid_turn(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        with pytest.raises(ConnectionError):
            await run.prompt(sid, "say before\ncrash\nsay after")
        assert await run.proc.wait() == 7
        assert run.client.texts() == ["before"]
        await run.stderr_has("scripted agent: crashing mid-turn")


async def test_garbage_lines_land_whole_between_frames(tmp_path: Path) -> None:
    async with agent(tmp_path, tolerant=True) as run:
        sid = await run.session()
        reply = await run.prompt(sid, "say before\ngarbage\nsay after")
        assert reply.stop_reason == "end_turn"
        assert run.transport is not None
        assert run.transport.stray == [b"this is not json\n", b"[1,2,3]\n"]
        assert run.client.texts() == ["before", "after"]


async def test_bigline_is_one_megabyte_chunk(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        await run.prompt(sid, "bigline")
        assert run.client.texts() == ["x" * 1_000_000]


async def test_protocol_faults(tmp_path: Path) -> None:
    async with agent(tmp_path, RecordingClient(permission="yes-always")) as run:
        sid = await run.session()
        await run.prompt(sid, "unknown-request\nother-session\nunannounced-permission")
        assert run.client.texts(sid) == [
            "unknown-request: -32601",
            "unannounced-permission: selected yes-always",
        ]
        assert run.client.texts("not-this-session") == ["leak"]
        (asked, _) = run.client.permissions[0]
        assert asked.tool_call_id == "never-announced"
        assert run.client.of(ToolCallStart) == []


async def test_daemon_is_detached(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        await run.prompt(sid, "daemon daemon.pid")
        pid = int((run.cwd / "daemon.pid").read_text())
        try:
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x001000\x00"
            assert os.getsid(pid) == pid != os.getsid(run.proc.pid)
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[1]) != run.proc.pid  # its parent is not the agent
        finally:
            os.kill(pid, signal.SIGKILL)


async def test_exit_after_reply(tmp_path: Path) -> None:
    async with agent(tmp_path) as run:
        sid = await run.session()
        reply = await run.prompt(sid, "say bye\nexit-after-reply")
        assert reply.stop_reason == "end_turn"
        assert run.client.texts() == ["bye"]
        assert await run.proc.wait() == 0
