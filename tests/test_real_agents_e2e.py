"""Real ACP agents from npm (claude-agent-acp, codex-acp) as a session's engine, through
the real sidecar, offline.

The sidecar runs inside the fake model server's loopback-only network namespace (a
launcher that nsenters, tests/agents/through_sidecar.py) and runs the agent in its
bubblewrap sandbox, which keeps that namespace: the agent reaches the loopback model and
nothing else (a DNS lookup or an unknown path fails the test). Through our ACP client side
each agent must: be picked at session/new; ask us (our option ids, mapped to its own)
before writing, our answer deciding (allow: written; reject: not); fail to write outside
the cwd; leave a turn's change we can list and rewind; leave no process after
session/close; and on session/resume continue its own session in a new process (the next
model request carries the first prompt) without its replay doubling our transcript.

A tap between the sidecar and the agent logs every ACP message: the test prints, and
asserts on, what each side asked of the other at each step.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agents.real_agents import Launch, claude_launch, codex_launch, ensure_installed
from agents.through_sidecar import (
    World,
    agent_requests,
    agents_toml,
    host_requests,
    launcher,
    permission_answers,
    start_world,
    tapped,
)
from harness import Sidecar, allow_once, marked_processes

from desktop.client import RpcError

pytestmark = pytest.mark.timeout(150)

TEXT = "hello from the scripted model\n"
WAIT = 90.0  # one request to the sidecar: a real agent's start or turn, on a busy machine
MARK = "AGENT_TEST_MARKER"
EROFS = ("Read-only file system", "EROFS", "os error 30")
Reply = dict[str, Any]
Answer = Callable[[dict[str, Any]], Any]


def claude_write(path: Path, text: str) -> Reply:
    return {"type": "tool_use", "name": "Write", "input": {"file_path": str(path), "content": text}}


def codex_write(path: Path, text: str) -> Reply:
    patch = f"*** Begin Patch\n*** Add File: {path}\n+{text.rstrip()}\n*** End Patch\n"
    return {"type": "apply_patch", "input": patch}


@dataclass(frozen=True)
class Case:
    name: str  # the agent's name in agents.toml (it replaces the preset of that name)
    server: str  # the fake model server's kind
    model_path: str
    launch: Callable[[Path, str], Launch]
    write: Callable[[Path, str], Reply]  # the model's reply that makes the agent write


CASES = [
    Case("claude", "anthropic", "/v1/messages", claude_launch, claude_write),
    Case("codex", "responses", "/v1/responses", codex_launch, codex_write),
]


def reject_once(params: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}


def tool_outputs(body: Any) -> list[str]:
    """What an agent told its model its tool calls gave (Anthropic tool_result blocks,
    Responses *_output items), in order."""
    if not isinstance(body, dict):
        return []
    out: list[str] = []
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_output"):
            out.append(json.dumps(item.get("output")))
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(json.dumps(block.get("content")))
    return out


@dataclass
class Turn:
    """What one prompt did, seen from our client, the tap and the model server."""

    stop: str
    asked: list[dict[str, Any]]  # our session/request_permission params
    answers: list[tuple[str, str]]  # the agent's option id and kind we selected, each time
    failed: list[str]  # content of the tool calls that failed
    told_model: list[str]  # tool outputs in the turn's last model request


@dataclass
class Run:
    """One agent's session through one sidecar, and the report of what each side asked."""

    case: Case
    world: World
    sidecar: Sidecar
    home: Path
    workspace: Path
    marker: str
    sid: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # failed checks later steps survive
    _tapped: int = 0

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        return await asyncio.wait_for(self.sidecar.client.request(method, params), WAIT)

    def step(self, name: str, **more: Any) -> list[dict[str, Any]]:
        """The tap's messages since the last step, summed up in the report under name."""
        entries = tapped(self.home)
        new, self._tapped = entries[self._tapped :], len(entries)
        self.report[name] = {
            "sidecar asked the agent": host_requests(new),
            "agent asked us": agent_requests(new),
            **more,
        }
        return new

    async def turn(self, name: str, text: str, answer: Answer, *replies: Reply) -> Turn:
        await self.world.control.script(*replies)
        self.sidecar.answer_permission = answer
        asked, seen = len(self.sidecar.asked), len(self.sidecar.seen)
        calls = len(await self.world.control.calls())
        task = self.sidecar.prompt_task(self.sid, text)
        result = await asyncio.wait_for(task, WAIT)
        failed = [
            json.dumps(p["update"].get("content"))
            for m, p in self.sidecar.seen[seen:]
            if m == "session/update"
            and p["update"].get("sessionUpdate") == "tool_call_update"
            and p["update"].get("status") == "failed"
        ]
        made = (await self.world.control.calls())[calls:]
        told = tool_outputs(made[-1]["body"]) if made else []
        tap = self.step(name)
        turn = Turn(
            result["stopReason"], self.sidecar.asked[asked:], permission_answers(tap), failed, told
        )
        self.report[name] |= {
            "stopReason": turn.stop,
            "our permission requests": [a["toolCall"].get("title") for a in turn.asked],
            "our answers as the agent's (option id, kind)": turn.answers,
            "failed tool calls": [f[:300] for f in failed],
        }
        return turn


