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
DRIVER_TIMEOUT = 150  # a scenario; its page load alone may take up to 60 s on a loaded machine


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
    result["stderr"] = err
    result["exited_at"] = time.time()
    return result


@window_only
def test_create_a_session_send_a_prompt_and_see_the_answer(tmp_path: Path) -> None:
    r = run_driver("prompt", tmp_path)
    assert "Echo: hello desktop" in r["transcript"]
    assert r["tool"]["command"] == "echo tool-output-42; sleep 3; echo second line"
    assert r["tool"]["status"] == "exit 0"
    assert "tool-output-42\nsecond line" in r["tool"]["output"]
    # Output showed while the command still ran, before the turn ended.
    assert r["streamed"]["status"] == "running" and "second line" not in r["streamed"]["output"]
    # It ran only once allowed: the card said what and where, the sidebar said it waited.
    approval = r["streamed"]["approval"]
    assert approval["command"] == "echo tool-output-42; sleep 3; echo second line"
    assert "sandbox: workspace" in approval["where"]
    assert approval["sidebar"] == "waiting for approval"
    assert re.fullmatch(r"Waiting for your approval · \d+ s", approval["working"].strip())
    assert approval["model"] == "offline-echo", "the model in the header"
    assert approval["focused"] is True, "the card takes the focus (Enter allows, Esc rejects)"
    assert approval["buttons"] == [
        "approve-allow_once",
        "approve-allow_always",
        "approve-reject_once",
        "approve-reject_always",
    ]
    assert "Slept 2 s. nap" in r["transcript"]
    assert r["busy"] == {"queued": ["are you there?"], "banner": False}  # queued, not busy
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
    assert r["same_window"] and r["rebuilt"] == 1 and r["windows_open"] == 1
    before, after = r["page_before"], r["page_after"]
    assert before["ids"] == after["ids"] == [sid]
    assert before["status"] == after["status"] == "running"  # the turn outlived the page
    assert before["generation"] == after["generation"] == "gen 1"
    assert before["endpoint"] == after["endpoint"] == r["host_before"]["url"]
    assert r["host_before"] == r["host_after"]  # same generation, same listener and port
    assert r["http"] == {"code": 200, "sessionId": sid, "status": "running"}
    assert "Slept 8 s. slow answer" in r["new_page_transcript"]
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
    assert r["delete_live"]["button"] == "Close and delete"
    assert "live" in r["delete_live"]["text"] and r["delete_live"]["focus"] == "cancel-delete"
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
    # The host keeps config options for live sessions only.
    assert r["options_kept"] == {"closed": False, "resumed": True, "deleted": False}
    assert r["ids_after_rebuild"] == []  # the shortcut's fresh page agrees with the sidecar


@window_only
def test_killed_sidecar_is_restarted_and_live_sessions_come_back_by_themselves(
    tmp_path: Path,
) -> None:
    r = run_driver("sidecar_kill", tmp_path)
    assert r["new_pid"] != r["old_pid"] and r["pill_pid"] == str(r["new_pid"])
    assert "sessions were closed" in r["banner"] and "Resuming" in r["banner"]
    # Auto-resume: both were live, both are live again; the one cut mid-turn says so.
    assert r["survivor_after_restart"] == {
        "status": "idle",
        "generation": "gen 2",
        "interrupted": False,
    }
    assert r["victim_after_restart"] == {
        "status": "idle",
        "generation": "gen 2",
        "interrupted": True,
    }
    assert "Resumed 2 sessions" in r["notice"] and "Interrupted mid-turn" in r["notice"]
    assert "Interrupted" in r["notice"] and r["sidecar_banner_after"] is False
    assert r["notice_after_rebuild"] is False, "the notice is said once, not again on rebuild"
    assert r["survivor_resumed"]["status"] == "idle"
    assert r["survivor_resumed"]["generation"] == "gen 2"
    assert (
        "Echo: before the crash" in r["transcript"] and "Echo: after the crash" in r["transcript"]
    )


