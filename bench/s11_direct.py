"""Scenario 11's direct side: the scripted ACP agent (tests/agents/scripted_agent.py) driven
with no host between, by the acp SDK's own client (`connect_to_agent`: one session, or as
many as wanted on one connection) and by the bench's blocking pipe client, plus the
agents.toml that hands the same agent to the sidecar (as `scripted`, one process per
session, and as `scripted-shared`, declared `shared_process`) and the RSS of the
processes each side leaves running.

The agent runs as `python scripted_agent.py` in both places; through the sidecar it is
also wrapped in bubblewrap (what the host adds to an agent's start is part of the ratio).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any, cast

from acp import PROTOCOL_VERSION, Client, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    TextContentBlock,
)

from bench.core import REPO
from bench.pipes import PipeClient, prompt_params

SCRIPTED = REPO / "tests" / "agents" / "scripted_agent.py"
NAME = "scripted"
SHARED_NAME = "scripted-shared"  # the same agent, declared shared_process
MARKER = "BENCH_S11_MARKER"  # in every agent's env: finds bwrap and the agent by /proc


def _toml(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def agent_env(root: Path, marker: str) -> dict[str, str]:
    """What the agent gets on either side beyond the inherited environment: a state dir
    (the scripted agent saves each session there on every turn) and the marker."""
    state = root / "agent-state"
    state.mkdir(parents=True, exist_ok=True)
    return {"SCRIPTED_AGENT_STATE": str(state), MARKER: marker}


def agents_toml(root: Path, marker: str, shared_marker: str | None = None) -> Path:
    """An agents.toml naming the scripted agent `scripted`, its state dir outside any
    workspace (writable for it, as tests/external_agents.py `AgentSetup` does); with
    `shared_marker`, also `scripted-shared`: the same agent declared `shared_process`,
    found by that marker."""
    tables = [_table(NAME, agent_env(root, marker))]
    if shared_marker is not None:
        tables.append(_table(SHARED_NAME, agent_env(root, shared_marker), shared=True))
    path = root / "agents.toml"
    path.write_text("\n".join(tables))
    return path


def _table(name: str, env: dict[str, str], *, shared: bool = False) -> str:
    values = ", ".join(f"{k} = {_toml(v)}" for k, v in env.items())
    return (
        f"[agents.{name}]\n"
        f"command = [{_toml(sys.executable)}, {_toml(str(SCRIPTED))}]\n"
        f"env = {{ {values} }}\n"
        f"writable = [{_toml(env['SCRIPTED_AGENT_STATE'])}]\n"
        + ("shared_process = true\n" if shared else "")
    )


def new_marker() -> str:
    return uuid.uuid4().hex


def marked(marker: str) -> list[int]:
    """Live processes whose environment holds MARKER=marker (zombies left out)."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


def rss_kib(pid: int) -> int:
    """VmRSS of one process, KiB (0 for one already gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


class TextClient:
    """The least an ACP client needs for a text turn: it keeps what the agent says (every
    other client method is absent, so the SDK answers `method not found`)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock):
            self.texts.append(update.content.text)


class SdkAgent:
    """One agent process and the SDK client's connection to it."""

    def __init__(self, cwd: Path, log: IO[bytes], env: dict[str, str]) -> None:
        self.cwd = cwd
        self._log = log
        self._env = env
        self.client = TextClient()
        self.process: asyncio.subprocess.Process | None = None
        self.conn: ClientSideConnection | None = None
        self.session_id = ""

    async def start(self) -> float:
        """Spawn, `initialize` (offering what the sidecar offers: fs and terminals) and
        `session/new`; ms from the spawn to the session's answer."""
        started = time.perf_counter_ns()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPTED),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log,
            cwd=self.cwd,
            env={**os.environ, **self._env},
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        client = cast(Client, self.client)
        self.conn = connect_to_agent(
            client, self.process.stdin, self.process.stdout, use_unstable_protocol=True
        )
        await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            ),
            client_info=Implementation(name="bench-direct", version="0"),
        )
        created = await self.conn.new_session(cwd=str(self.cwd), mcp_servers=[])
        self.session_id = created.session_id
        return (time.perf_counter_ns() - started) / 1e6

    async def open(self) -> tuple[float, str]:
        """One more session on the same connection: ms to `session/new` answered, its id."""
        assert self.conn is not None
        started = time.perf_counter_ns()
        created = await self.conn.new_session(cwd=str(self.cwd), mcp_servers=[])
        return (time.perf_counter_ns() - started) / 1e6, created.session_id

    async def turn(self, text: str, session_id: str | None = None) -> tuple[float, str]:
        """ms from `session/prompt` sent to its answer, and the stop reason (the first
        session's, unless `session_id` names another)."""
        assert self.conn is not None
        started = time.perf_counter_ns()
        answer = await self.conn.prompt(
            session_id=session_id or self.session_id, prompt=[text_block(text)]
        )
        return (time.perf_counter_ns() - started) / 1e6, str(answer.stop_reason)

    async def close(self) -> float:
        """End the connection and the process (EOF, as the agent expects); ms it took."""
        started = time.perf_counter_ns()
        if self.conn is not None:
            await self.conn.close()
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return (time.perf_counter_ns() - started) / 1e6


class PipeAgent:
    """The same agent driven by the bench's blocking pipe client (bench/pipes.py), the
    client the sidecar side is driven with: equal client costs on both sides."""

    def __init__(self, cwd: Path, log: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self._log = log
        self._env = env
        self.client: PipeClient | None = None
        self.session_id = ""

    def start(self) -> float:
        started = time.perf_counter_ns()
        self.client = PipeClient([sys.executable, str(SCRIPTED)], self._log, self._env)
        self.client.call(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": True, "writeTextFile": True},
                    "terminal": True,
                },
                "clientInfo": {"name": "bench-pipe", "version": "0"},
            },
        )
        created = self.client.call("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        self.session_id = str(created["sessionId"])
        return (time.perf_counter_ns() - started) / 1e6

    def turn(self, text: str) -> tuple[float, str]:
        assert self.client is not None
        took, answer = self.client.timed("session/prompt", prompt_params(self.session_id, text))
        return took / 1000.0, str(answer.get("stopReason"))

    def close(self) -> float:
        started = time.perf_counter_ns()
        if self.client is not None:
            self.client.close(10)
        return (time.perf_counter_ns() - started) / 1e6
