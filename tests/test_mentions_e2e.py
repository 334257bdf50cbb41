"""`@` mentions end to end: `_session/files` completes paths under a live session's cwd (a
real git repository, or a plain directory walked with its `.gitignore`s), and a prompt's
`resource_link` to a file reaches the model as the file's text, or as a note saying why
not. The real sidecar runs as a child with the OpenAI provider against the loopback fake
(tests/fake_chat_server.py), which records what the model received."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode
from protocol.methods import Method

MODEL = "test-model"
GIT_ID = ["-c", "user.name=mentions", "-c", "user.email=mentions@example.com"]


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
        MODEL,
        "--base-url",
        fake.base_url,
        env={"OPENAI_API_KEY": "test"},
    )
    try:
        yield running
    finally:
        await running.close()


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *GIT_ID, *args], cwd=cwd, check=True, capture_output=True)


def write(root: Path, relative: str, text: str = "x\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository: committed and untracked files, ignored ones, and a symlink that
    points out of it, beside a directory outside it."""
    outside = tmp_path / "outside"
    write(outside, "secret_config.py", "SECRET = 1\n")
    root = tmp_path / "repo"
    write(root, "README.md", "# repo\n")
    write(root, "src/server/handlers/request_parser.py", "def parse(): ...\n")
    write(root, "src/client/view.py")
    write(root, ".gitignore", "build/\n*.log\n")
    write(root, "build/request_parser_generated.py")
    write(root, "debug_request.log")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    write(root, "notes/request_plan.md", "untracked, not ignored\n")
    (root / "linked_out").symlink_to(outside)
    (root / "linked_secret.py").symlink_to(outside / "secret_config.py")
    return root


async def files(sidecar: Sidecar, sid: str, query: str, **more: Any) -> dict[str, Any]:
    return await sidecar.call(Method.FILES, {"sessionId": sid, "query": query, **more})


def paths(answer: dict[str, Any]) -> list[str]:
    return [f["path"] for f in answer["files"]]


async def test_completion_in_a_git_repository(sidecar: Sidecar, repo: Path) -> None:
    sid = (await sidecar.new_session(repo))["sessionId"]
    found = await files(sidecar, sid, "reqpars")  # fuzzy: the characters in order
    assert paths(found)[0] == "src/server/handlers/request_parser.py"
    assert found["files"][0]["kind"] == "file" and found["truncated"] is False
    # Ignored by .gitignore: never offered, however well it matches.
    assert not any(p.startswith("build") or p.endswith(".log") for p in paths(found))
    untracked = await files(sidecar, sid, "request_plan")
    assert paths(untracked)[0] == "notes/request_plan.md"  # untracked but not ignored
    directories = await files(sidecar, sid, "handlers")
    assert directories["files"][0] == {"path": "src/server/handlers", "kind": "dir"}
    # A symlink out of the cwd is not listed, nor anything through it.
    everything = paths(await files(sidecar, sid, "", limit=500))
    assert "README.md" in everything and ".gitignore" in everything
    assert not any("secret" in p or p.startswith("linked_out") for p in everything), everything
    assert not any(p.startswith(("..", "/")) for p in everything)
    # Better matches first: the whole word in a base name before a scattered match.
    assert paths(await files(sidecar, sid, "view"))[0] == "src/client/view.py"
    limited = await files(sidecar, sid, "", limit=2)
    assert len(limited["files"]) == 2 and limited["truncated"] is True
    # The top level first for an empty query.
    assert all("/" not in p for p in paths(limited))


async def test_completion_of_a_subdirectory_lists_only_below_it(
    sidecar: Sidecar, repo: Path
) -> None:
    sid = (await sidecar.new_session(repo / "src"))["sessionId"]
    everything = paths(await files(sidecar, sid, "", limit=500))
    assert "server/handlers/request_parser.py" in everything
    assert "README.md" not in everything and not any(p.startswith("..") for p in everything)


