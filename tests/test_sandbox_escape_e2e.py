"""The sandbox holds as root and hides the sidecar's own data: the real sidecar, real
bubblewrap, every sandbox mode (issue 21, findings 1 and 6).

Run as root, as CI and containers do: bwrap run by real root is privileged, and the
/proc it mounts had a writable /proc/sys in every mode, read-only included (a writable
core_pattern is host-root code execution). The data dir (the store: every session's
transcript and MCP secrets; checkpoints; output spools) and the user config dir (the
window's MCP server definitions) were readable by any command. The scratch dirs live in
/var/tmp: the sandbox replaces /tmp with its own, which would hide them by accident.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from harness import Sidecar, eventually

MODES = ("read-only", "workspace", "off")
DOMAINNAME = Path("/proc/sys/kernel/domainname")  # per UTS namespace, which bwrap shares


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sandbox-escape-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cwd(base: Path) -> Path:
    path = base / "ws"
    path.mkdir()
    (path / "readme.txt").write_text("hello from the cwd\n")
    return path


@pytest.fixture
def config_secret(base: Path) -> str:
    """A secret in the window's MCP definitions, in the config dir the sidecar's
    platformdirs resolves (XDG_CONFIG_HOME below)."""
    secret = f"config-secret-{uuid.uuid4().hex}"
    folder = base / "config" / "acp-session-host"
    folder.mkdir(parents=True)
    servers = [{"name": "s", "command": "true", "env": [{"name": "TOKEN", "value": secret}]}]
    (folder / "mcp-servers.json").write_text(json.dumps(servers))
    return secret


@pytest.fixture
async def sidecar(base: Path) -> AsyncIterator[Sidecar]:
    running = await Sidecar.start(base / "data", env={"XDG_CONFIG_HOME": str(base / "config")})
    try:
        yield running
    finally:
        await running.close()


async def command(sidecar: Sidecar, sid: str, script: str) -> str:
    """What `script` printed (stdout and stderr), run by the agent's bash tool."""
    await sidecar.prompt(sid, f"$ {script}")
    messages = (await sidecar.messages(sid, limit=1000))["messages"]
    text = [m for m in messages if m["type"] == "tool_result"][-1]["text"]
    return str(text)


async def session(sidecar: Sidecar, cwd: Path, mode: str) -> str:
    summary = await sidecar.new_session(cwd, approval="auto", sandbox=mode)
    assert summary["effectiveSandbox"] == mode
    assert summary["sandboxProblem"] is None, summary["sandboxProblem"]
    return str(summary["sessionId"])


# ---- the kernel's interfaces --------------------------------------------------------


async def test_kernel_settings_are_read_only_in_every_mode(sidecar: Sidecar, cwd: Path) -> None:
    host = DOMAINNAME.read_text()
    mark = f"sbx-{uuid.uuid4().hex[:12]}"
    try:
        for mode in MODES:
            sid = await session(sidecar, cwd, mode)
            out = await command(
                sidecar,
                sid,
                f"echo {mark} > {DOMAINNAME}; echo domainname=$?; "
                "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname; echo hostname=$?; "
                "for f in /proc/sys/vm/drop_caches /proc/sys/kernel/core_pattern "
                "/proc/sysrq-trigger; do test -w $f && echo writable $f; done; "
                "cat /proc/sys/kernel/ostype",
            )
            assert DOMAINNAME.read_text() == host, f"{mode}: the host's domain name changed"
            assert "domainname=1" in out and "hostname=1" in out, (mode, out)
            assert "Read-only file system" in out, (mode, out)
            assert "writable" not in out, (mode, out)  # root ignores modes: only EROFS stops it
            assert "Linux" in out, (mode, out)  # reading the settings still works
    finally:
        if DOMAINNAME.read_text() != host:  # the escape happened: put the host back
            DOMAINNAME.write_text(host)


async def test_sys_is_read_only_and_host_state_masked_in_every_mode(
    sidecar: Sidecar, cwd: Path
) -> None:
    masked = [f for f in ("/proc/keys", "/proc/timer_list", "/proc/kcore") if os.path.isfile(f)]
    for mode in MODES:
        sid = await session(sidecar, cwd, mode)
        out = await command(
            sidecar,
            sid,
            "for f in /sys/kernel/mm/transparent_hugepage/enabled /sys/fs/cgroup "
            "/sys/kernel; do test -w $f && echo writable $f; done; "
            f"ls -A /sys/firmware | wc -l; for f in {' '.join(masked)}; do "
            "head -c1 $f >/dev/null 2>&1 && echo readable $f; done",
        )
        assert "writable" not in out, (mode, out)
        assert out.splitlines()[1] == "0", (mode, out)  # an empty tmpfs over /sys/firmware
        assert "readable" not in out, (mode, out)  # /dev/null bound nodev: EACCES