async def none_left(marker: str, seconds: float = 15.0) -> list[int]:
    """Wait until no live process carries the marker; those left if some still do."""
    for _ in range(int(seconds / 0.1)):
        if not (left := marked_processes(MARK, marker)):
            return []
        await asyncio.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def installed() -> Path:
    return ensure_installed()


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    chosen: Case = request.param
    return chosen


@pytest.fixture
async def world(case: Case, installed: Path, tmp_path: Path) -> AsyncIterator[World]:
    started = await start_world(case.server, tmp_path)
    yield started
    started.ns.stop()


@pytest.fixture
def outside() -> Iterator[Path]:
    # Not under /tmp: the sandbox has its own /tmp, where a write would land unseen.
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="real-agent-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def run(case: Case, world: World, tmp_path: Path) -> AsyncIterator[Run]:
    """The sidecar in the model server's namespace, configured to run the case's agent
    (its marker in the agent's env; its HOME, the sidecar's, fresh and writable)."""
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    workspace.mkdir()
    marker = uuid.uuid4().hex
    launch = case.launch(home, world.base_url)
    toml = agents_toml(tmp_path / "agents.toml", case.name, launch, {MARK: marker}, [home])
    sidecar = await Sidecar.start(
        tmp_path / "data",
        "--agents-file",
        str(toml),
        env={"HOME": str(home)},
        python=launcher(world.ns, tmp_path),
    )
    running = Run(case, world, sidecar, home, workspace, marker)
    try:
        yield running
    finally:
        print(json.dumps({case.name: running.report}, indent=1))
        log = "\n".join(sidecar.client.stderr_tail)
        (tmp_path / "sidecar.stderr").write_text(log, encoding="utf-8")
        noted = [ln for ln in log.splitlines() if " ERROR " in ln or "Traceback" in ln]
        print("sidecar errors:", "\n".join(noted) or "none")
        await sidecar.close()
    assert await none_left(marker) == [], "agent processes outlived the sidecar"


