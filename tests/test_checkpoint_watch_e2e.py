"""Checkpoints from a watch of the session's tree, end to end: the real sidecar over its
pipes, commands in real bubblewrap, real git and real inotify.

A live session watches its cwd from its first snapshot on (one inotify instance, seen in
the sidecar's descriptors) and closes the watch with the session; what a turn changed
and a rewind are the same whether the watch followed the turn, overflowed during it, or
was not running at all (a change made while no sidecar ran); and a rewind still sees a
user's change that no event reported (a write through a mapping, through a hard link) to
a file it would write.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

from harness import Sidecar, eventually
from test_checkpoints_e2e import auto_session, changes, files_of, rewind, tree_digest


def inotify_instances(pid: int) -> int:
    found = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            continue  # closed meanwhile
    return found


def project(root: Path) -> None:
    for n in range(40):
        path = root / "src" / f"pkg{n % 4}" / f"mod{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{n}():\n    return {n}\n")
    (root / ".gitignore").write_text("*.log\n")


async def test_turns_are_taken_from_the_watch_rewound_and_the_watch_closes_with_the_session(
    sidecar: Sidecar, workspace: Path
) -> None:
    project(workspace)
    start = tree_digest(workspace)
    before = inotify_instances(sidecar.pid)
    sid = await auto_session(sidecar, workspace)
    assert inotify_instances(sidecar.pid) == before  # no watch until a tool runs
    await sidecar.prompt(
        sid,
        "$ echo more >> src/pkg0/mod0.py && rm src/pkg1/mod1.py && mkdir -p new/deep && "
        "echo n > new/deep/c.py && ln -s mod2.py src/pkg2/link && echo x > noise.log && "
        "chmod +x src/pkg3/mod3.py",
    )
    assert inotify_instances(sidecar.pid) == before + 1
    one = files_of(await changes(sidecar, sid, 1))
    assert one == {
        "src/pkg0/mod0.py": ("modified", 1, 0),
        "src/pkg1/mod1.py": ("deleted", 0, 2),
        "new/deep/c.py": ("added", 1, 0),
        "src/pkg2/link": ("added", 1, 0),
        "src/pkg3/mod3.py": ("modified", 0, 0),
    }
    await sidecar.prompt(sid, "/write src/pkg0/mod4.py rewritten")
    assert files_of(await changes(sidecar, sid, 2)) == {"src/pkg0/mod4.py": ("modified", 1, 2)}
    after = tree_digest(workspace)

    done = await rewind(sidecar, sid, turn=1, scope="code")
    assert done["code"]["conflicts"] == []
    assert tree_digest(workspace) == {**start, "noise.log": after["noise.log"]}
    await rewind(sidecar, sid, undo=True, scope="code")
    assert tree_digest(workspace) == after
    # The tree the undo left is where the next turn starts from.
    await sidecar.prompt(sid, "$ rm src/pkg0/mod4.py")
    assert files_of(await changes(sidecar, sid, 3)) == {"src/pkg0/mod4.py": ("deleted", 0, 1)}

    await sidecar.call("session/close", {"sessionId": sid})
    assert await eventually(lambda: inotify_instances(sidecar.pid) == before)


async def test_a_turn_that_overflows_the_watch_is_still_checkpointed_and_rewound(
    sidecar: Sidecar, workspace: Path
) -> None:
    project(workspace)
    (workspace / "keep.txt").write_text("kept\n")
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "$ true")
    start = tree_digest(workspace)
    # A create, a modify and a close per file: more events than the kernel queues.
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    count = limit // 3 + 500
    await sidecar.prompt(
        sid,
        f"$ mkdir many && for i in $(seq 1 {count}); do echo $i > many/f$i; done && "
        "echo changed > keep.txt",
    )
    result = await changes(sidecar, sid, 2)
    assert result["total"] == count + 1
    assert ("keep.txt", "modified") in {(f["path"], f["status"]) for f in result["files"]}
    await rewind(sidecar, sid, turn=2, scope="code")
    assert tree_digest(workspace) == start
    # The watch follows the tree again.
    await sidecar.prompt(sid, "/write keep.txt again")
    assert files_of(await changes(sidecar, sid, 3)) == {"keep.txt": ("modified", 1, 1)}


async def test_a_change_made_while_no_sidecar_ran_is_seen_by_the_next_one(
    data_dir: Path, workspace: Path
) -> None:
    project(workspace)
    sidecar = await Sidecar.start(data_dir)
    try:
        sid = await auto_session(sidecar, workspace)
        await sidecar.prompt(sid, "/write notes.txt from the agent")
        await sidecar.prompt(sid, "/write other.txt also the agent")
    finally:
        await sidecar.close()
    # No watch runs now: nothing reports these.
    (workspace / "notes.txt").write_text("the user's own words\n")
    (workspace / "src" / "pkg0" / "mod0.py").write_text("changed by the user\n")

    sidecar = await Sidecar.start(data_dir)
    try:
        resumed: dict[str, Any] = await sidecar.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert resumed is not None
        result = await rewind(sidecar, sid, turn=1, scope="code")
        assert [c["path"] for c in result["code"]["conflicts"]] == ["notes.txt"]
        assert result["code"]["removed"] == ["other.txt"]
        assert (workspace / "notes.txt").read_text() == "the user's own words\n"
        await sidecar.prompt(sid, "$ echo again >> src/pkg0/mod0.py")
        assert files_of(await changes(sidecar, sid, 3)) == {"src/pkg0/mod0.py": ("modified", 1, 0)}
    finally:
        await sidecar.close()


async def test_a_change_no_event_reports_is_still_a_conflict_for_a_rewind(
    sidecar: Sidecar, workspace: Path, tmp_path: Path
) -> None:
    project(workspace)
    sid = await auto_session(sidecar, workspace)
    await sidecar.prompt(sid, "/write mapped.txt written by the agent")
    await sidecar.prompt(sid, "/write linked.txt written by the agent")
    await sidecar.prompt(sid, "/write plain.txt written by the agent")
    # Two writes inotify never reports: through a mapping still open, and through a hard
    # link from outside the cwd.
    handle = open(workspace / "mapped.txt", "r+b")
    mapping = mmap.mmap(handle.fileno(), 0)
    handle.close()
    os.link(workspace / "linked.txt", tmp_path / "outside.txt")
    try:
        mapping[:7] = b"WRITTEN"
        mapping.flush()
        with open(tmp_path / "outside.txt", "a") as outside:
            outside.write(" and by the user\n")
        result = await rewind(sidecar, sid, turn=1, scope="code")
    finally:
        mapping.close()
    assert sorted(c["path"] for c in result["code"]["conflicts"]) == ["linked.txt", "mapped.txt"]
    assert result["code"]["removed"] == ["plain.txt"]
    assert (workspace / "mapped.txt").read_text() == "WRITTEN by the agent"
    assert (workspace / "linked.txt").read_text().endswith("and by the user\n")