# ---- the data and config dirs ---------------------------------------------------------


async def test_data_and_config_dirs_are_hidden_in_every_mode(
    sidecar: Sidecar, base: Path, cwd: Path, config_secret: str
) -> None:
    data, config = base / "data", base / "config" / "acp-session-host"
    other = await session(sidecar, cwd, "workspace")
    secret = f"transcript-secret-{uuid.uuid4().hex}"
    await sidecar.prompt(other, secret)  # another session's transcript, in sessions.db
    assert secret.encode() in (data / "sessions.db").read_bytes() + b"".join(
        p.read_bytes() for p in data.glob("sessions.db-*")
    )
    for mode in MODES:
        sid = await session(sidecar, cwd, mode)
        out = await command(
            sidecar,
            sid,
            f"echo listed $(ls -A {data} | wc -l) $(ls -A {config} | wc -l); "
            f"test -e {data}/sessions.db && echo DB-VISIBLE; "
            f"cat {config}/mcp-servers.json; grep -c transcript-secret {data}/sessions.db*; "
            "cat readme.txt",
        )
        assert "listed 0 0" in out, (mode, out)
        assert "DB-VISIBLE" not in out and config_secret not in out, (mode, out)
        assert "hello from the cwd" in out, (mode, out)  # the cwd reads as before


async def test_mcp_servers_do_not_see_the_data_dir(sidecar: Sidecar, base: Path, cwd: Path) -> None:
    data = base / "data"
    await session(sidecar, cwd, "off")  # the store exists, with a session in it
    seen = cwd / "seen.txt"
    script = f"ls -A {data} > seen.tmp; test -e {data}/sessions.db && echo DB >> seen.tmp; "
    script += "mv seen.tmp seen.txt"
    server = {"name": "peek", "command": "/bin/sh", "args": ["-c", script], "env": []}
    await sidecar.call("session/new", {"cwd": str(cwd), "mcpServers": [server], "_meta": {}})
    assert await eventually(seen.exists), "the MCP server never ran"
    assert seen.read_text() == "", seen.read_text()


async def test_a_cwd_holding_the_data_dir_keeps_its_other_files(base: Path) -> None:
    """The default layout of a session in $HOME: the data dir under ~/.local/share."""
    home = base / "home"
    data = home / ".local" / "share" / "acp-session-host"
    (home / ".local" / "share" / "other").mkdir(parents=True)
    (home / ".local" / "share" / "other" / "kept.txt").write_text("kept\n")
    (home / "notes.txt").write_text("notes\n")
    sidecar = await Sidecar.start(data)
    try:
        for mode in MODES:
            sid = await session(sidecar, home, mode)
            out = await command(
                sidecar,
                sid,
                "cat notes.txt .local/share/other/kept.txt; "
                "echo listed $(ls -A .local/share/acp-session-host | wc -l); ls -A .local/share",
            )
            assert out.splitlines()[1:] == [
                "notes",
                "kept",
                "listed 0",
                "acp-session-host",
                "other",
            ], (mode, out)
            if mode != "read-only":
                await command(sidecar, sid, f"echo {mode} > made-{mode}.txt")
                assert (home / f"made-{mode}.txt").read_text() == f"{mode}\n"
    finally:
        await sidecar.close()


async def test_a_cwd_inside_the_data_dir_stays_visible(base: Path) -> None:
    """A worktree kept under the data dir: the cwd is bound again over the tmpfs."""
    data = base / "data"
    tree = data / "worktrees" / "w"
    tree.mkdir(parents=True)
    (tree / "file.txt").write_text("in the worktree\n")
    sidecar = await Sidecar.start(data)
    try:
        for mode in MODES:
            sid = await session(sidecar, tree, mode)
            out = await command(
                sidecar, sid, f"cat file.txt; ls -A {data}; test -e {data}/sessions.db && echo DB"
            )
            assert out.splitlines()[1:] == ["in the worktree", "worktrees"], (mode, out)
    finally:
        await sidecar.close()