async def test_a_real_agent_is_a_sessions_engine_through_the_sidecar(
    run: Run, outside: Path
) -> None:
    case, world, sidecar, workspace = run.case, run.world, run.sidecar, run.workspace
    token = uuid.uuid4().hex[:12]
    prompts = [
        f"Please write hello.txt (first prompt {token})",
        "Now write second.txt",
        f"Now write {outside}/outside.txt",
        "What did I ask you first?",
    ]

    # 1. The sidecar is in the model server's network namespace (and so is its agent).
    def net(pid: int) -> str:
        return os.readlink(f"/proc/{pid}/ns/net")

    assert net(sidecar.pid) == net(world.ns.pid) != net(os.getpid())

    # 2. The session runs the agent named at session/new.
    params = {"cwd": str(workspace), "mcpServers": [], "_meta": {"agent": case.name}}
    summary = (await run.call("session/new", params))["_meta"]
    run.sid = summary["sessionId"]
    assert summary["agent"] == case.name and summary["status"] == "idle", summary
    first_pids = set(marked_processes(MARK, run.marker))
    assert first_pids, "no process carries the agent's marker"
    run.step("session/new", summary={k: summary[k] for k in ("agent", "status")})

    # 3. Its permission requests are ours to answer, and the answer counts.
    hello = workspace / "hello.txt"
    one = await run.turn("turn 1 (allow)", prompts[0], allow_once, case.write(hello, TEXT))
    assert one.stop == "end_turn"
    assert one.asked, "the agent wrote without asking us"
    assert {o["optionId"] for o in one.asked[0]["options"]} >= {"allow_once", "reject_once"}
    assert one.answers and one.answers[0][1] == "allow_once", one.answers
    assert hello.read_text(encoding="utf-8") == TEXT

    second = workspace / "second.txt"
    two = await run.turn("turn 2 (reject)", prompts[1], reject_once, case.write(second, TEXT))
    assert two.asked, "the agent wrote without asking us"
    assert two.answers and two.answers[0][1] == "reject_once", two.answers
    assert not second.exists(), "written although we rejected it"

    # 4. A write outside the cwd (allowed by us) is not made. The same write into a dir
    # outside the cwd that the sandbox leaves writable (the agent's home) is: the agent
    # does not refuse such writes itself, the sandbox's read-only filesystem stops it.
    target, control = outside / "outside.txt", run.home / "control.txt"
    replies = (case.write(target, TEXT), case.write(control, TEXT))
    three = await run.turn("turn 3 (outside the cwd)", prompts[2], allow_once, *replies)
    told = [t[:300] for t in three.told_model if str(outside) in t]
    read_only = any(e in text for text in [*three.failed, *told] for e in EROFS)
    run.report["turn 3 (outside the cwd)"] |= {
        "agent told its model": told,
        "stopped by": "the sandbox's read-only filesystem"
        + (" (EROFS reported)" if read_only else " (the agent reports no errno)"),
    }
    assert [a[1] for a in three.answers] == ["allow_once", "allow_once"], three.answers
    assert not target.exists(), "the agent wrote outside the session's cwd"
    assert control.read_text(encoding="utf-8") == TEXT, "the control write was not made"
    assert told, "the agent did not tell its model the write failed"

    # 5. Turn 1's change is listed with its diff, and a code rewind removes it (checked
    # here, asserted at the end: the steps after it do not depend on it).
    changes = await run.call("_session/changes", {"sessionId": run.sid, "turn": 1})
    files = {f["path"]: f for f in changes["files"]}
    if "hello.txt" not in files:
        run.problems.append(f"_session/changes of turn 1 does not list hello.txt: {changes}")
    elif files["hello.txt"]["status"] != "added" or f"+{TEXT}" not in changes["diff"]:
        run.problems.append(f"turn 1's diff does not add hello.txt's line: {changes}")
    rewind = {"sessionId": run.sid, "turn": 1, "scope": "code"}
    try:
        rewound = await run.call("_session/rewind", rewind)
    except RpcError as exc:
        rewound = {"error": str(exc)}
        run.problems.append(f"_session/rewind of turn 1 failed: {exc}")
    if hello.exists():
        run.problems.append("the code rewind of turn 1 left hello.txt on disk")
    run.step("changes and rewind", files=sorted(files), rewind=rewound, problems=run.problems)

    # 6. Close: nothing of the agent is left.
    await run.call("session/close", {"sessionId": run.sid})
    assert await none_left(run.marker) == []
    run.step("session/close")

    # 7. Resume: a new process continues the agent's own session, which our transcript
    # does not get again.
    before = (await sidecar.messages(run.sid))["total"]
    calls = len(await world.control.calls())
    resumed = await run.call("session/resume", {"sessionId": run.sid, "cwd": str(workspace)})
    assert resumed["_meta"]["agent"] == case.name
    after_resume = (await sidecar.messages(run.sid))["total"]
    pids = set(marked_processes(MARK, run.marker))
    assert pids and not pids & first_pids, (pids, first_pids)
    reply = {"type": "text", "text": "You asked me to write hello.txt."}
    four = await run.turn("session/resume, turn 4", prompts[3], allow_once, reply)
    tap = run.report["session/resume, turn 4"]
    tap |= {"transcript before resume": before, "after resume": after_resume}
    assert four.stop == "end_turn"
    assert tap["sidecar asked the agent"][:2] in (
        ["initialize", "session/resume"],
        ["initialize", "session/load"],
    ), tap
    assert after_resume == before, "the agent's replay was appended to our transcript"
    later = [c for c in (await world.control.calls())[calls:] if c["path"] == case.model_path]
    assert later and token in json.dumps(later[0]["body"]), "the resumed agent forgot"
    page = await sidecar.messages(run.sid, limit=500)
    assert [m["text"] for m in page["messages"] if m["type"] == "user"] == prompts

    # 1, again: nothing but the model was reached.
    made = await world.control.calls()
    run.report["model calls"] = [f"{c['method']} {c['path']}" for c in made]
    unknown = [(c["method"], c["path"]) for c in made if not c["known"]]
    assert unknown == [], f"the agent called paths the fake does not serve: {unknown}"
    assert (looked_up := await world.control.dns()) == [], f"DNS lookups: {looked_up}"
    assert not run.problems, "\n".join(run.problems)


