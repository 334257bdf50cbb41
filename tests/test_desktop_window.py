"""The desktop window, for real: QtWebEngine under a private 24-bit Xvfb, one process per scenario.

Each scenario runs in tests/desktop_driver.py (a subprocess: `webview.start()` can run
once per process), which drives the page through `evaluate_js` and prints what it saw.
Every test then checks that no sidecar (or anything else started for it) is left running.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from desktop_driver import xvfb
from harness import Sidecar

from desktop.__main__ import parse_args

ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tests" / "desktop_driver.py"
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOT = ROOT / "docs" / "screenshot.png"
DRIVER_TIMEOUT = 90


def _missing() -> str | None:
    if shutil.which("Xvfb") is None:
        return "Xvfb is not installed"
    for module in ("webview", "PyQt6.QtWebEngineWidgets"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            return f"{module} is not installed (pip install -e '.[desktop]')"
    return None


# Skipped only outside CI: in CI (`make test` installs Xvfb and the desktop extra) a missing
# piece is a failure, never a silent skip.
if _missing() is not None and os.environ.get("CI"):
    raise RuntimeError(f"desktop window tests cannot run in CI: {_missing()}")
window_only = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _processes_using(*paths: Path) -> list[str]:
    """Processes whose command line names, or whose cwd is inside, one of `paths`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if any(str(p) in cmdline or cwd.startswith(str(p)) for p in paths):
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found


def assert_nothing_left(pids: list[int], *paths: Path) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
        any(_alive(pid) for pid in pids) or _processes_using(*paths)
    ):
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)], f"sidecar still running: {pids}"
    assert not _processes_using(*paths)


