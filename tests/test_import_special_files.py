"""`_session/import {path}` reads only regular files (issue 21, finding 5).

The real sidecar over its pipes is asked to import from a FIFO, its own `/dev/stdin`,
`/dev/zero`, a directory, a Unix socket, a symlink to a FIFO and a file over the size
bound. Each is refused at once with -32602 naming `path` and what the file is; the next
request is answered normally (nothing of the protocol stream was swallowed) and the
sidecar still exits on EOF. A regular export next to them still imports.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from raw_client import RawClient

from protocol.errors import ErrorCode
from sidecar.acp.extensions import IMPORT_MAX

ANSWER_WITHIN = 10.0  # an import that blocks on the file never answers at all


def fifo(where: Path) -> str:
    os.mkfifo(where / "export.jsonl")
    return str(where / "export.jsonl")


def symlink_to_fifo(where: Path) -> str:
    os.mkfifo(where / "pipe")
    (where / "export.jsonl").symlink_to(where / "pipe")
    return str(where / "export.jsonl")


def directory(where: Path) -> str:
    (where / "export.jsonl").mkdir()
    return str(where / "export.jsonl")


_sockets: list[socket.socket] = []


def unix_socket(where: Path) -> str:
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(where / "s.sock"))
    listening.listen(1)
    _sockets.append(listening)
    return str(where / "s.sock")


CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    "fifo": (fifo, "FIFO"),
    "dev-stdin": (lambda where: "/dev/stdin", "FIFO"),  # the sidecar's stdin is a pipe
    "dev-zero": (lambda where: "/dev/zero", "character device"),
    "directory": (directory, "directory"),
    "socket": (unix_socket, "socket"),
    "symlink-to-fifo": (symlink_to_fifo, "FIFO"),
}


@pytest.fixture
async def client(data_dir: Path) -> AsyncIterator[RawClient]:
    running = await RawClient.start(data_dir)
    try:
        yield running
    finally:
        if running.process.returncode is None:
            running.sigkill()
        await running.wait_exit(5)
        for listening in _sockets:
            listening.close()
        _sockets.clear()


async def refused(client: RawClient, path: str) -> dict[str, str]:
    reply = await client.request("_session/import", {"path": path}, timeout=ANSWER_WITHIN)
    assert "error" in reply, reply
    error = reply["error"]
    assert error["code"] == ErrorCode.INVALID_PARAMS, reply
    assert error["data"]["field"] == "path", reply
    reason: str = error["data"]["reason"]
    assert path in reason, reply
    return error["data"]


async def answers_normally(client: RawClient) -> None:
    listed = await client.call("session/list", {}, timeout=ANSWER_WITHIN)
    assert isinstance(listed["sessions"], list)


@pytest.mark.parametrize("case", list(CASES))
async def test_import_refuses_what_is_not_a_regular_file(
    client: RawClient, tmp_path: Path, case: str
) -> None:
    make, kind = CASES[case]
    where = tmp_path / "files"
    where.mkdir()
    path = make(where)
    data = await refused(client, path)
    assert kind in data["reason"] and "regular file" in data["reason"], data
    await answers_normally(client)  # the protocol stream is intact
    assert await client.close(ANSWER_WITHIN) == 0, client.stderr_tail()


async def test_import_refuses_a_file_over_the_bound_without_reading_it(
    client: RawClient, tmp_path: Path
) -> None:
    sparse = tmp_path / "huge.jsonl"
    with open(sparse, "wb") as handle:
        handle.truncate(IMPORT_MAX + 1)  # sparse: no disk, and nothing worth reading
    data = await refused(client, str(sparse))
    assert "MiB" in data["reason"], data
    await answers_normally(client)
    assert await client.close(ANSWER_WITHIN) == 0, client.stderr_tail()


async def test_a_regular_export_still_imports_beside_them(
    client: RawClient, tmp_path: Path, workspace: Path
) -> None:
    await refused(client, fifo(tmp_path))
    summary = await client.new_session(workspace, approval="auto")
    await client.prompt(summary["sessionId"], "remember the teapot")
    exported = await client.call(
        "_session/export", {"sessionId": summary["sessionId"], "directory": str(workspace)}
    )
    imported = await client.call("_session/import", {"path": exported["path"]})
    assert imported["importedFrom"] == summary["sessionId"]
    assert imported["messageCount"] == 2
    with contextlib.suppress(FileNotFoundError):
        os.unlink(exported["path"])
    assert await client.close(ANSWER_WITHIN) == 0, client.stderr_tail()
