"""AGENTS.md end to end: the real sidecar (`--provider openai`) against the loopback Chat
Completions server, which records the system prompt the model was sent.

A real git repository (`git init`), real files, symlinks and a 10 MB file; the session's
summary (`_session/status`, the `_session/state` notifications) lists what was used.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from external_agents import AgentSetup
from fake_process import FakeServerProcess
from harness import Sidecar

from sidecar.agent.instructions import MAX_FILE


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def agent(data_dir: Path, fake: FakeServerProcess) -> AsyncIterator[Sidecar]:
    running = await Sidecar.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        yield running
    finally:
        await running.close()


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


async def system_prompts(fake: FakeServerProcess) -> list[str]:
    return [str(r["body"]["messages"][0]["content"]) for r in await fake.requests()]


def listed(summary: dict[str, Any]) -> list[tuple[str, int, bool, str | None]]:
    return [(f["path"], f["bytes"], f["cut"], f["skipped"]) for f in summary["instructions"]]


async def test_agents_md_from_the_repo_root_down_to_the_cwd_nearest_last_and_re_read(
    agent: Sidecar, fake: FakeServerProcess, tmp_path: Path
):
    (tmp_path / "AGENTS.md").write_text("ABOVE THE REPO: never read\n")
    repo = git_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("ROOT RULES: run make test\n")
    pkg = repo / "pkg"
    pkg.mkdir()
    (pkg / "CLAUDE.md").write_text("PKG CLAUDE: no AGENTS.md here\n")
    app = pkg / "app"
    app.mkdir()
    (app / "AGENTS.md").write_text("APP RULES v1\n")
    (app / "CLAUDE.md").write_text("APP CLAUDE: AGENTS.md wins here\n")

    summary = await agent.new_session(app)
    sid = summary["sessionId"]
    expected = [
        (str(repo / "AGENTS.md"), 26, False, None),
        (str(pkg / "CLAUDE.md"), 30, False, None),
        (str(app / "AGENTS.md"), 13, False, None),
    ]
    assert listed(await agent.status(sid)) == expected  # read when the runtime started

    await agent.prompt(sid, "first")
    (prompt,) = await system_prompts(fake)
    order = [prompt.index(text) for text in ("ROOT RULES", "PKG CLAUDE", "APP RULES v1")]
    assert order == sorted(order), prompt
    for path, *_ in expected:
        assert f"## {path}\n" in prompt  # each under a heading naming its file
    assert "ABOVE THE REPO" not in prompt and "APP CLAUDE" not in prompt
    assert "update_plan" in prompt  # the plan tool's line

    (app / "AGENTS.md").write_text("APP RULES v2, rewritten between turns\n")
    await agent.prompt(sid, "second")
    second = (await system_prompts(fake))[-1]
    assert "APP RULES v2, rewritten between turns" in second and "APP RULES v1" not in second
    changed = (str(app / "AGENTS.md"), 38, False, None)
    assert listed(await agent.status(sid))[-1] == changed
    # Clients were told: a state notification carries the new list.
    await agent.wait_for(
        lambda method, params: (
            method == "_session/state"
            and params.get("sessionId") == sid
            and listed(params)[-1:] == [changed]
        )
    )


async def test_a_huge_a_binary_and_an_outside_symlink_agents_md(
    agent: Sidecar, fake: FakeServerProcess, tmp_path: Path
):
    repo = git_repo(tmp_path / "repo")
    size = 10 * 1024 * 1024
    with open(repo / "AGENTS.md", "w") as handle:  # 10 MB of real lines
        line = "ROOT LINE " + "x" * 53 + "\n"
        handle.write(line * (size // len(line)) + "y" * (size % len(line)))
    sub = repo / "sub"
    sub.mkdir()
    (sub / "AGENTS.md").write_bytes(b"BINARY\x00\x01\x02 rules")
    deeper = sub / "deeper"
    deeper.mkdir()
    outside = tmp_path / "secret.md"
    outside.write_text("OUTSIDE SECRET: must never reach the model\n")
    (deeper / "AGENTS.md").symlink_to(outside)
    inner = deeper / "inner"
    inner.mkdir()
    (inner / "real.md").write_text("INNER VIA SYMLINK: inside the repo, so read\n")
    (inner / "AGENTS.md").symlink_to(inner / "real.md")

    sid = (await agent.new_session(inner))["sessionId"]
    await agent.prompt(sid, "go")
    (prompt,) = await system_prompts(fake)
    assert f"[... AGENTS.md cut at {MAX_FILE} bytes of {size}]" in prompt
    assert prompt.count("ROOT LINE") < MAX_FILE // 60  # bounded, not 10 MB
    assert "BINARY" not in prompt and "OUTSIDE SECRET" not in prompt
    assert "INNER VIA SYMLINK" in prompt
    assert listed(await agent.status(sid)) == [
        (str(repo / "AGENTS.md"), size, True, None),
        (str(sub / "AGENTS.md"), 15, False, "a binary file (NUL bytes)"),
        (str(deeper / "AGENTS.md"), 0, False, "a symlink to outside the project"),
        (str(inner / "AGENTS.md"), (inner / "real.md").stat().st_size, False, None),
    ]


async def test_without_a_repository_only_the_cwd_is_read_and_a_closed_session_lists_none(
    agent: Sidecar, fake: FakeServerProcess, tmp_path: Path
):
    (tmp_path / "AGENTS.md").write_text("PARENT: no repository, so never read\n")
    cwd = tmp_path / "plain"
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text("PLAIN CLAUDE\n")
    sid = (await agent.new_session(cwd))["sessionId"]
    await agent.prompt(sid, "hi")
    (prompt,) = await system_prompts(fake)
    assert "PLAIN CLAUDE" in prompt and "PARENT" not in prompt
    assert listed(await agent.status(sid)) == [(str(cwd / "CLAUDE.md"), 13, False, None)]
    closed = (await agent.call("session/close", {"sessionId": sid}))["_meta"]
    assert closed["instructions"] == []  # observed by a live runtime only


async def test_an_external_agent_reads_its_own_and_the_summary_lists_none(
    data_dir: Path, tmp_path: Path
):
    repo = git_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("ROOT RULES\n")
    agents = AgentSetup(tmp_path / "agents").add("scripted")
    sidecar = await Sidecar.start(data_dir, *agents.args())
    try:
        summary = await sidecar.new_session(repo, agent="scripted")
        assert summary["status"] == "idle" and summary["instructions"] == []
        await sidecar.prompt(summary["sessionId"], "say hi")
        assert (await sidecar.status(summary["sessionId"]))["instructions"] == []
    finally:
        await sidecar.close()