def run_driver(scenario: str, tmp_path: Path) -> dict[str, Any]:
    data, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    command = [sys.executable, str(DRIVER), scenario, "--data-dir", str(data)]
    command += ["--workspace", str(workspace), "--artifacts", str(ARTIFACTS)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a hung run can be killed with everything it started
    )
    try:
        out, err = proc.communicate(timeout=DRIVER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"driver hung in {scenario}:\n{err[-4000:]}")
    results = [line[7:] for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and results, f"driver exit {proc.returncode}:\n{err[-4000:]}"
    result: dict[str, Any] = json.loads(results[-1])
    assert result["error"] is None, f"{result['error']}\n--- log ---\n{err[-3000:]}"
    assert result["exit_code"] == 0
    assert result["sidecar_pids"], "the driver saw no sidecar"
    assert_nothing_left(result["sidecar_pids"], data, workspace)
    return result


@window_only
def test_create_a_session_send_a_prompt_and_see_the_answer(tmp_path: Path) -> None:
    r = run_driver("prompt", tmp_path)
    assert "Echo: hello desktop" in r["transcript"]
    assert r["tool"]["command"] == "echo tool-output-42; sleep 1; echo second line"
    assert r["tool"]["status"] == "exit 0"
    assert "tool-output-42\nsecond line" in r["tool"]["output"]
    # Output showed while the command still ran, before the turn ended.
    assert r["streamed"]["status"] == "running" and "second line" not in r["streamed"]["output"]
    # It ran only once allowed: the card said what and where, the sidebar said it waited.
    approval = r["streamed"]["approval"]
    assert approval["command"] == "echo tool-output-42; sleep 1; echo second line"
    assert "sandbox: workspace" in approval["where"]
    assert approval["sidebar"] == "waiting for approval"
    assert approval["focused"] is True, "the card takes the focus (Enter allows, Esc rejects)"
    assert approval["buttons"] == [
        "approve-allow_once",
        "approve-allow_always",
        "approve-reject_once",
        "approve-reject_always",
    ]
    assert "Slept 2 s. nap" in r["transcript"]
    assert r["busy"]["code"] == "-32042" and "busy" in r["busy"]["text"]
    assert r["paging"] == {
        "first_page": 50,
        "older_button": True,
        "all": 60,
        "older_button_after": False,
        "first_message": "message 0",
    }
    shot = Path(r["screenshot"])
    assert shot == ARTIFACTS / "desktop.png" and shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_SCREENSHOT"):  # refresh the README's picture on purpose only
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


@window_only
def test_rebuild_ui_mid_turn_keeps_sessions_runtimes_and_the_answer(tmp_path: Path) -> None:
    r = run_driver("rebuild", tmp_path)
    sid = r["session_id"]
    assert r["old_window_closed"] and r["windows_open"] == 1
    before, after = r["page_before"], r["page_after"]
    assert before["ids"] == after["ids"] == [sid]
    assert before["status"] == after["status"] == "running"  # the turn outlived the page
    assert before["generation"] == after["generation"] == "gen 1"
    assert before["endpoint"] == after["endpoint"] == r["host_before"]["url"]
    assert r["host_before"] == r["host_after"]  # same generation, same listener and port
    assert r["http"] == {"code": 200, "sessionId": sid, "status": "running"}
    assert "Slept 4 s. slow answer" in r["new_page_transcript"]
    assert r["rebuild_seconds"] < 5


@window_only
def test_approvals_survive_rebuild_and_always_answers_become_rules(tmp_path: Path) -> None:
    r = run_driver("approvals", tmp_path)
    assert r["after_rebuild"] == "echo approved-after-rebuild > rebuilt.txt"
    assert r["written"] == "approved-after-rebuild", "the new page's answer counted"
    assert "allow bash exactly" in r["rule"]
    assert r["asked_again"] is False, "the rule decided: no card the second time"
    assert r["rules_after"] == []
    assert r["refused_file"] is False
    assert r["sidebar_after"] == "idle"


@window_only
def test_diffs_in_approval_and_tool_cards_and_the_turns_changes_list(tmp_path: Path) -> None:
    r = run_driver("diffs", tmp_path)
    edit = [
        "hunk|||@@ -1,4 +1,5 @@",
        "ctx|1|1|one",
        "del|2||two",
        "add||2|TWO",
        "add||3|zwei",
        "ctx|3|4|three",
        "ctx|4|5|four",
    ]
    # The approval card shows exactly what will be written: unified, numbered, open.
    approval = r["approval"]
    assert approval["command"] == "Edit poem.txt"
    assert approval["summary"] == "poem.txt +2 −1" and approval["open"] is True
    assert approval["rows"] == edit
    # The tool card has the same diff, folded while the card above asks about it.
    assert r["live_tool"] == {
        "kind": "edit",
        "command": "Edit poem.txt",
        "rows": edit,
        "open": False,
    }
    assert r["card_after_enter_on_summary"] is True, "Enter on the diff is not an answer"
    assert r["poem"] == "one\nTWO\nzwei\nthree\nfour\n"
    # Stored, the call keeps its arguments: the replaced text, without line numbers.
    assert r["stored_tool"] == {
        "status": "done",
        "label": "replaced text",
        "rows": ["del|||two", "add|||TWO", "add|||zwei"],
    }
    # The turn's changes: the file with its counts; a click shows the checkpoint's diff.
    assert r["changes_head"] == "Changes in turn 1 · 1 file +2 −1"
    assert r["changes_files"] == ["Mpoem.txt+2 −1"]
    assert r["file_diff"] == edit and r["file_diff_expanded"] == "true"
    assert r["new_file_summary"] == "fresh.txt +1 −0 new file"
    assert r["second_files"] == ["Afresh.txt+1 −0"]
    assert r["after_rebuild"] == [
        "1: Changes in turn 1 · 1 file +2 −1",
        "2: Changes in turn 2 · 1 file +1 −0",
    ]


@window_only
def test_rewind_from_a_user_message_restores_files_after_a_confirmation(tmp_path: Path) -> None:
    r = run_driver("rewind", tmp_path)
    assert r["before"] == "second version"
    # The menu is keyboard driven: focus on its first item, arrows move, Esc closes.
    assert r["menu"] == ["rewind-conversation", "rewind-code", "rewind-both"]
    assert (r["menu_focus"], r["menu_focus_down"]) == ("rewind-conversation", "rewind-code")
    assert r["focus_after_esc"] == "rewind-button"
    # The confirmation is the sidecar's dry run: nothing changed yet.
    assert r["plan"] == {
        "title": "Rewind the files to before turn 2?",
        "restored": "Restore\nnotes.txt",
        "removed": "Remove (created since)\nextra.txt",
        "conflicts": False,
        "force_offered": False,
        "conversation": False,
        "disk_unchanged": True,
    }
    assert r["notice"].startswith("Rewound the files to before turn 2: 1 restored, 1 removed.")
    assert r["after_code"] == {"notes": "first version", "extra": False}
    assert r["messages_after_code"] == 3  # a code rewind leaves the conversation alone
    # A file the user changed since is a conflict: left alone unless forced.
    plan = r["conflict_plan"]
    assert "notes.txt — changed outside the session" in plan["conflicts"]
    assert "left alone" in plan["conflicts"] and plan["removed"] is False
    assert plan["conversation"].startswith("Conversation: the model will no longer see turn 1")
    forced = r["forced_plan"]
    assert forced["removed"] == "Remove (created since)\nnotes.txt"
    assert "will be overwritten" in forced["conflicts"]
    assert forced["still_on_disk"] == "edited by the user\n", "a dry run changes nothing"
    assert "the model's context now starts before turn 1" in r["forced_notice"]
    assert r["after_forced"] is False
    assert r["marker"].startswith("[conversation rewound to before turn 1")
    # Undo takes the files back, the user's edit included.
    assert r["undo_label"] == "Undo code rewind"
    assert r["after_undo"] == "edited by the user\n"
    assert r["summary_status"] == "idle"


@window_only
def test_mcp_servers_added_in_the_form_connect_and_are_saved_for_later(tmp_path: Path) -> None:
    r = run_driver("mcp", tmp_path)
    assert "basic (stdio) · 9 tools" in r["first"] and "connected" in r["first"]
    assert "basic" in r["offered"]
    assert "basic (stdio) · 9 tools" in r["second"]


@window_only
def test_close_resume_and_delete_from_the_page(tmp_path: Path) -> None:
    r = run_driver("lifecycle", tmp_path)
    sid = r["session_id"]
    assert r["delete_live"]["code"] == "-32043" and "close it first" in r["delete_live"]["text"]
    closed, resumed = r["closed"], r["resumed"]
    assert (closed["status"], closed["generation"], closed["endpoint"]) == (
        "closed",
        "gen 1",
        "— (not live)",
    )
    assert (resumed["status"], resumed["generation"], resumed["detail_generation"]) == (
        "idle",
        "gen 2",
        "2",
    )
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", resumed["endpoint"])
    assert r["stopped"] == "idle"  # Stop cancelled the turn; the session stays usable
    assert r["mode"] == "plan"
    assert "Echo: first message" in r["transcript"] and "Echo: second message" in r["transcript"]
    assert r["confirm_shown"] and r["kept_after_cancel"]
    assert sid not in r["listed_after_delete"]
    assert r["ids_after_rebuild"] == []  # the shortcut's fresh page agrees with the sidecar


@window_only
def test_killed_sidecar_is_restarted_and_sessions_are_resumable(tmp_path: Path) -> None:
    r = run_driver("sidecar_kill", tmp_path)
    assert r["new_pid"] != r["old_pid"] and r["pill_pid"] == str(r["new_pid"])
    assert "sessions were closed and can be resumed" in r["banner"]
    assert r["survivor_after_restart"] == {
        "status": "closed",
        "generation": "gen 1",
        "interrupted": False,
    }
    assert r["victim_after_restart"] == {
        "status": "closed",
        "generation": "gen 1",
        "interrupted": True,
    }
    assert r["survivor_resumed"]["status"] == "idle"
    assert r["survivor_resumed"]["generation"] == "gen 2"
    assert (
        "Echo: before the crash" in r["transcript"] and "Echo: after the crash" in r["transcript"]
    )


@window_only
async def test_sigterm_closes_live_sessions_cleanly(tmp_path: Path) -> None:
    r = await asyncio.to_thread(run_driver, "sigterm", tmp_path)
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        status = await sidecar.status(r["session_id"])
        messages = await sidecar.messages(r["session_id"])
    finally:
        await sidecar.close()
    # Closed by the shutdown, not found orphaned by the next start's reconciliation.
    assert status["status"] == "closed" and status["interrupted"] is False
    assert messages["messages"][0]["text"] == "/sleep 30 cut short"


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


@window_only
def test_the_cli_opens_the_window_and_quits_on_ctrl_c(tmp_path: Path) -> None:
    lines: queue.Queue[str] = queue.Queue()
    with xvfb() as display:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desktop", "--data-dir", str(tmp_path / "data")],
            cwd=ROOT,
            env={**os.environ, "DISPLAY": display},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert proc.stderr is not None
        threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True).start()
        seen: list[str] = []
        try:
            while not any("page page1 ready" in line for line in seen):
                seen.append(lines.get(timeout=30))
            proc.send_signal(signal.SIGINT)
            code = proc.wait(20)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    pid = int(
        next(m[1] for line in seen if (m := re.search(r"sidecar running \(pid (\d+)\)", line)))
    )
    assert code == 0
    assert_nothing_left([pid], tmp_path)


def test_cli_options_pass_through_to_the_sidecar() -> None:
    args, sidecar = parse_args(["--data-dir", "/d", "--provider", "openai", "--store", "memory"])
    assert not args.tui
    assert sidecar == ["--data-dir", "/d", "--provider", "openai", "--store", "memory"]
    args, sidecar = parse_args(["--tui", "--model", "m", "--base-url", "http://x/v1"])
    assert args.tui and sidecar == ["--model", "m", "--base-url", "http://x/v1"]


def test_cli_without_a_display_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run(
        [sys.executable, "-m", "desktop"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "--tui" in proc.stderr
