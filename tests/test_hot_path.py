"""The sidecar's hot path and start-up (issue 17), pinned where a benchmark cannot pin it:
a plain turn is two store transactions, the direct dispatch answers exactly as
jsonrpcserver would, a delete moves the session's files aside and removes them after the
answer, and the light half of start-up imports neither pydantic nor jsonrpcserver."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from protocol.values import Approval, Status
from sidecar.acp.server import RpcServer
from sidecar.agent.backends.groups import CommandLimits
from sidecar.agent.providers.offline import OfflineProvider
from sidecar.checkpoints.store import CheckpointStore
from sidecar.core.events import EventHub
from sidecar.core.leases import Leases
from sidecar.core.manager import ManagerDeps, NewSession, SessionManager
from sidecar.core.output_spools import OutputSpools
from sidecar.core.runtime import RuntimeDeps
from sidecar.domain.errors import SessionNotFound
from sidecar.domain.events import Origin
from sidecar.fs.trash import TRASH
from sidecar.store.sqlite import SqliteSessionStore

REPO = Path(__file__).resolve().parent.parent


class CountingStore(SqliteSessionStore):
    """Counts the write transactions the store opens."""

    writes = 0

    def _write(self) -> Any:
        CountingStore.writes += 1
        return super()._write()


def manager(store: Any, data_dir: Path | None = None) -> SessionManager:
    return SessionManager(
        ManagerDeps(
            runtime=RuntimeDeps(
                store=store,
                make_provider=lambda record: OfflineProvider(),
                limits=CommandLimits(timeout=20, interrupt_grace=0.2, kill_grace=0.5),
                open_listener=None,
                checkpoints=CheckpointStore(None if data_dir is None else data_dir / "checkpoints"),
                spools=OutputSpools(None if data_dir is None else data_dir / "output"),
            ),
            events=EventHub(lambda event: None),
            leases=Leases(15.0),
            model_name="offline-echo",
        )
    )


async def test_a_plain_turn_is_two_transactions_and_records_everything(tmp_path: Path):
    store = CountingStore(tmp_path / "sessions.db")
    core = manager(store)
    try:
        sid = (await core.create(NewSession(str(tmp_path), approval=Approval.AUTO))).session_id
        await core.prompt(sid, "first", Origin.ACP)  # titles the session: same writes
        before = CountingStore.writes
        outcome = await core.prompt(sid, "hi", Origin.ACP)
        assert CountingStore.writes - before == 2  # running + user row; reply + idle
        assert outcome.response == "Echo: hi"
        record = await store.get(sid)
        assert record.status is Status.IDLE and record.message_count == 4 and record.turns == 2
        rows = await store.messages(sid, 0, 10)
        assert [row["role"] for row in rows] == ["user", "assistant", "user", "assistant"]
        assert rows[-1]["content"] == "Echo: hi"
        # The provider context got the reply too: the next turn sees the whole exchange.
        third = await core.prompt(sid, "again", Origin.ACP)
        assert third.response == "Echo: again"
        assert (await store.get(sid)).message_count == 6
    finally:
        await core.shutdown()
        await store.close()


class Lines:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, line: bytes) -> None:
        self.sent.extend(json.loads(part) for part in line.splitlines())


async def _answers(lines: list[str]) -> list[Any]:
    writer = Lines()
    server = RpcServer(writer)  # type: ignore[arg-type]

    async def ok(params: dict[str, Any]) -> Any:
        return {"got": params}

    async def refuses(params: dict[str, Any]) -> Any:
        raise SessionNotFound("sess_x")

    async def breaks(params: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    for name, handler in (("ok", ok), ("refuses", refuses), ("breaks", breaks)):
        server.register(name, handler)
    for line in lines:
        await server._handle(line.encode())
    return writer.sent


async def test_the_direct_path_answers_as_jsonrpcserver_does():
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "ok", "params": {"a": 1}},
        {"jsonrpc": "2.0", "id": "s", "method": "ok"},
        {"jsonrpc": "2.0", "id": 2, "method": "refuses", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "breaks", "params": {}},
        {"jsonrpc": "2.0", "method": "ok", "params": {}},  # a notification: no answer
    ]
    direct = await _answers([json.dumps(r) for r in requests])
    # The same requests inside one-element batches take jsonrpcserver's whole pipeline.
    full = await _answers([json.dumps([r]) for r in requests])
    assert direct == [answer for batch in full for answer in batch]
    assert direct[0] == {"jsonrpc": "2.0", "result": {"got": {"a": 1}}, "id": 1}
    assert direct[2]["error"]["code"] == -32002
    assert "data" not in direct[3]["error"]  # internals stay in the log


async def test_what_no_handler_answers():
    answers = await _answers(
        [
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "nope"}),
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ok", "params": [1]}),
            json.dumps({"jsonrpc": "1.0", "id": 4, "method": "ok"}),
            "{not json",
        ]
    )
    codes = [answer["error"]["code"] for answer in answers]
    assert codes == [-32601, -32602, -32600, -32700]


async def test_delete_moves_files_aside_and_removes_them_after(tmp_path: Path):
    data = tmp_path / "data"
    store = SqliteSessionStore(tmp_path / "sessions.db")
    core = manager(store, data)
    try:
        sid = (await core.create(NewSession(str(tmp_path), approval=Approval.AUTO))).session_id
        await core.close(sid)
        (data / "output" / sid).mkdir(parents=True)
        (data / "output" / sid / "x.out").write_bytes(b"output")
        assert (data / "checkpoints" / sid).is_dir()  # opened with the runtime
        left = data / "checkpoints" / TRASH / "sess_gone.0000"
        left.mkdir(parents=True)  # what a process that died mid-delete left
        await core.delete(sid)
        assert not (data / "checkpoints" / sid).exists()
        assert not (data / "output" / sid).exists()
        for _ in range(200):
            if not any((data / "checkpoints" / TRASH).iterdir()) and not any(
                (data / "output" / TRASH).iterdir()
            ):
                break
            await asyncio.sleep(0.02)
        assert list((data / "output" / TRASH).iterdir()) == []
        assert [p.name for p in (data / "checkpoints" / TRASH).iterdir()] == [left.name]
        await core.reconcile()  # start-up sweeps what was left
        for _ in range(200):
            if not left.exists():
                break
            await asyncio.sleep(0.02)
        assert not left.exists()
    finally:
        await core.shutdown()
        await store.close()


def test_the_light_half_of_start_up_imports_no_pydantic_nor_jsonrpcserver():
    code = (
        "import sys, sidecar.app; "
        "print(sorted(m for m in ('pydantic', 'jsonrpcserver', 'protocol.models', 'acp', 'mcp')"
        " if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