async def test_two_sessions_of_a_real_agent_share_its_process(
    case: Case, world: World, tmp_path: Path
) -> None:
    """Declared `shared_process` (as its preset is): two sessions in one workspace run on
    one agent process, each its own agent session and its own turns; closing one ends
    only its agent session (`session/close`), the last one out stops the process."""
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    workspace.mkdir()
    marker = uuid.uuid4().hex
    launch = case.launch(home, world.base_url)
    toml = agents_toml(
        tmp_path / "agents.toml", case.name, launch, {MARK: marker}, [home], shared=True
    )
    sidecar = await Sidecar.start(
        tmp_path / "data",
        "--agents-file",
        str(toml),
        env={"HOME": str(home)},
        python=launcher(world.ns, tmp_path),
    )

    async def call(method: str, params: dict[str, Any]) -> Any:
        return await asyncio.wait_for(sidecar.client.request(method, params), WAIT)

    def said(sid: str) -> str:
        return "".join(
            u["content"].get("text", "") for u in sidecar.updates(sid, "agent_message_chunk")
        )

    try:
        params = {"cwd": str(workspace), "mcpServers": [], "_meta": {"agent": case.name}}
        first = (await call("session/new", params))["sessionId"]
        second = (await call("session/new", params))["sessionId"]
        asked = host_requests(tapped(home))
        assert asked.count("initialize") == 1 and asked.count("session/new") == 2, asked
        ids = [
            e["result"]["sessionId"] for e in tapped(home) if "sessionId" in (e.get("result") or {})
        ]
        assert len(set(ids)) == 2, ids
        for sid, word in ((first, "first-answer"), (second, "second-answer")):
            await world.control.script({"type": "text", "text": word})
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"Say {word}"}]}
            assert (await call("session/prompt", prompt))["stopReason"] == "end_turn"
        assert "first-answer" in said(first) and "second-answer" not in said(first)
        assert "second-answer" in said(second) and "first-answer" not in said(second)
        await call("session/close", {"sessionId": first})
        closed = [e for e in tapped(home) if e.get("method") == "session/close"]
        assert len(closed) == 1 and closed[0]["from"] == "host", closed
        assert marked_processes(MARK, marker), "closing one session stopped the shared process"
        await world.control.script({"type": "text", "text": "still-here"})
        prompt = {"sessionId": second, "prompt": [{"type": "text", "text": "Say still-here"}]}
        assert (await call("session/prompt", prompt))["stopReason"] == "end_turn"
        assert "still-here" in said(second)
        await call("session/close", {"sessionId": second})
        assert await none_left(marker) == []
    finally:
        print(json.dumps({case.name: host_requests(tapped(home))}))
        await sidecar.close()
    assert await none_left(marker) == []
