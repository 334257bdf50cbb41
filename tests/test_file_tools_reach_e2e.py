"""The file tools reach no further than a sandboxed command: they run in the sidecar's own
process, so without their own check `read_file` would read what bubblewrap hides from
commands (the data dir: every session's transcript and MCP secrets; the sidecar's
/proc/self/environ: its provider keys) and, in sandbox `off` as root, `write_file` would
write the host's /proc/sys. Real sidecar, the offline provider's `/read`, `/ls`, `/write`."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Sidecar

DOMAINNAME = Path("/proc/sys/kernel/domainname")


@pytest.fixture
def home() -> Iterator[Path]:
    """A session in $HOME: the data dir under ~/.local/share, inside the cwd."""
    path = Path(tempfile.mkdtemp(prefix="file-reach-", dir="/var/tmp"))
    (path / "notes.txt").write_text("notes\n")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def tool_result(sidecar: Sidecar, sid: str, prompt: str) -> str:
    await sidecar.prompt(sid, prompt)
    messages = (await sidecar.messages(sid, limit=1000))["messages"]
    return str([m for m in messages if m["type"] == "tool_result"][-1]["text"])


@pytest.mark.parametrize("mode", ["read-only", "workspace", "off"])
async def test_the_file_tools_refuse_the_data_dir_and_the_kernel_trees(
    home: Path, mode: str
) -> None:
    data = home / ".local" / "share" / "acp-session-host"
    secret = f"sk-reach-{uuid.uuid4().hex}"
    sidecar = await Sidecar.start(data, env={"OPENAI_API_KEY": secret})
    try:
        summary = await sidecar.new_session(home, approval="auto", sandbox=mode)
        sid = str(summary["sessionId"])
        await sidecar.prompt(sid, f"remember {secret}")  # now in sessions.db
        db = ".local/share/acp-session-host/sessions.db"
        for prompt in (f"/read {db}", f"/read {data}/sessions.db", "/read /proc/self/environ"):
            out = await tool_result(sidecar, sid, prompt)
            assert out.startswith("refused:"), (mode, prompt, out)
            assert secret not in out, (mode, prompt)
        listed = await tool_result(sidecar, sid, "/ls .")
        assert "notes.txt" in listed and "sessions.db" not in listed, (mode, listed)
        assert "acp-session-host" not in listed, (mode, listed)
        out = await tool_result(sidecar, sid, "/ls .local/share/acp-session-host")
        assert out.startswith("refused:"), (mode, out)
        assert (await tool_result(sidecar, sid, "/read notes.txt")).endswith("notes")
        status = await sidecar.status(sid)
        assert status["status"] == "idle", status
    finally:
        await sidecar.close()


async def test_a_write_to_the_kernels_settings_is_refused_in_sandbox_off(home: Path) -> None:
    """`off` lets the file tools write outside the cwd; never into /proc, /sys or /dev.
    The content is the host's own value, so a failure of this test changes nothing."""
    host = DOMAINNAME.read_text()
    sidecar = await Sidecar.start(home / "data")
    try:
        summary = await sidecar.new_session(home, approval="auto", sandbox="off")
        sid = str(summary["sessionId"])
        out = await tool_result(sidecar, sid, f"/write {DOMAINNAME} {host.strip()}")
        assert "refused:" in out and "/proc" in out, out
        out = await tool_result(sidecar, sid, f"/write {home / 'data' / 'planted.txt'} x")
        assert "refused:" in out, out
        assert not (home / "data" / "planted.txt").exists()
        elsewhere = Path(tempfile.mkdtemp(prefix="file-reach-out-", dir="/var/tmp"))
        try:  # outside the cwd, but nowhere refused: `off` still writes it
            out = await tool_result(sidecar, sid, f"/write {elsewhere / 'outside.txt'} fine")
            assert (elsewhere / "outside.txt").read_text().startswith("fine"), out
        finally:
            shutil.rmtree(elsewhere, ignore_errors=True)
    finally:
        await sidecar.close()
        assert DOMAINNAME.read_text() == host
