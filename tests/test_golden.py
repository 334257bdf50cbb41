"""The wire, pinned: golden JSON files of every method and every notification kind.

One fixed scenario drives the real sidecar over its pipes (offline provider, real
bubblewrap, real git) and records, for every method the sidecar answers, the request
and its answer, for every notification kind (each `session/update` kind, our
`_session/*` notifications, the `session/request_permission` request) its first
example, and the same for every event kind of the session's HTTP stream
(`GET /agent/events`, read alongside): both edges serialise one translation of the
session's events (sidecar/wire/events.py), and both are pinned here. Volatile values (ids, times, ports, tokens, paths under the test's tmp) become
placeholders, so a file changes only when the wire does: a change to the protocol shows
as a diff of a file under `tests/golden/`. `UPDATE_GOLDEN=1` rewrites the files (then
read the diff before committing it).

The summary's `version` (issue 22, point 4, added concurrently) is left out here: it is a
counter whose value each scenario step may bump differently as the store evolves, and its
own tests pin it.

Not reachable with the offline provider, so not pinned here: `agent_thought_chunk`
on either edge (tests/test_acp_conformance_e2e.py sees it on ACP) and `plan` (the sidecar sends none).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
from external_agents import AgentSetup
from harness import INITIALIZE, Sidecar

from desktop.client import RpcError
from protocol.methods import ACP_METHODS, EXTENSION_METHODS, Method

REPO = str(Path(__file__).resolve().parent.parent)
GOLDEN = Path(__file__).resolve().parent / "golden"
METHODS_DIR = GOLDEN / "methods"
NOTIFICATIONS_DIR = GOLDEN / "notifications"
SSE_DIR = GOLDEN / "sse"
DIRS = (METHODS_DIR, NOTIFICATIONS_DIR, SSE_DIR)
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

# Keys whose values differ from run to run whatever the wire's shape: a placeholder each.
# (`bytes`: an export's size, which counts the tmp path it names.)
VOLATILE_KEYS = {
    "token": "<token>",
    "nextCursor": "<cursor>",
    "pid": "<pid>",
    "bytes": "<bytes>",
    # git: commit ids and a patch series (dates, hashes) differ on every run.
    "before": "<commit>",
    "after": "<commit>",
    "patch": "<patch>",
}
WORKTREE_DIR = re.compile(r"\.worktrees/[0-9a-f]{8}\b")
# Left out entirely (see the module's doc).
DROPPED_KEYS = frozenset({"version"})
SESSION_ID = re.compile(r"\bsess_[0-9a-f]{32}\b")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
PORT = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")
EPOCH = re.compile(r"(?<![\d.])1\d{9}(?:\.\d+)?(?![\d.])")  # a Unix time in seconds
GIT_INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+", re.MULTILINE)
QUEUE_ID = re.compile(r"\bq_[0-9a-f]{16}\b")
CALL_ID = re.compile(r"\bcall_[0-9A-Za-z_-]+")


def file_name(method: str, kind: str | None = None) -> str:
    """`session/new` -> `session.new.json`; a `session/update` kind is its own file."""
    stem = method.replace("/", ".")
    return f"{stem}.{kind}.json" if kind else f"{stem}.json"


class Normaliser:
    """Replaces what differs between runs by stable placeholders (ids numbered in order
    of first appearance, so two sessions stay told apart)."""

    def __init__(self, tmp: Path, workspace: Path) -> None:
        self.tmp = str(tmp)
        self.workspace = str(workspace)
        self.ids: dict[str, str] = {}

    def _id(self, kind: str, value: str) -> str:
        if value not in self.ids:
            count = sum(1 for name in self.ids.values() if name.startswith(f"<{kind}-"))
            self.ids[value] = f"<{kind}-{count + 1}>"
        return self.ids[value]

    def text(self, value: str) -> str:
        value = value.replace(self.workspace, "<workspace>").replace(self.tmp, "<tmp>")
        value = value.replace(sys.executable, "<python>").replace(REPO, "<repo>")
        value = SESSION_ID.sub(lambda m: self._id("session", m.group(0)), value)
        value = UUID.sub(lambda m: self._id("id", m.group(0)), value)
        value = CALL_ID.sub(lambda m: self._id("call", m.group(0)), value)
        value = QUEUE_ID.sub(lambda m: self._id("queued", m.group(0)), value)
        value = ISO_TIME.sub("<time>", value)
        value = PORT.sub(r"\1:<port>", value)
        value = EPOCH.sub("<epoch>", value)
        value = WORKTREE_DIR.sub(".worktrees/<short-id>", value)
        return GIT_INDEX.sub("index <hash>..<hash>", value)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in DROPPED_KEYS:
                    continue
                if key in VOLATILE_KEYS and item is not None:
                    out[key] = VOLATILE_KEYS[key]
                else:
                    out[key] = self(item)
            return out
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, float) and value > 1e9:
            return "<epoch>"
        return value


class Recorder:
    """Calls methods on the sidecar and keeps each method's first request and answer."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        self.methods: dict[str, dict[str, Any]] = {}

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            result = await self.sidecar.call(method, params)
        except RpcError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            answer: dict[str, Any] = {"error": error}
            result = None
        else:
            answer = {"result": result}
        self.methods.setdefault(method, {"request": {"method": method, "params": params}, **answer})
        return result


