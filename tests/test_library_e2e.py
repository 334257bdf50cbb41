"""The session library through a real sidecar: search, archive, last activity, export
and import (issue 15, point 7)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode
from protocol.methods import EXTENSION_METHODS, Method
from sidecar.store import migrations


async def listed(sidecar: Sidecar, **meta: Any) -> list[str]:
    params: dict[str, Any] = {"_meta": meta} if meta else {}
    ids: list[str] = []
    while True:
        page = await sidecar.call("session/list", params)
        ids += [entry["sessionId"] for entry in page["sessions"]]
        if "nextCursor" not in page:
            return ids
        params = {**params, "cursor": page["nextCursor"]}


async def titled(sidecar: Sidecar, workspace: Path, title: str, *prompts: str) -> str:
    sid = (await sidecar.new_session(workspace, title=title))["sessionId"]
    for text in prompts:
        await sidecar.prompt(sid, text)
    return sid


def test_the_library_methods_are_extensions() -> None:
    for method in (Method.ARCHIVE, Method.EXPORT, Method.IMPORT):
        assert method in EXTENSION_METHODS and method.startswith("_session/")


async def test_search_finds_transcript_text_and_titles_and_survives_restart(
    data_dir: Path, workspace: Path
) -> None:
    sidecar = await Sidecar.start(data_dir)
    try:
        teapot = await titled(sidecar, workspace, "Kitchen", "where is the teapot?")
        gazebo = await titled(sidecar, workspace, "Gazebo plans", "measure twice")
        await titled(sidecar, workspace, "Other", "nothing relevant")
        assert await listed(sidecar, query="teapot") == [teapot]
        assert await listed(sidecar, query="Echo TEAPOT") == [teapot]  # the reply too
        assert await listed(sidecar, query="gazebo") == [gazebo]  # the title
        assert await listed(sidecar, query="gaz meas") == [gazebo]  # word prefixes
        assert await listed(sidecar, query="teapot gazebo") == []
        assert len(await listed(sidecar, query="")) == 3
        await sidecar.call("_session/rename", {"sessionId": teapot, "title": "Porcelain"})
        assert await listed(sidecar, query="porcelain") == [teapot]
    finally:
        await sidecar.close()
    again = await Sidecar.start(data_dir)
    try:
        assert await listed(again, query="teapot") == [teapot]
        assert await listed(again, query="porcelain") == [teapot]
    finally:
        await again.close()


HOSTILE = ['"', 'tea"pot', "*", "tea*", "NEAR(teapot where)", "-teapot", "teapot -where",
           "(", ")", "AND", "OR", "NOT teapot", "^", "title:x", "{a b}", "%", "\\",
           "'; DROP TABLE sessions; --", "x" * 1000]  # fmt: skip


async def test_hostile_queries_never_error(sidecar: Sidecar, workspace: Path) -> None:
    teapot = await titled(sidecar, workspace, "Kitchen", "where is the teapot NEAR the AND?")
    for query in HOSTILE:
        found = await listed(sidecar, query=query)
        assert found in ([], [teapot]), query
    assert await listed(sidecar, query="NEAR(teapot where)") == [teapot]
    assert await listed(sidecar, query='"teapot"') == [teapot]
    assert await listed(sidecar) == [teapot]  # still there, still listed


async def test_bad_list_meta_is_invalid_params(sidecar: Sidecar) -> None:
    for meta in ({"query": 5}, {"archived": "yes"}, {"query": "x" * 1001}):
        with pytest.raises(RpcError) as refused:
            await sidecar.call("session/list", {"_meta": meta})
        assert refused.value.code == ErrorCode.INVALID_PARAMS
    with pytest.raises(RpcError) as cursor:
        await sidecar.call("session/list", {"cursor": "c12"})
    assert cursor.value.code == ErrorCode.INVALID_PARAMS


async def test_list_is_by_last_activity(sidecar: Sidecar, workspace: Path) -> None:
    first = await titled(sidecar, workspace, "first")
    second = await titled(sidecar, workspace, "second")
    assert (await listed(sidecar))[:2] == [second, first]
    await sidecar.prompt(first, "back to work")
    assert (await listed(sidecar))[:2] == [first, second]
    page = await sidecar.call("session/list")
    times = [entry["updatedAt"] for entry in page["sessions"]]
    assert times == sorted(times, reverse=True)


async def test_archive_hides_and_shows(sidecar: Sidecar, workspace: Path) -> None:
    kept = await titled(sidecar, workspace, "kept")
    old = await titled(sidecar, workspace, "old work", "archived teapot")
    summary = await sidecar.call("_session/archive", {"sessionId": old, "archived": True})
    assert summary["archived"] is True and summary["live"] is True  # a live one stays live
    assert (await sidecar.status(old))["archived"] is True
    assert await listed(sidecar) == [kept]
    assert await listed(sidecar, archived=True) == [old]
    assert await listed(sidecar, query="teapot") == []
    assert await listed(sidecar, query="teapot", archived=True) == [old]
    await sidecar.prompt(old, "still works")  # archiving changes nothing else
    restored = await sidecar.call("_session/archive", {"sessionId": old, "archived": False})
    assert restored["archived"] is False
    assert set(await listed(sidecar)) == {kept, old}
    with pytest.raises(RpcError) as missing:
        await sidecar.call("_session/archive", {"sessionId": "sess_nope", "archived": True})
    assert missing.value.code == ErrorCode.SESSION_NOT_FOUND


async def test_export_then_import_round_trip(
    sidecar: Sidecar, workspace: Path, tmp_path: Path
) -> None:
    sid = await titled(sidecar, workspace, "Round trip", "hello there", "$ echo from a tool")
    await sidecar.call("_session/rename", {"sessionId": sid, "title": "Round trip ✓"})
    before = await sidecar.messages(sid)
    out = tmp_path / "exports"
    out.mkdir()
    written = await sidecar.call(
        "_session/export", {"sessionId": sid, "format": "jsonl", "directory": str(out)}
    )
    path = Path(written["path"])
    assert path.parent == out and path.name == f"{sid}.jsonl"
    assert path.stat().st_mode & 0o077 == 0  # owner only: transcripts may hold secrets
    lines = path.read_text().splitlines()
    assert written["entries"] == before["total"] == len(lines) - 1
    assert written["bytes"] == path.stat().st_size
    header = json.loads(lines[0])
    assert (header["format"], header["version"]) == ("acp-session-host/session", 1)
    assert header["session"]["sessionId"] == sid and "mcpServers" not in header["session"]

    imported = await sidecar.call("_session/import", {"path": str(path)})
    new = imported["sessionId"]
    assert new != sid and imported["importedFrom"] == sid
    assert imported["title"] == "Round trip ✓" and imported["live"] is False
    assert imported["messageCount"] == before["total"]
    assert await sidecar.messages(new) == before
    # Inline, the same content; and the import is a working session.
    inline = await sidecar.call("_session/export", {"sessionId": sid})
    assert inline["content"] == path.read_text()
    again = await sidecar.call("_session/import", {"content": inline["content"]})
    assert (await sidecar.messages(again["sessionId"])) == before
    await sidecar.call("session/resume", {"sessionId": new, "cwd": str(workspace)})
    await sidecar.prompt(new, "continued after import")
    assert (await sidecar.messages(new))["total"] == before["total"] + 2
    assert new in await listed(sidecar, query="continued")


@contextlib.contextmanager
def refused(code: int = ErrorCode.INVALID_PARAMS) -> Iterator[list[RpcError]]:
    caught: list[RpcError] = []
    with pytest.raises(RpcError) as error:
        yield caught
    caught.append(error.value)
    assert error.value.code == code, error.value


async def test_a_bad_import_line_is_refused_and_nothing_is_created(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = await titled(sidecar, workspace, "source", "one", "two")
    content = (await sidecar.call("_session/export", {"sessionId": sid}))["content"]
    lines = content.splitlines()
    before = await listed(sidecar, archived=False)

    bad_lines = {
        3: '{"role": "user"}',  # no content
        2: "not json",
        4: '{"role": "wizard", "content": "x"}',
        5: '{"role": "user", "content": 5}',
        1: '{"format": "something-else", "version": 1}',
    }
    for number, bad in bad_lines.items():
        changed = [*lines[: number - 1], bad, *lines[number:]]
        with refused() as caught:
            await sidecar.call("_session/import", {"content": "\n".join(changed)})
        assert f"line {number}" in caught[0].message, caught[0].message
    with refused() as caught:  # a cut file: fewer entries than the header counts
        await sidecar.call("_session/import", {"content": "\n".join(lines[:-1])})
    assert "counts 4" in caught[0].message
    with refused():
        await sidecar.call("_session/import", {"content": ""})
    with refused():
        await sidecar.call("_session/import", {"path": "relative.jsonl"})
    with refused():
        await sidecar.call("_session/import", {"path": "/nonexistent/x.jsonl"})
    with refused():
        await sidecar.call("_session/import", {})
    with refused():  # the exported directory is gone here: say so, create nothing
        await sidecar.call("_session/import", {"content": content, "cwd": "/nonexistent/dir"})
    assert await listed(sidecar, archived=False) == before


async def test_an_export_never_writes_through_a_planted_temporary_symlink(
    sidecar: Sidecar, workspace: Path, tmp_path: Path
) -> None:
    """The export's directory may be the session's cwd, where its commands can plant a
    symlink under the temporary file's predictable name."""
    sid = await titled(sidecar, workspace, "planted", "hello")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("keep me\n")
    secret.chmod(0o600)
    planted = workspace / f"{sid}.jsonl.{sidecar.pid}.partial"
    planted.symlink_to(secret)
    written = await sidecar.call("_session/export", {"sessionId": sid, "directory": str(workspace)})
    assert secret.read_text() == "keep me\n" and secret.stat().st_mode & 0o777 == 0o600
    path = Path(written["path"])
    assert not path.is_symlink() and path.stat().st_mode & 0o077 == 0
    assert json.loads(path.read_text().splitlines()[0])["session"]["sessionId"] == sid
    assert not planted.exists() and not planted.is_symlink()


