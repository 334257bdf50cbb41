"""The sandbox where users are: the real sidecar run as a normal user (created by the
set-up when the tests run as root, as in CI; tests/unprivileged.py), with real bubblewrap
making its own user namespace, and on a system where that is forbidden.

As a normal user: the modes hold (a write lands in the workspace, is refused read-only
and outside the cwd), daemons die with their command, consent is asked and a refusal
runs nothing, and /proc/sys cannot be written. Where unprivileged user namespaces are
switched off, `initialize` and every session say which setting is the cause and its fix,
and no command runs. Run alone with `pytest -m unprivileged`; a set-up that cannot run
(no useradd, setpriv or unshare) fails, it never skips.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import INITIALIZE, Sidecar, eventually, marked_processes, marker
from unprivileged import (
    Account,
    check_runs,
    ensure_user,
    launcher,
    make_dirs,
    owned_dir,
    restricted_launcher,
)

pytestmark = pytest.mark.unprivileged


def choose(option: str) -> Any:
    return lambda params: {"outcome": {"outcome": "selected", "optionId": option}}


def results(messages: dict[str, Any]) -> list[str]:
    return [m["text"] for m in messages["messages"] if m["type"] == "tool_result"]


def _uid_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("Uid:"))
    return int(line.split()[1])  # the real uid


class AsUser:
    """A sidecar run as the test user, with a data dir, a workspace and a directory
    outside it, all the user's own."""

    def __init__(self, account: Account, root: Path, sidecar: Sidecar) -> None:
        self.account = account
        self.sidecar = sidecar
        self.workspace = root / "workspace"
        self.outside = root / "outside"


@pytest.fixture(scope="module")
def account() -> Account:
    return ensure_user()


@pytest.fixture
def user_root(account: Account) -> Iterator[Path]:
    with owned_dir(account) as root:
        yield root


@pytest.fixture
async def as_user(account: Account, user_root: Path, tmp_path: Path) -> AsyncIterator[AsUser]:
    data, _, _ = make_dirs(account, user_root, "data", "workspace", "outside")
    python = launcher(account, tmp_path)
    check_runs(python)
    sidecar = await Sidecar.start(data, python=python)
    try:
        yield AsUser(account, user_root, sidecar)
    finally:
        await sidecar.close()


async def test_the_sidecar_and_its_commands_run_as_the_user(as_user: AsUser) -> None:
    sidecar = as_user.sidecar
    assert _uid_of(sidecar.pid) == as_user.account.uid
    sid = (await sidecar.new_session(as_user.workspace, approval="auto"))["sessionId"]
    reply = (await sidecar.prompt(sid, "$ id -u; echo in > inside.txt"))["_meta"]["response"]
    assert "status 0" in reply, reply
    assert f"{as_user.account.uid}" in results(await sidecar.messages(sid))[-1]
    made = as_user.workspace / "inside.txt"
    assert made.read_text() == "in\n"
    assert made.stat().st_uid == as_user.account.uid


async def test_read_only_and_outside_the_cwd_are_refused_as_the_user(as_user: AsUser) -> None:
    sidecar, workspace, outside = as_user.sidecar, as_user.workspace, as_user.outside
    read_only = await sidecar.new_session(workspace, approval="auto", sandbox="read-only")
    reply = await sidecar.prompt(read_only["sessionId"], "$ touch ro.txt")
    assert "status 0" not in reply["_meta"]["response"]
    assert not (workspace / "ro.txt").exists()

    sid = (await sidecar.new_session(workspace, approval="auto"))["sessionId"]
    reply = await sidecar.prompt(sid, f"$ echo out > {outside}/escaped.txt")
    assert "status 0" not in reply["_meta"]["response"]
    assert not (outside / "escaped.txt").exists()
    # Positive control: the user may write there, so the sandbox is what refused it.
    off = (await sidecar.new_session(workspace, approval="auto", sandbox="off"))["sessionId"]
    await sidecar.prompt(off, f"$ echo out > {outside}/allowed.txt")
    assert (outside / "allowed.txt").read_text() == "out\n"