@window_only
def test_sessions_live_when_the_app_quit_are_resumed_on_the_next_start(tmp_path: Path) -> None:
    first = run_driver("resume_first", tmp_path)
    second = run_driver("resume_second", tmp_path)
    items = second["items"]
    assert items[first["live"]]["status"] == "idle"
    assert items[first["live"]]["generation"] == "gen 2"
    assert items[first["closed"]] == {
        "status": "closed",
        "generation": "gen 1",
        "interrupted": False,
    }
    assert "Resumed 1 session that was live when the app quit" in second["notice"]


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


@window_only
def test_a_sidecar_that_cannot_start_ends_the_app_with_its_reason(tmp_path: Path) -> None:
    """The window opens while the sidecar starts; a sidecar that cannot start (here: an
    unknown provider) ends the app with exit 1 and the sidecar's own words in the log."""
    with xvfb() as display:
        proc = subprocess.run(
            [sys.executable, "-m", "desktop", "--data-dir", str(tmp_path / "data"),
             "--provider", "no-such-provider"],
            cwd=ROOT, env={**os.environ, "DISPLAY": display}, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "the sidecar could not start" in proc.stderr
    assert "no-such-provider" in proc.stderr, "the sidecar's reason is passed on"
    assert_nothing_left([], tmp_path)


def test_cli_options_pass_through_to_the_sidecar() -> None:
    args, sidecar = parse_args(["--data-dir", "/d", "--provider", "openai", "--store", "memory"])
    assert not args.tui
    assert sidecar == ["--data-dir", "/d", "--provider", "openai", "--store", "memory"]
    args, sidecar = parse_args(["--tui", "--model", "m", "--base-url", "http://x/v1"])
    assert args.tui and sidecar == ["--model", "m", "--base-url", "http://x/v1"]
    assert not args.no_auto_resume
    args, sidecar = parse_args(["--no-auto-resume", "--data-dir", "/d"])
    assert args.no_auto_resume and sidecar == ["--data-dir", "/d"]


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


@window_only
def test_agent_text_is_rendered_markdown_and_hostile_html_is_refused(tmp_path: Path) -> None:
    r = run_driver("render", tmp_path)
    assert r["pwned"] == "undefined", "no script or event handler ran"
    assert r["hits"] == [], "nothing remote was fetched"
    assert not {"script", "img", "iframe", "style"} & set(r["tags"])
    assert {"strong", "code", "table", "pre", "a"} <= set(r["tags"])
    assert r["on_attrs"] == []
    assert all(h and h.startswith("http://127.0.0.1:") for h in r["hrefs"]), r["hrefs"]
    assert all("noopener" in rel for rel in r["rels"])
    assert "<script>window.pwned = 1</script>" in r["text"], "raw HTML is shown as text"
    assert r["highlighted"] and r["copy_button"]
    # A click hands the link to the system browser (mocked) and the app stays put.
    assert r["opened"] and r["opened"][0].endswith("/link")
    assert r["href_after"] and r["still_app"]
    ansi = r["ansi"]
    assert "red plain green" in ansi["text"] and "\x1b" not in ansi["text"]
    assert ansi["red"] == "red" and ansi["bold"] and ansi["green"] == "green"
    assert ansi["colour"] == "rgb(255, 107, 107)"
    assert r["fold"] == {
        "label": "Show all (100 lines)",
        "collapsed": True,
        "taller_when_open": True,
        "label_open": "Show less",
    }


@window_only
def test_pty_colours_full_output_and_the_copy_button(tmp_path: Path) -> None:
    r = run_driver("whole_output", tmp_path)
    assert r["live"] == {"green": "green", "bold": True, "raw_escape": False}
    assert r["stored"]["green"] == "green" and r["stored"]["text"].startswith("green plain")
    assert not r["cut_has_last"], "the card keeps the model's cut"
    assert r["labels"][0] == "Full output" and r["labels"][1].startswith("More output (")
    assert r["full_lines"] == 40000 and not r["button_left"], "the whole output, page by page"
    assert r["copy_label"] == "Copied"
    assert r["clipboard"].strip() == "echo copied-42"


@window_only
def test_nothing_lost_rebuild_while_streaming_drafts_and_stop(tmp_path: Path) -> None:
    r = run_driver("keep", tmp_path)
    assert r["pending_at_once"], "the user's message shows on Send"
    assert re.fullmatch(r"Working… \d+ s", r["working"].strip())
    after = r["after_rebuild"]
    assert after["draft"] == "draft for A" and after["focus"] == "prompt-input"
    assert after["status"] == "running" and after["cards"] == 1
    # The card kept streaming after the rebuild, every line once, in order.
    assert r["final_lines"] == [f"line {i}" for i in range(1, 13)]
    assert r["final_status"] == "exit 0"
    assert r["draft_in_new"] == ""
    assert r["draft_back_in_a"] == "draft for A" and r["draft_back_in_b"] == "draft for B"
    assert r["focus_after_switch"] == "prompt-input"
    assert r["draft_after_send"] == "" and r["focus_after_stop"] == "prompt-input"
    assert "starting" in r["stopped_output"]
    assert r["draft_a_at_end"] == "draft for A"


@window_only
def test_no_dead_ends_retry_resume_and_close_and_delete(tmp_path: Path) -> None:
    r = run_driver("dead_ends", tmp_path)
    assert "boom" in r["banner"] and r["banner"].count("boom") == 1
    assert r["layout_unmoved"], "the banner overlays the page"
    assert r["actions"] and r["send_label"] == "Retry" and r["resume_enabled"]
    assert r["retried"] == ["/fail boom", "/fail boom"]
    assert r["resumed_live"] is True
    assert r["banner_after_resume"] is False and r["actions_after_resume"] is False
    assert r["delete_button"] == "Close and delete"
    assert r["listed"] == r["ids"]


@window_only
def test_keyboard_accessibility_dark_mode_narrow_layout_and_the_new_session_form(
    tmp_path: Path,
) -> None:
    r = run_driver("keyboard", tmp_path)
    assert r["ctrl_n"] == {"open": True, "focus": "new-cwd"} and r["esc_closes"]
    # One clear message, in the form, for a folder that is not there; "~" is expanded.
    assert r["bad_folder"].startswith("Working directory: There is no folder ")
    assert r["bad_folder"].endswith("/no-such-folder.") and "Invalid params" not in r["bad_folder"]
    assert r["bad_folder_banner"] is False
    assert r["picked"].endswith("/picked"), "the folder dialog's choice fills the field"
    assert r["alpha_cwd"].endswith("/workspace/proj")
    assert r["recent"][0].endswith("/workspace/proj")
    assert r["announcer"] == "Beta: new reply"
    assert r["quick_open"] and r["quick_items"] == ["Alpha"] and r["quick_closed"]
    assert r["arrow_focus"], "arrow keys move the selection and the focus"
    assert r["aria"] == {
        "listbox": "listbox",
        "option": "option",
        "log": "log",
        "live": "polite",
        "input_label": "Message",
        "unlabelled_buttons": 0,
    }
    assert r["light_bg"] == "rgb(246, 247, 249)" and r["dark_bg"] == "rgb(20, 23, 31)"
    assert r["dark_after_rebuild"] == "dark" and r["saved"]["theme"] == "dark"
    assert r["narrow"]["toggle"] and r["narrow"]["transcript_width"] >= 780
    assert r["drawer_open"]


@window_only
def test_the_new_session_form_picks_an_external_agent_that_runs_the_session(
    tmp_path: Path,
) -> None:
    r = run_driver("agents", tmp_path)  # the scripted ACP agent, from tests/external_agents.py
    options = {value: (text, available) for value, text, available in r["options"]}
    assert r["options"][0][0] == "builtin" and r["default"] == "builtin"
    assert options["scripted"] == ("scripted", "true")
    assert options["ghost"] == ("ghost — not installed: npm install -g ghost-agent-acp", "false")
    assert options["claude"][1] in ("true", "false"), "the presets are listed too"
    # Not installed: the form says how to install it and creates nothing.
    assert (
        r["ghost_note"] == "ghost is not installed. Install it with: npm install -g ghost-agent-acp"
    )
    assert r["ghost_focus"] == "new-agent"
    # Names and commands are text: markup in a command is shown, never parsed.
    assert (
        r["bare_note"]["text"]
        == "bare is not installed. Its command ('<i>nowhere-acp') was not found."  # shlex-quoted
    )
    assert "<i>" not in r["bare_note"]["html"] and "&lt;i&gt;" in r["bare_note"]["html"]
    assert r["scripted_note_shown"] is False
    # The scripted agent runs the session: its answer in the transcript, its name shown.
    assert "hi from agent" in r["transcript"]
    assert r["summary_agent"] == "scripted"
    assert r["plan"] == {
        "rows": [["in_progress", "read the code"], ["pending", "write the fix"]],
        "summary": "Plan · 0/2 done · now: read the code",
    }
    assert r["badge"] == "scripted" and r["detail_agent"] == "agent: scripted"
    assert r["item_label"].endswith(", agent scripted")
    assert r["default_again"] == "builtin", "the next session is builtin unless picked"
    assert r["builtin_badge"] is False and r["builtin_detail_agent"] is False
    assert r["sessions"] == ["builtin", "scripted"], "nothing made for the agent not installed"


@window_only
def test_retry_edit_and_resend_and_fork_on_a_user_message(tmp_path: Path) -> None:
    r = run_driver("message_actions", tmp_path)
    assert r["after_retry"] == ["first words", "second words", "first words"]
    assert r["fork"]["users"] == ["first words"] and r["fork"]["draft"] == "second words"
    assert r["fork"]["forked_from"]
    assert r["edit_draft"] == "second words" and r["edit_focus"] == "edit-input"


@window_only
async def test_quit_with_30_live_sessions_is_clean(tmp_path: Path) -> None:
    r = await asyncio.to_thread(run_driver, "quit_fast", tmp_path)
    assert r["live"] == 30
    assert "Release of profile requested" not in r["stderr"]
    assert "WebEnginePage still not deleted" not in r["stderr"]
    # Measured, not asserted (shared CI cores); the README quotes it.
    print(
        f"quit: {r['quit_seconds']} s to leave the app, "
        f"{r['exited_at'] - r['quit_started']:.2f} s to process exit"
    )
    sidecar = await Sidecar.start(tmp_path / "data")
    try:
        listed = await sidecar.call("session/list", {})
    finally:
        await sidecar.close()
    summaries = [s["_meta"] for s in listed["sessions"]]
    assert len(summaries) == 30
    assert all(s["status"] == "closed" and not s["interrupted"] for s in summaries)


def _mean_luminance(path: Path) -> float:
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        return float(ImageStat.Stat(image.convert("L")).mean[0])


@window_only
def test_screenshots_light_and_dark(tmp_path: Path) -> None:
    r = run_driver("screenshots", tmp_path)
    light, dark = Path(r["light"]), Path(r["dark"])
    assert light.stat().st_size > 10_000 and dark.stat().st_size > 10_000
    assert _mean_luminance(dark) < _mean_luminance(light) - 60, "the dark theme is dark"
    if os.environ.get("UPDATE_SCREENSHOT"):  # refresh the README's pictures on purpose only
        for shot, name in ((light, "screenshot-light.png"), (dark, "screenshot-dark.png")):
            shutil.copyfile(shot, SCREENSHOT.parent / name)


@window_only
def test_session_library_search_archive_rename_export_and_import(tmp_path: Path) -> None:
    r = run_driver("library", tmp_path)
    assert r["order"] == ["Notes", "Deploy", "Groceries"], "last activity first"
    assert r["order_after"] == ["Groceries", "Notes", "Deploy"]
    assert r["time"] == "just now"
    assert r["search"] == ["Groceries"], "found by a word in its transcript"
    assert r["after_archive"] == ["Groceries", "Deploy"]
    assert r["renamed"] == "Deploy to staging"
    assert r["exported"] == [f"{r['ids']['Deploy']}.jsonl"]
    assert r["imported"] == {
        "from": r["ids"]["Deploy"],
        "title": "Deploy to staging",
        "status": "closed",
    }


@window_only
def test_a_thousand_sessions_page_in_search_group_and_move_one_at_a_time(tmp_path: Path) -> None:
    r = run_driver("library_scale", tmp_path)
    # The page is ready on the sidecar's first page; the rest comes behind it.
    assert r["first_page"] == {"drawn": 100, "known": "100", "loading": True}
    assert r["loading_after"] is False
    assert r["drawn"] == 100 and r["more"], "one page drawn, the rest on demand"
    assert r["first"] == "Stored 0", "last activity first"
    assert r["drawn_after_scroll"] >= 200, "the next page came as the end scrolled into view"
    assert r["last"] == "Stored 999", "End reaches the oldest"
    assert r["found"] == r["planted"], "a word from one transcript among 1,000 sessions"
    assert len(r["groups"]) == 5 and {count for _, count in r["groups"]} == {"200"}
    assert sorted(Path(cwd).name for cwd, _ in r["groups"]) == [f"project-{i}" for i in range(5)]
    assert r["grouped_drawn"] == 100, "grouping pages too"
    assert r["kept_node"], "one session's change leaves the other items in place"
    assert r["drawn_after_change"] == 101


@window_only
def test_the_model_picker_offers_the_providers_models_and_the_choice_is_used(
    tmp_path: Path,
) -> None:
    r = run_driver("models", tmp_path)
    assert r["choices"] == ["fake-large", "fake-small"], "the server's list, as it offers it"
    assert (r["current"], r["pill"]) == ("fake-small", "fake-small")
    assert r["sent_model"] == r["stored_model"] == "fake-large"
    assert r["after_rebuild"] == "fake-large"
    # The provider's token counts (the fake reports usage) and the context used.
    assert re.fullmatch(r"\d+ in · \d+ out · context \d+(\.\d+k)?( / \S+)?", r["usage"]), r["usage"]


@window_only
def test_a_missing_api_key_is_said_once_with_what_to_set(tmp_path: Path) -> None:
    r = run_driver("provider_problem", tmp_path)
    assert "OPENAI_API_KEY" in r["banner"]
    assert r["banners"] == ["provider-banner"], "the failed turn does not repeat the hint"
    assert "OPENAI_API_KEY" in r["turn_error"]  # the details keep the session's last error
    assert r["retry_offered"]
    assert r["banner_after_restart"] is False, "a restarted sidecar without the problem clears it"


def test_live_outputs_render_chunks_in_order_and_forget_finished_calls() -> None:
    from desktop.live import LiveOutputs

    live = LiveOutputs()
    start = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "kind": "execute"}
    live.observe(
        "session/update", {"sessionId": "s", "update": {**start, "rawInput": {"command": "ls"}}}
    )
    pushed = []
    for chunk in ("\x1b[3", "1mred", " more\x1b[0m"):
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "_meta": {"output": chunk},
        }
        pushed.append(live.observe("session/update", {"sessionId": "s", "update": update}))
    metas = [p["update"]["_meta"] for p in pushed]
    assert [m["outputSeq"] for m in metas] == [1, 2, 3]
    assert "".join(m["outputHtml"] for m in metas) == (
        '<span class="ansi-fg-1">red</span><span class="ansi-fg-1"> more</span>'
    )
    (running,) = live.running("s")
    assert running["command"] == "ls" and running["seq"] == 3
    assert running["html"] == "".join(m["outputHtml"] for m in metas)
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}
    live.observe("session/update", {"sessionId": "s", "update": done})
    assert live.running("s") == []