BEYOND_INT64 = 2**63  # one more than SQLite's (and PostgreSQL's BIGINT) largest integer


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("header", {"turns": BEYOND_INT64}, "turns"),
        ("header", {"contextFrom": BEYOND_INT64}, "contextFrom"),
        ("header", {"summaryIndex": 2**70}, "summaryIndex"),
        ("header", {"usage": {"inputTokens": BEYOND_INT64, "outputTokens": 0}}, "inputTokens"),
        ("header", {"usage": {"inputTokens": 0, "outputTokens": 10**30}}, "outputTokens"),
        ("header", {"messageCount": BEYOND_INT64}, "messageCount"),
        ("row", {"turn": BEYOND_INT64}, "turn"),
        ("row", {"exitCode": -(2**64)}, "exitCode"),
        ("row", {"summaryIndex": BEYOND_INT64}, "summaryIndex"),
        ("row", {"skips": [[0, BEYOND_INT64]]}, "skips"),
    ],
)
async def test_an_import_with_integers_beyond_64_bits_is_invalid_params_naming_the_field(
    sidecar: Sidecar, workspace: Path, where: str, value: dict[str, Any], field: str
) -> None:
    sid = await titled(sidecar, workspace, "source", "one")
    lines = (await sidecar.call("_session/export", {"sessionId": sid}))["content"].splitlines()
    before = await listed(sidecar, archived=False)
    if where == "header":
        header = json.loads(lines[0])
        header["session"].update(value)
        lines[0] = json.dumps(header)
    else:
        lines[1] = json.dumps({**json.loads(lines[1]), **value})
    with refused() as caught:
        await sidecar.call("_session/import", {"content": "\n".join(lines)})
    assert field in caught[0].message, caught[0].message
    assert await listed(sidecar, archived=False) == before  # nothing partly imported
    await sidecar.call("session/list", {})  # and the sidecar answers on


