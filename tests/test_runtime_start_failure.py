"""A runtime that cannot start leaves its record behind, in error, and recoverable."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode


async def test_failed_start_keeps_the_record_in_error_and_resume_recovers(
    sidecar: Sidecar, workspace: Path
):
    await sidecar.call("session/list", {})  # fully started: every module is loaded
    original = resource.prlimit(sidecar.pid, resource.RLIMIT_NOFILE)
    in_use = {int(fd) for fd in os.listdir(f"/proc/{sidecar.pid}/fd")}
    lowest_free = next(n for n in range(len(in_use) + 1) if n not in in_use)
    # The limit caps descriptor numbers: at the lowest free one, no new socket can be had,
    # so the listener (the only descriptor a create needs) cannot open.
    resource.prlimit(sidecar.pid, resource.RLIMIT_NOFILE, (lowest_free, original[1]))
    try:
        with pytest.raises(RpcError) as failed:
            await sidecar.new_session(workspace, title="unlucky")
    finally:
        resource.prlimit(sidecar.pid, resource.RLIMIT_NOFILE, original)
    assert failed.value.code == ErrorCode.RUNTIME_FAILED
    sid = failed.value.data["sessionId"]
    assert "file descriptors" in failed.value.message

    status = await sidecar.status(sid)
    assert status["status"] == "error" and status["live"] is False and status["http"] is None
    assert "runtime failed to start" in status["lastError"]
    assert status["title"] == "unlucky"
    assert sidecar.states(sid) == ["creating", "error"]

    summary = (await sidecar.call("session/resume", {"sessionId": sid, "cwd": str(workspace)}))[
        "_meta"
    ]
    assert summary["status"] == "idle" and summary["generation"] == 2
    assert summary["lastError"] is None and summary["http"] is not None
    assert (await sidecar.prompt(sid, "works now"))["stopReason"] == "end_turn"