def test_window_settings_keep_theme_recent_folders_and_live_sessions_per_store(
    tmp_path: Path,
) -> None:
    from desktop.settings import Settings

    settings = Settings(tmp_path)
    assert settings.snapshot() == {"theme": "system", "recentFolders": [], "notifications": True}
    settings.set_theme("dark")
    for folder in ("/a", "/b", "/a"):
        settings.add_recent(folder)
    settings.set_last_live("/data1", ["s1", "s2"])
    settings.set_last_live("/data2", ["s3"])
    again = Settings(tmp_path)
    assert again.snapshot() == {
        "theme": "dark",
        "recentFolders": ["/a", "/b"],
        "notifications": True,
    }
    assert again.last_live("/data1") == ["s1", "s2"] and again.last_live("/data2") == ["s3"]
    assert again.last_live("/elsewhere") == []
    with pytest.raises(ValueError):
        again.set_theme("purple")


def test_the_bridge_says_one_clear_thing_about_a_folder(tmp_path: Path) -> None:
    from desktop.bridge import _folder, rpc_error
    from desktop.client import RpcError

    (tmp_path / "file.txt").write_text("x")
    assert _folder(str(tmp_path)) == str(tmp_path)
    missing = _folder(str(tmp_path / "nope"))
    assert isinstance(missing, dict)
    assert missing["error"]["message"] == f"There is no folder {tmp_path / 'nope'}."
    not_dir = _folder(str(tmp_path / "file.txt"))
    assert isinstance(not_dir, dict) and "is a file, not a folder" in not_dir["error"]["message"]
    refused = rpc_error(RpcError(-32602, "Invalid params: cwd: must be absolute"))
    assert refused["error"]["title"] == "Invalid input"
    assert refused["error"]["message"] == "cwd: must be absolute"