@pytest.mark.parametrize("cwd", ["/proc", "/proc/sys", "/dev/shm", "/sys/kernel"])
async def test_an_import_into_a_sandboxed_cwd_under_proc_dev_or_sys_is_invalid_params(
    sidecar: Sidecar, workspace: Path, cwd: str
) -> None:
    sid = await titled(sidecar, workspace, "source", "one")
    content = (await sidecar.call("_session/export", {"sessionId": sid}))["content"]
    before = await listed(sidecar, archived=False)
    with refused() as caught:
        await sidecar.call("_session/import", {"content": content, "cwd": cwd})
    assert caught[0].data["field"] == "cwd" and cwd in caught[0].data["reason"], caught[0].data
    assert await listed(sidecar, archived=False) == before


async def test_markdown_export_is_for_reading(
    sidecar: Sidecar, workspace: Path, tmp_path: Path
) -> None:
    sid = await titled(sidecar, workspace, "Readable", "```fenced``` question", "$ echo hi")
    result = await sidecar.call("_session/export", {"sessionId": sid, "format": "markdown"})
    text = result["content"]
    assert text.startswith("# Readable\n")
    assert "## User (turn 1)" in text and "```fenced``` question" in text
    assert "## Assistant" in text and "Echo: ```fenced``` question" in text
    assert "**Result** of" in text
    written = await sidecar.call(
        "_session/export", {"sessionId": sid, "format": "markdown", "directory": str(tmp_path)}
    )
    assert Path(written["path"]).read_text() == text and written["path"].endswith(".md")
    with refused():
        await sidecar.call("_session/import", {"content": text})  # not an importable file
    with refused():
        await sidecar.call("_session/export", {"sessionId": sid, "format": "pdf"})
    with refused():
        await sidecar.call(
            "_session/export", {"sessionId": sid, "directory": str(tmp_path / "missing")}
        )


