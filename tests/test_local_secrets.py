"""Local secrets: a private data dir and database, and tokens nowhere but the runtime."""

from __future__ import annotations

import stat
from pathlib import Path

import aiohttp
from harness import Sidecar


async def test_data_dir_and_database_are_private(data_dir: Path, workspace: Path):
    sidecar = await Sidecar.start(data_dir)
    try:
        await sidecar.new_session(workspace)
    finally:
        await sidecar.close()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for path in data_dir.iterdir():
        if path.name.startswith("sessions.db"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_tokens_never_reach_logs_the_record_or_the_transcript(
    data_dir: Path, workspace: Path
):
    sidecar = await Sidecar.start(data_dir)  # harness runs it at DEBUG log level
    tokens = []
    try:
        summary = await sidecar.new_session(workspace)
        sid = summary["sessionId"]
        url, token = await sidecar.endpoint(sid)
        tokens.append(token)
        async with aiohttp.ClientSession() as http:
            for header in (f"Bearer {token}", f"Bearer {token}x", "Bearer wrong"):
                async with http.post(
                    f"{url}/agent/send",
                    json={"message": f"$ echo hello; echo {len(header)}"},
                    headers={"Authorization": header},
                ):
                    pass
        await sidecar.prompt(sid, "hello")
        await sidecar.call("session/close", {"sessionId": sid})
        resumed = await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)})
        _, resumed_token = await sidecar.endpoint(sid)
        assert resumed["_meta"]["http"] is not None and resumed_token not in str(resumed)
        tokens.append(resumed_token)
        transcript = str(await sidecar.messages(sid, limit=1000))
    finally:
        await sidecar.close()
    log = "\n".join(sidecar.client.stderr_tail)
    assert "sidecar ready" in log  # the log was captured
    stored = b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())
    for token in tokens:
        assert token not in log
        assert token.encode() not in stored
        assert token not in transcript