@window_only
def test_the_scroll_position_comes_back_after_rebuild(tmp_path: Path) -> None:
    r = run_driver("scroll", tmp_path)
    assert r["before"] == 300 and abs(r["after"] - r["before"]) <= 1


@window_only
def test_answers_that_come_late_miss_nothing_that_happened_meanwhile(tmp_path: Path) -> None:
    r = run_driver("slow_page", tmp_path)
    # The turn ended while the page loaded: its reply is there, once (stored, not live).
    assert "hello" in r["reply"] and "Echo: hello" in r["reply"]
    # The approval drawn meanwhile stays, with the focus, and its call is drawn once.
    assert r["card_focused"] is True
    assert r["cards_for_the_call"] == 1
    assert r["poem"] == "ONE\n"
    # A session list answered before the turn failed does not undo the failure.
    assert r["status_after_the_late_list"] == "error"
    # Coming back to a transcript read halfway: it is where it was, its page slow or not.
    assert abs(r["scroll_back"] - 300) <= 1
    assert abs(r["scroll_after_a_turn"] - 300) <= 1


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@window_only
def test_a_worktree_session_from_the_form_is_reviewed_and_squash_merged(tmp_path: Path) -> None:
    r = run_driver("worktree_merge", tmp_path)
    repo = tmp_path / "workspace"
    # A bad branch is refused next to the form, which stays as it was; nothing is made.
    assert r["options_hidden"] and r["options_shown"]
    bad = r["bad_branch"]
    assert "_meta.worktree.branch" in bad["error"] and "bad..name" in bad["error"]
    assert (bad["form_open"], bad["focus"], bad["kept"], bad["sessions"]) == (
        True,
        "new-branch",
        "bad..name",
        0,
    )
    wt = r["worktree"]
    assert (wt["branch"], wt["base"], wt["repo"]) == ("feature-x", "main", str(repo))
    assert r["cwd"] == wt["path"] and wt["path"] != str(repo)
    assert r["badges"]["branch"] == "⎇ feature-x" and r["badges"]["dirty"] is None
    assert r["detail_pill"].startswith("⎇ feature-x")
    # Both sessions of the repository under one header (the worktree one by its repo).
    assert r["groups"] == [[str(repo), "2"]]
    assert r["plain_badge"] is None
    # The turn wrote into the worktree, not the main tree; the badge says it is dirty.
    assert r["in_worktree"] == "made in the worktree" and r["in_repo_before"] is False
    assert r["badges_after_turn"]["dirty"] == "●"
    view = r["view"]
    assert view["title"] == "feature-x → main"
    assert view["files"] == ["feature.txt"] and view["totals"].startswith("1 file")
    assert "add||1|made in the worktree" in view["rows"]
    assert view["discard_disabled"] is True  # live: close it first
    assert r["merge_question"].startswith("Squash-merge feature-x into main?")
    assert "Merged (squash) feature-x into main" in r["merge_notice"]
    # The base branch has the change, as one new commit on main.
    assert r["in_repo_after"] == "made in the worktree"
    assert len(r["main_log"]) == 2 and r["main_log"][-1] == "start"
    squashed = _git(repo, "log", "--format=%H", "main").split()[-2]  # main moved on since
    assert _git(repo, "show", f"{squashed}:feature.txt") == "made in the worktree"
    assert _git(repo, "rev-list", "--parents", "-n1", squashed).split()[1:] == [
        _git(repo, "rev-list", "--max-parents=0", "main").strip()
    ], "one commit on main, not a merge"
    assert r["badges_after_merge"]["dirty"] is None and r["view_open_after"] is True
    # A conflicting merge names the file; the main tree and main are left as they were.
    conflict = r["conflict"]
    assert "conflicts in feature.txt" in conflict["text"] and conflict["files"] == ["feature.txt"]
    assert conflict["main_file"] == "main's own line\n" and conflict["main_status"] == ""
    assert _git(repo, "log", "-1", "--format=%s", "main").strip() == "main moves on"
    assert r["focus_after_esc"] == "branch-changes"