async def read_sse(response: aiohttp.ClientResponse, into: list[tuple[str, Any]]) -> None:
    """Every SSE frame of `response` as (event name, data), until the stream ends."""
    name, data = "", None
    with contextlib.suppress(aiohttp.ClientError, asyncio.IncompleteReadError):
        async for raw in response.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
            elif not line and name:
                into.append((name, data))
                name, data = "", None


def make_repo(root: Path) -> Path:
    """A git repository with one commit (its own identity: no user config needed)."""
    root.mkdir()
    who = ["-c", "user.name=golden", "-c", "user.email=golden@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*who, "commit", "-q", "-m", "one"]):
        if args[0] == "add":
            (root / "README.md").write_text("golden\n")
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root


# A 1x1 PNG, and a user row that refers to it with its bytes (as an export has them).
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="
PIXEL_ID = hashlib.sha256(base64.b64decode(PIXEL)).hexdigest()
IMAGE_ROW = {
    "role": "user",
    "content": "a picture",
    "turn": 99,
    "images": [{"id": PIXEL_ID, "mimeType": "image/png", "bytes": 70, "width": 1, "height": 1}],
    "imageData": [PIXEL],
}


def with_row(jsonl: str, row: dict[str, Any]) -> str:
    """An export with one more transcript row (its header counting it)."""
    header, *rows = jsonl.splitlines()
    head = json.loads(header)
    head["session"]["messageCount"] += 1
    return "\n".join([json.dumps(head), *rows, json.dumps(row)]) + "\n"


def TEXT(text: str) -> dict[str, str]:  # noqa: N802 (reads as the block it makes)
    return {"type": "text", "text": text}


def text_prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def scenario(tmp: Path) -> dict[str, Any]:
    """Every method once (in an order where each has something to show) and the
    notifications they cause; returns {file name: normalised content}."""
    # The workspace's path reaches the model's context, so the offline provider's token
    # estimates count it: a path of the same length on every run keeps them stable.
    workspace = Path(tempfile.mkdtemp(prefix="golden-", dir="/tmp"))
    try:
        return await _scenario(tmp, workspace)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(_repo_dir(workspace), ignore_errors=True)
        shutil.rmtree(str(_repo_dir(workspace)) + ".worktrees", ignore_errors=True)


def _repo_dir(workspace: Path) -> Path:
    """The worktree session's repository: beside the workspace, so its path (which its
    worktree's path, and so the model's context, holds) has the same length every run."""
    return workspace.with_name(workspace.name + "-repo")


async def _scenario(tmp: Path, workspace: Path) -> dict[str, Any]:
    (workspace / "README.md").write_text("golden\n")
    agents = AgentSetup(tmp / "agents").add("scripted")  # an external agent's session too
    sidecar = await Sidecar.start(tmp / "data", *agents.args())
    rec = Recorder(sidecar)
    http = aiohttp.ClientSession()
    sse: list[tuple[str, Any]] = []
    reading: asyncio.Task[None] | None = None
    try:
        await rec.call(Method.INITIALIZE, INITIALIZE)
        await rec.call(Method.SESSION_LIST, {})
        opened = await rec.call(
            Method.SESSION_NEW,
            {"cwd": str(workspace), "mcpServers": [], "_meta": {"title": "Golden"}},
        )
        sid = opened["sessionId"]
        await sidecar.wait_state(sid, "idle")
        # The HTTP edge's events of the same session, from here until it closes.
        url, token = await sidecar.endpoint(sid)
        events = await http.get(f"{url}/agent/events", headers={"Authorization": f"Bearer {token}"})
        assert events.status == 200
        reading = asyncio.create_task(read_sse(events, sse))
        await rec.call(Method.STATUS, {"sessionId": sid})
        await rec.call(Method.SESSION_PROMPT, text_prompt(sid, "$ echo hello"))
        await rec.call(Method.SESSION_PROMPT, text_prompt(sid, "/write notes.txt hello"))
        await sidecar.wait_for(lambda method, _: method == Method.TURN_CHANGES)
        await rec.call(Method.CHANGES, {"sessionId": sid})
        await rec.call(Method.FILES, {"sessionId": sid, "query": "note"})
        calls = [u["toolCallId"] for u in sidecar.updates(sid, "tool_call")]
        await rec.call(Method.OUTPUT, {"sessionId": sid, "toolCallId": calls[0]})
        await rec.call(Method.MESSAGES, {"sessionId": sid, "offset": 0, "limit": 100})
        await rec.call(Method.RESIZE, {"sessionId": sid, "rows": 24, "cols": 80})
        await rec.call(Method.RENAME, {"sessionId": sid, "title": "Golden, renamed"})
        await rec.call(Method.PERMISSIONS, {"sessionId": sid})
        await rec.call(Method.SET_PERMISSIONS, {"sessionId": sid, "rules": []})
        await rec.call(Method.HTTP, {"sessionId": sid})
        await rec.call(Method.MCP_RECONNECT, {"sessionId": sid, "name": "absent"})
        await rec.call(Method.SESSION_SET_MODE, {"sessionId": sid, "modeId": "plan"})
        await rec.call(
            Method.SESSION_SET_CONFIG_OPTION,
            {"sessionId": sid, "configId": "approval", "value": "auto"},
        )
        await rec.call(Method.COMPACT, {"sessionId": sid, "keepTurns": 1})
        await rec.call(Method.REWIND, {"sessionId": sid, "turn": 2, "dryRun": True})
        await rec.call(Method.SESSION_CANCEL, {"sessionId": sid})
        exported = await rec.call(Method.EXPORT, {"sessionId": sid, "format": "jsonl"})
        await rec.call(Method.IMPORT, {"content": exported["content"], "cwd": str(workspace)})
        # An image a user message refers to (brought in by an import: the offline model
        # takes none), fetched as a client shows it.
        with_image = with_row(exported["content"], IMAGE_ROW)
        pictured = await sidecar.call(Method.IMPORT, {"content": with_image, "cwd": str(workspace)})
        await rec.call(Method.IMAGE, {"sessionId": pictured["sessionId"], "id": PIXEL_ID})
        forked = await rec.call(Method.SESSION_FORK, {"sessionId": sid, "cwd": str(workspace)})
        await rec.call(Method.SESSION_CLOSE, {"sessionId": sid})
        await asyncio.wait_for(reading, 20)  # the close ended the session's listener
        await rec.call(Method.SESSION_RESUME, {"sessionId": sid, "cwd": str(workspace)})
        await sidecar.call(Method.SESSION_CLOSE, {"sessionId": sid})
        await rec.call(Method.SESSION_LOAD, {"sessionId": sid, "cwd": str(workspace)})
        await rec.call(Method.ARCHIVE, {"sessionId": forked["sessionId"], "archived": True})
        await sidecar.call(Method.SESSION_CLOSE, {"sessionId": forked["sessionId"]})
        await rec.call(Method.SESSION_DELETE, {"sessionId": forked["sessionId"]})
        # An external agent's turn: what only an engine other than ours sends (a plan, a
        # thought, the agent's own commands and options).
        external = await sidecar.new_session(workspace, agent="scripted", approval="auto")
        await sidecar.prompt(
            external["sessionId"], "think pondering\nplan one | two\ncommands\nsay done"
        )
        await sidecar.call(
            Method.SESSION_SET_CONFIG_OPTION,
            {"sessionId": external["sessionId"], "configId": "agent.model", "value": "smart"},
        )
        await sidecar.call(Method.SESSION_CLOSE, {"sessionId": external["sessionId"]})
        # A session in its own git worktree: its branch's diff, merged back, exported,
        # discarded.
        repo = make_repo(_repo_dir(workspace))
        tree = await sidecar.new_session(repo, worktree={"branch": "golden"}, approval="auto")
        await sidecar.prompt(tree["sessionId"], "/write notes.md golden")
        await rec.call(Method.WORKTREE_DIFF, {"sessionId": tree["sessionId"]})
        await rec.call(
            Method.WORKTREE_MERGE, {"sessionId": tree["sessionId"], "strategy": "squash"}
        )
        # One hunk of a later turn taken back (the same ids as its changes show).
        await sidecar.prompt(tree["sessionId"], "/write notes.md changed")
        changed = await sidecar.call(Method.CHANGES, {"sessionId": tree["sessionId"]})
        hunk = changed["files"][0]["hunks"][0]["id"]
        await rec.call(
            Method.REVERT,
            {"sessionId": tree["sessionId"], "turn": 2, "path": "notes.md", "hunks": [hunk]},
        )
        await rec.call(Method.WORKTREE_PATCH, {"sessionId": tree["sessionId"]})
        await rec.call(Method.WORKTREE_ORPHANS, {})
        await sidecar.call(Method.SESSION_CLOSE, {"sessionId": tree["sessionId"]})
        await rec.call(Method.WORKTREE_DISCARD, {"sessionId": tree["sessionId"]})
        # The queue: messages waiting behind a running turn, changed, paused by a cancel,
        # run again; then an earlier message edited and sent again.
        queued = (await sidecar.new_session(workspace, title="Queued"))["sessionId"]
        held = sidecar.prompt_task(queued, "/sleep 30 held")
        await sidecar.wait_state(queued, "running")
        first = await rec.call(Method.QUEUE, {"sessionId": queued, "prompt": [TEXT("a")]})
        await sidecar.call(Method.QUEUE, {"sessionId": queued, "prompt": [TEXT("b")]})
        second = (await sidecar.call(Method.QUEUE_LIST, {"sessionId": queued}))["queue"][1]
        await rec.call(Method.QUEUE_LIST, {"sessionId": queued})
        await rec.call(
            Method.QUEUE_EDIT,
            {"sessionId": queued, "id": second["id"], "prompt": [TEXT("b, edited")]},
        )
        await rec.call(Method.QUEUE_MOVE, {"sessionId": queued, "id": second["id"], "index": 0})
        await rec.call(Method.QUEUE_REMOVE, {"sessionId": queued, "id": first["item"]["id"]})
        await sidecar.call(Method.SESSION_CANCEL, {"sessionId": queued})
        await held
        await rec.call(Method.QUEUE_RUN, {"sessionId": queued})
        await sidecar.wait_for(
            lambda method, params: method == Method.QUEUE_UPDATE and params["queue"] == []
        )
        await sidecar.wait_for(  # the queued message's turn (the second) has ended
            lambda method, params: (
                method == Method.STATE
                and params.get("sessionId") == queued
                and params.get("status") == "idle"
                and params.get("turns") == 2
            )
        )
        await rec.call(Method.EDIT, {"sessionId": queued, "turn": 2, "text": "b, again"})
        await sidecar.call(Method.SESSION_CLOSE, {"sessionId": queued})
        # The presets (none installed on a test machine) and the scripted agent.
        await rec.call(Method.AGENTS, {})
        await rec.call(Method.SHUTDOWN, {})
    finally:
        if reading is not None:
            reading.cancel()
        await http.close()
        await sidecar.close()
    normalise = Normaliser(tmp, workspace)
    files: dict[str, Any] = {}
    # Methods in the order called, so ids are numbered as they first appear.
    for method, exchange in rec.methods.items():
        files[f"methods/{file_name(method)}"] = normalise(exchange)
    for method, params in sidecar.seen:
        kind = params["update"]["sessionUpdate"] if method == Method.SESSION_UPDATE else None
        files.setdefault(f"notifications/{file_name(method, kind)}", normalise(params))
    for name, data in sse:
        files.setdefault(f"sse/{name}.json", normalise(data))
    return files


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


async def test_the_wire_matches_the_golden_files(tmp_path: Path) -> None:
    files = await scenario(tmp_path)
    if UPDATE:
        for directory in DIRS:
            directory.mkdir(parents=True, exist_ok=True)
            for stale in directory.glob("*.json"):
                stale.unlink()
        for name, content in files.items():
            (GOLDEN / name).write_text(dumps(content))
    stored = {
        f"{path.parent.name}/{path.name}": path.read_text()
        for directory in DIRS
        for path in sorted(directory.glob("*.json"))
    }
    diffs: list[str] = []
    for name in sorted(stored.keys() - files.keys()):
        diffs.append(f"{name}: golden file, but the scenario no longer produces it")
    for name in sorted(files.keys() - stored.keys()):
        diffs.append(f"{name}: produced, but no golden file (UPDATE_GOLDEN=1 writes it)")
    for name in sorted(files.keys() & stored.keys()):
        now = dumps(files[name])
        if now != stored[name]:
            diff = difflib.unified_diff(
                stored[name].splitlines(), now.splitlines(), f"golden/{name}", "now", lineterm=""
            )
            diffs.append("\n".join(diff))
    assert not diffs, "the wire differs from tests/golden/:\n" + "\n".join(diffs)


def test_every_registered_method_has_a_golden_file() -> None:
    missing = [
        name
        for name in (*ACP_METHODS, *EXTENSION_METHODS)
        if not (METHODS_DIR / file_name(name)).is_file()
    ]
    assert not missing, f"methods without a golden file under tests/golden/methods: {missing}"


def test_every_notification_kind_has_a_golden_file() -> None:
    kinds = [
        file_name(Method.SESSION_UPDATE, kind)
        for kind in (
            "agent_message_chunk",
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "usage_update",
            "session_info_update",
            "current_mode_update",
            "config_option_update",
            "available_commands_update",
            "agent_thought_chunk",
            "plan",
        )
    ]
    kinds += [file_name(m) for m in (Method.STATE, Method.TURN_CHANGES, Method.REQUEST_PERMISSION)]
    missing = [name for name in kinds if not (NOTIFICATIONS_DIR / name).is_file()]
    assert not missing, f"notifications without a golden file: {missing}"


def test_every_sse_event_kind_has_a_golden_file() -> None:
    names = (
        "state",
        "permission_request",
        "permission_settled",
        "user_message",
        "agent_message_chunk",
        "usage_update",
        "session_info_update",
        "tool_call",
        "tool_call_update",
        "turn_changes",
        "current_mode_update",
        "compaction",
        "turn_end",
    )
    missing = [name for name in names if not (SSE_DIR / f"{name}.json").is_file()]
    assert not missing, f"SSE events without a golden file under tests/golden/sse: {missing}"