async def test_completion_outside_git_walks_honouring_gitignore(
    sidecar: Sidecar, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write(outside, "target.txt")
    root = tmp_path / "plain"
    write(root, "lib/deep/module_alpha.py")
    write(root, ".gitignore", "/node_modules/\n")
    write(root, "node_modules/pkg/module_alpha.js")
    write(root, "lib/.gitignore", "*.tmp\n")
    write(root, "lib/scratch.tmp")
    write(root, "vendor/node_modules/kept_alpha.js")  # anchored: only the top one is ignored
    (root / "escape").symlink_to(outside)
    sid = (await sidecar.new_session(root))["sessionId"]
    found = paths(await files(sidecar, sid, "modalpha"))
    assert found[0] == "lib/deep/module_alpha.py", found
    assert not any(p.startswith("node_modules") for p in found), found
    everything = paths(await files(sidecar, sid, "", limit=500))
    assert "vendor/node_modules/kept_alpha.js" in everything
    assert not any(p.startswith("node_modules") or p.endswith(".tmp") for p in everything)
    assert not any("escape" in p or "target" in p for p in everything), everything


async def test_the_sidecars_own_data_dir_inside_the_cwd_is_never_listed(repo: Path) -> None:
    data = repo / "sidecar-data"
    sidecar = await Sidecar.start(data)
    try:
        sid = (await sidecar.new_session(repo))["sessionId"]
        everything = paths(await files(sidecar, sid, "", limit=500))
        assert "README.md" in everything
        assert not any(p.startswith("sidecar-data") for p in everything), everything
        assert paths(await files(sidecar, sid, "sessions.db")) == []
        (data / "notes.txt").write_text("private\n")  # and a mention of it is refused
        answer = await prompt_blocks(
            sidecar, sid, {"type": "text", "text": "read"}, link(data / "notes.txt")
        )
        assert (
            "sidecar-data/notes.txt: not inlined: the sidecar's own files are hidden"
            in (answer["_meta"]["response"])
        )
    finally:
        await sidecar.close()


async def test_new_files_show_up_after_a_refresh(sidecar: Sidecar, repo: Path) -> None:
    sid = (await sidecar.new_session(repo))["sessionId"]
    assert paths(await files(sidecar, sid, "brand_new")) == []
    write(repo, "brand_new_module.py")
    # The listing is refreshed in the background once it is a few seconds old.
    for _ in range(100):
        if "brand_new_module.py" in paths(await files(sidecar, sid, "brand_new")):
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError("a new file never appeared in the completion")


async def test_bad_input_names_the_field(sidecar: Sidecar, repo: Path) -> None:
    sid = (await sidecar.new_session(repo))["sessionId"]
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"query": "a\nb"}, "query"),
        ({"query": 7}, "query"),
        ({"query": "x" * 2000}, "query"),
    ):
        with pytest.raises(RpcError) as refused:
            await sidecar.call(Method.FILES, {"sessionId": sid, "query": "", **params})
        assert refused.value.code == ErrorCode.INVALID_PARAMS, params
        assert field in str(refused.value.message) + str(refused.value.data), params
    await sidecar.call(Method.SESSION_CLOSE, {"sessionId": sid})
    with pytest.raises(RpcError) as not_live:
        await files(sidecar, sid, "x")
    assert not_live.value.code == ErrorCode.SESSION_NOT_LIVE


async def test_a_hundred_thousand_files_complete(sidecar: Sidecar, tmp_path: Path) -> None:
    root = tmp_path / "big"
    for a in range(100):
        for b in range(20):
            directory = root / f"pkg{a:03d}" / f"mod{b:02d}"
            directory.mkdir(parents=True)
            for c in range(50):
                (directory / f"file_{c:02d}.py").touch()
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "big")
    sid = (await sidecar.new_session(root))["sessionId"]
    found = await files(sidecar, sid, "pkg042mod07file_33")
    assert paths(found)[0] == "pkg042/mod07/file_33.py", paths(found)[:5]
    again = await files(sidecar, sid, "file_33", limit=10)  # from the cached listing
    assert len(again["files"]) == 10 and again["truncated"] is True
    assert all(p.endswith("file_33.py") for p in paths(again))