@window_only
def test_a_closed_worktree_session_is_discarded_after_a_confirmation(tmp_path: Path) -> None:
    r = run_driver("worktree_discard", tmp_path)
    assert r["badges"]["branch"] == f"⎇ {r['branch']}"
    live = r["live"]
    assert live["disabled"] is True and "Close the session first" in live["title"]
    assert live["empty"].startswith("No changes on this branch")
    # Paged: 100 files, then the other 20 on "Load more files".
    assert r["first_page"] == {"files": 100, "more": True, "totals": "100+ files +100 −0"}
    assert r["all_pages"] == {
        "files": 120,
        "distinct": 120,
        "more": False,
        "totals": "120 files +120 −0",
    }
    assert r["question"].startswith(
        f"Discard this session's worktree and the branch {r['branch']}?"
    )
    assert f"Discarded the worktree and {r['branch']}" in r["notice"]
    after = r["after"]
    assert after["badges"] == {"branch": None, "sync": None, "dirty": None}
    assert (after["view_open"], after["button_shown"]) == (False, False)
    assert (after["directory"], after["branches"]) == (False, "")
    assert after["listed"] is True and after["summary_worktree"] is None
    assert _git(tmp_path / "workspace", "branch", "--list", r["branch"]).strip() == ""


# The file the review scenarios' turn wrote: a line per place a hunk may be.
POEM = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


