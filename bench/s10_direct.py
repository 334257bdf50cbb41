"""Scenario 10, in this process: the floors and peers the sidecar's figures are set beside.

Command start: the same `true` spawned bare and through bubblewrap, blocking
(`subprocess.run`, stdin /dev/null, a new session, as the sidecar spawns a command), in
shuffled interleaved batches (bench/core.py `interleaved`). The ladder goes from `true`
alone to exactly what the agent's `bash` tool runs (sidecar/agent/sandbox.py `wrap` of
`bash -c true`, sandbox `workspace` and `off`), one step at a time, so the table says
which part of bubblewrap's setup costs what.

MCP: the MCP SDK's own client (`mcp.Client` over `stdio_client`, as sidecar/agent/mcp
connects) calling `echo` on its own copy of bench/s10_mcp_server.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mcp import Client, StdioServerParameters

from sidecar.agent.sandbox import SandboxMode, wrap

SERVER = Path(__file__).resolve().parent / "s10_mcp_server.py"

TRUE = "floor: true"
BASH = "bash -c true (no sandbox)"
BWRAP = "floor: bwrap --ro-bind / / true"
PID = "+ --unshare-pid --die-with-parent"
MOUNTS = "+ the workspace mounts and --unshare-ipc --cap-drop ALL (true)"
WRAPPED = "wrap(workspace) of true (+ the /bin/sh and env signal shims)"
WORKSPACE = "wrap(workspace) of bash -c true (the bash tool, sandbox workspace)"
OFF = "wrap(off) of bash -c true (the bash tool, sandbox off)"
LADDER = (TRUE, BASH, BWRAP, PID, MOUNTS, WRAPPED, WORKSPACE, OFF)


def ladder(cwd: Path, bwrap: str) -> dict[str, list[str]]:
    real = str(cwd.resolve())
    workspace = wrap(["true"], mode=SandboxMode.WORKSPACE, cwd=real, bwrap=bwrap)
    # The workspace wrap without its two shims: bwrap's own arguments, then `true`.
    start = workspace.index(bwrap)
    mounts = [*workspace[start : workspace.index("--", start + 1) + 1], "true"]
    bash = ["bash", "-c", "true"]
    return {
        TRUE: ["true"],
        BASH: bash,
        BWRAP: [bwrap, "--ro-bind", "/", "/", "true"],
        PID: [bwrap, "--ro-bind", "/", "/", "--die-with-parent", "--unshare-pid", "true"],
        MOUNTS: mounts,
        WRAPPED: workspace,
        WORKSPACE: wrap(bash, mode=SandboxMode.WORKSPACE, cwd=real, bwrap=bwrap),
        OFF: wrap(bash, mode=SandboxMode.OFF, cwd=real, bwrap=bwrap),
    }


def spawn_probe(argv: list[str], cwd: Path, problems: list[str]) -> Callable[[], float]:
    def probe() -> float:
        started = time.perf_counter_ns()
        done = subprocess.run(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        took = (time.perf_counter_ns() - started) / 1e6
        if done.returncode != 0 and len(problems) < 5:
            problems.append(f"{argv[:3]}… exited {done.returncode}: {done.stderr[-200:]!r}")
        return took

    return probe


class McpPeer:
    """The MCP SDK client on its own server process; enter and call inside one event loop."""

    def __init__(self) -> None:
        self._client: Client | None = None
        self.connect_ms = 0.0

    async def __aenter__(self) -> McpPeer:
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
        # The sidecar's hub builds its client with cache=None (sidecar/agent/mcp/connection.py).
        self._client = Client(params, cache=None)
        started = time.perf_counter()
        await self._client.__aenter__()
        self.connect_ms = (time.perf_counter() - started) * 1000.0
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.__aexit__(None, None, None)

    async def call_ms(self, text: str) -> float:
        assert self._client is not None
        started = time.perf_counter_ns()
        result = await self._client.call_tool("echo", {"text": text})
        took = (time.perf_counter_ns() - started) / 1e6
        if result.is_error:
            raise RuntimeError(f"the peer's echo failed: {result}")
        return took