def link(path: Path | str, name: str | None = None) -> dict[str, Any]:
    return {"type": "resource_link", "name": name or str(path), "uri": Path(path).as_uri()}


async def prompt_blocks(sidecar: Sidecar, sid: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return await sidecar.call(Method.SESSION_PROMPT, {"sessionId": sid, "prompt": list(blocks)})


async def model_saw(fake: FakeServerProcess) -> str:
    """The last user message of the last request the model got."""
    request = (await fake.requests())[-1]["body"]
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


async def test_a_mentioned_small_file_reaches_the_model(
    agent: Sidecar, fake: FakeServerProcess, repo: Path
) -> None:
    sid = (await agent.new_session(repo))["sessionId"]
    target = repo / "src/server/handlers/request_parser.py"
    answer = await prompt_blocks(
        agent,
        sid,
        {"type": "text", "text": "explain @src/server/handlers/request_parser.py"},
        link(target, "src/server/handlers/request_parser.py"),
    )
    assert answer["stopReason"] == "end_turn"
    seen = await model_saw(fake)
    assert seen.startswith("explain @src/server/handlers/request_parser.py\n")
    assert (
        "[file src/server/handlers/request_parser.py]\ndef parse(): ...\n"
        "[end of src/server/handlers/request_parser.py]"
    ) in seen


async def test_mentions_that_cannot_be_inlined_are_noted_never_read_whole(
    agent: Sidecar, fake: FakeServerProcess, repo: Path, tmp_path: Path
) -> None:
    sid = (await agent.new_session(repo))["sessionId"]
    huge = repo / "huge.bin"
    with open(huge, "wb") as sparse:  # 1 GB that takes no disk (truncate -s 1G)
        sparse.truncate(1 << 30)
    gone = write(repo, "gone_soon.py")
    gone.unlink()
    binary = repo / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    fifo = repo / "pipe"
    os.mkfifo(fifo)  # a blocking open would wait for a writer: this one must not
    read_before = _read_bytes(agent.pid)
    answer = await prompt_blocks(
        agent,
        sid,
        {"type": "text", "text": "look at these"},
        link(tmp_path / "outside/secret_config.py"),
        link(repo / "linked_secret.py"),  # inside by name, outside by its target
        link(gone),
        link(huge),
        link(binary),
        link(repo / "src"),
        link(fifo),
    )
    assert answer["stopReason"] == "end_turn"  # a note each, never a failed turn
    read_after = _read_bytes(agent.pid)
    seen = await model_saw(fake)
    outside = tmp_path / "outside/secret_config.py"
    assert f"[mentioned file {outside}: not inlined: it is outside the session's directory" in seen
    assert f"[mentioned file {repo}/linked_secret.py: not inlined: it is outside" in seen
    assert "SECRET" not in seen
    assert "[mentioned file gone_soon.py: not found (moved or deleted" in seen
    assert "[mentioned file huge.bin (1.0 GiB): not inlined: larger than 64.0 KiB" in seen
    assert "[mentioned file image.png (10 bytes): not inlined: binary]" in seen
    assert "[mentioned directory src/: not inlined" in seen
    assert "[mentioned file pipe: not inlined: not a regular file]" in seen
    assert read_after - read_before < 64 << 20, "the 1 GB file was read"


async def test_a_link_that_is_no_local_file_stays_a_reference(
    agent: Sidecar, fake: FakeServerProcess, repo: Path
) -> None:
    sid = (await agent.new_session(repo))["sessionId"]
    await prompt_blocks(
        agent,
        sid,
        {"type": "text", "text": "see"},
        {"type": "resource_link", "name": "spec", "uri": "https://example.com/spec"},
    )
    assert "[resource: spec <https://example.com/spec>]" in await model_saw(fake)


def _read_bytes(pid: int) -> int:
    """Bytes the process has read so far (any file or pipe), from /proc."""
    with open(f"/proc/{pid}/io") as io:
        for line in io:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/PID/io")