def poem_text(**changed: str) -> str:
    """The poem with the lines named replaced (`two="TWO"`)."""
    return "".join(f"{changed.get(line, line)}\n" for line in POEM)


@window_only
def test_a_turns_hunks_are_accepted_and_rejected_one_by_one_with_the_keyboard(
    tmp_path: Path,
) -> None:
    r = run_driver("hunk_review", tmp_path)
    assert r["state"] == "2 hunks · 0 kept · 0 reverted · 2 to review"
    assert "del|2||two" in r["rows"] and "add||2|TWO" in r["rows"]
    assert "del|19||nineteen" in r["rows"] and "add||19|NINETEEN" in r["rows"]
    assert (r["after_j"], r["after_k"]) == (1, 0)
    assert r["after_a"] == {"verdicts": ["accepted", ""], "focus": 1}
    # r on the second hunk reverted it on disk; the first (accepted) stays as the turn left it.
    assert r["notice"].startswith("Reverted 1 hunk of poem.txt (turn 1).")
    assert r["on_disk"] == poem_text(two="TWO")
    after = r["after_r"]
    assert after["verdicts"][0] == "accepted" and "rejected" in after["verdicts"]
    assert "1 kept · 1 reverted" in after["state"] and after["focused_hunk"] >= 0
    # Lines changed since the turn: refused, nothing touched, until "Revert anyway".
    refusal = r["refusal"]
    assert "changed since" in refusal["text"] and refusal["focus"] == "revert-force"
    assert refusal["on_disk"] == poem_text(two="TWO", ten="ten, by the user")
    assert "overwriting later changes" in r["forced_notice"]
    assert r["forced_on_disk"] == poem_text(two="TWO")
    assert r["undone_on_disk"] == poem_text(two="TWO", ten="ten, by the user")