async def test_daemons_die_with_their_command_as_the_user(as_user: AsUser) -> None:
    sidecar = as_user.sidecar
    sid = (await sidecar.new_session(as_user.workspace, approval="auto"))["sessionId"]
    value, mark = marker()
    reply = await sidecar.prompt(
        sid, f"$ {mark}setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & sleep 0.3; echo ready"
    )
    assert "ready" in results(await sidecar.messages(sid))[-1], reply
    assert await eventually(lambda: not marked_processes("TEST_MARK", value))


async def test_consent_is_asked_and_a_refusal_runs_nothing_as_the_user(as_user: AsUser) -> None:
    sidecar, workspace = as_user.sidecar, as_user.workspace
    sid = (await sidecar.new_session(workspace))["sessionId"]  # approval: ask
    sidecar.answer_permission = choose("reject_once")
    result = await sidecar.prompt(sid, "$ touch refused.txt")
    assert result["stopReason"] == "end_turn"
    (asked,) = sidecar.asked
    assert asked["toolCall"]["title"] == "touch refused.txt"
    assert not (workspace / "refused.txt").exists()
    assert results(await sidecar.messages(sid))[-1].startswith("Not run:")
    sidecar.answer_permission = choose("allow_once")
    await sidecar.prompt(sid, "$ touch allowed.txt")
    assert len(sidecar.asked) == 2
    assert (workspace / "allowed.txt").exists()


@pytest.mark.parametrize("mode", ["read-only", "workspace", "off"])
async def test_proc_sys_cannot_be_written_as_the_user(as_user: AsUser, mode: str) -> None:
    sidecar = as_user.sidecar
    sid = (await sidecar.new_session(as_user.workspace, approval="auto", sandbox=mode))["sessionId"]
    await sidecar.prompt(
        sid, "$ cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname; echo rc=$?"
    )
    output = results(await sidecar.messages(sid))[-1]
    assert "rc=1" in output and "rc=0" not in output, output


# ---- a system that forbids unprivileged user namespaces ------------------------------


async def test_a_restricted_system_is_named_with_its_fix_and_nothing_runs(
    data_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    # The sidecar in a user namespace of its own with user.max_user_namespaces = 0 (set
    # inside it only), as uid 1000 without capabilities: bwrap's user namespace is refused.
    sidecar = await Sidecar.start(data_dir, python=restricted_launcher(tmp_path))
    try:
        init = await sidecar.call("initialize", INITIALIZE)
        problem = init["_meta"]["sandboxProblem"]
        assert "max_*_namespaces exceeded (ENOSPC)" in problem  # bwrap's own words
        assert "user.max_user_namespaces = 0" in problem
        assert "sysctl -w user.max_user_namespaces=15000" in problem
        summary = await sidecar.new_session(workspace, approval="auto")
        assert summary["sandboxProblem"] == problem
        await sidecar.prompt(summary["sessionId"], "$ touch ran.txt")
        assert not (workspace / "ran.txt").exists()
        (text,) = results(await sidecar.messages(summary["sessionId"]))
        assert "NOT run" in text and "user.max_user_namespaces = 0" in text
    finally:
        await sidecar.close()


async def test_initialize_says_when_bwrap_is_missing(
    data_dir: Path, workspace: Path, tmp_path: Path
) -> None:
    working = await Sidecar.start(tmp_path / "control")
    try:  # control: a working sandbox is not mentioned
        init = await working.call("initialize", INITIALIZE)
        assert "sandboxProblem" not in (init.get("_meta") or {})
    finally:
        await working.close()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "env"):
        found = next(
            (Path(d) / tool for d in os.environ["PATH"].split(":") if (Path(d) / tool).exists()),
            None,
        )
        if found is not None:
            (bin_dir / tool).symlink_to(found)
    sidecar = await Sidecar.start(data_dir, env={"PATH": str(bin_dir)})
    try:
        init = await sidecar.call("initialize", INITIALIZE)
        assert init["_meta"]["sandboxProblem"].startswith("bwrap not found (bwrap on PATH)")
        summary = await sidecar.new_session(workspace)
        assert summary["sandboxProblem"] == init["_meta"]["sandboxProblem"]
    finally:
        await sidecar.close()