def _version_3_database(path: Path) -> None:
    """A store as the sidecar before the library left it: schema 3, one session."""
    conn = sqlite3.connect(path, isolation_level=None)

    @contextlib.contextmanager
    def atomic() -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")

    migrations.migrate(conn, atomic, str(path), migrations.MIGRATIONS[:3])
    conn.execute(
        "INSERT INTO sessions (id, cwd, title, mode, backend, status, generation,"
        " message_count, created_at, updated_at) VALUES"
        " ('sess_old', '/', 'Old times', 'craft', 'pipe', 'closed', 1, 1, 1.0, 1.0)"
    )
    body = json.dumps({"role": "user", "content": "an old platypus", "createdAt": "x"})
    conn.execute("INSERT INTO messages (session_seq, idx, body) VALUES (1, 0, ?)", (body,))
    conn.close()


async def test_an_existing_database_is_indexed_once_by_migration(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    _version_3_database(data_dir / "sessions.db")
    sidecar = await Sidecar.start(data_dir)
    try:
        assert await listed(sidecar, query="platypus") == ["sess_old"]
        assert await listed(sidecar, query="old times") == ["sess_old"]
        assert (await sidecar.status("sess_old"))["archived"] is False
    finally:
        await sidecar.close()
    conn = sqlite3.connect(data_dir / "sessions.db")
    versions = [v for (v,) in conn.execute(f"SELECT version FROM {migrations.VERSION_TABLE}")]
    conn.close()
    assert versions == [v for v, _ in migrations.MIGRATIONS]