@window_only
def test_a_files_reject_takes_back_only_the_hunks_not_accepted_and_its_accept_the_rest(
    tmp_path: Path,
) -> None:
    r = run_driver("file_review", tmp_path)
    assert r["before"]["text"] == "Reject file"
    assert "except hunks you accept first" in r["before"]["title"]
    assert r["one_kept"]["text"] == "Reject the rest"
    assert "2 hunks of poem.txt not accepted (the 1 kept stay)" in r["one_kept"]["title"]
    assert r["notice"].startswith("Reverted 2 hunks of poem.txt (turn 1).")
    assert r["verdicts"] == ["rejected", "accepted", "rejected"]
    assert r["on_disk"] == poem_text(ten="TEN")  # the accepted hunk stays as the turn left it
    assert "1 kept · 2 reverted · 0 to review" in r["after"]["state"]
    assert r["after"]["reject_disabled"] is True and r["after"]["accept_disabled"] is True
    second = r["second"]
    assert second["verdicts"] == ["rejected", "accepted"]  # the reverted one not marked kept
    assert "1 kept · 1 reverted · 0 to review" in second["state"]
    assert second["accept_disabled"] is True and second["reject_disabled"] is True
    # The kept hunk as the turn left it (its /write ended the file without a newline).
    assert second["on_disk"] == poem_text(eighteen="EIGHTEEN").rstrip("\n")


@window_only
def test_a_py_hunk_is_drawn_with_syntax_colours_and_its_text_stays_text(tmp_path: Path) -> None:
    r = run_driver("syntax_colours", tmp_path)
    lines = [
        "def greet(name):",
        '    return "<img src=x onerror=window.pwned=1>" + name  # </span><b>bold</b>',
    ]
    for where in ("card", "branch"):
        rows = r[where]
        assert [row["text"] for row in rows] == lines, where
        assert all(row["hl"] for row in rows), where
        assert all(set(row["tags"]) == {"SPAN"} for row in rows), where  # no markup made
        first, second = (set(row["classes"]) for row in rows)
        assert {"k", "nf"} <= first, (where, first)  # def, greet
        assert {"k", "s2", "c1"} <= second, (where, second)  # return, the string, the comment
        assert all(row["background"] not in ("", "rgba(0, 0, 0, 0)") for row in rows), where
    assert r["pwned"] is None and r["images"] == 0


@window_only
def test_the_details_list_the_project_instruction_files_the_agent_read(tmp_path: Path) -> None:
    r = run_driver("instruction_files", tmp_path)
    assert r["shown"] is True
    root, nested = r["first"]
    assert root.endswith("AGENTS.md · 10 bytes") and "sub" not in root
    assert "sub/AGENTS.md" in nested and "left out" in nested
    assert any(text.endswith("AGENTS.md · 18 bytes") for text in r["after"])
