"""Interop: the official TypeScript ACP SDK (`@agentclientprotocol/sdk` 2.x) as the client.

`tests/acp_ts/client.mjs` starts a real `python -m sidecar --store memory`, connects the
SDK's client app to its stdio (`client().connect(ndJsonStream(...))`) and runs one group
of scenarios per test (`--only GROUP`), printing one JSON line per step and a summary.
Besides each step's own checks, the summary lists every protocol problem seen on the
wire: what the SDK logged (its only report for a malformed notification), error
responses the SDK sent back to the sidecar, unknown notifications/requests, and every
sidecar message that fails or does not survive the SDK's own zod schemas unchanged
(the SDK validates notifications and requests, never responses, and silently repairs
or strips much of what is invalid). Any of those fails the test.

The scenarios cover what issue 11 lists: initialize, new, a prompt with streamed
updates, a tool call whose live output shows in standard `content`, cancel,
set_config_option (approval and mode), list, close (twice), load, resume, fork, delete
(also of an unknown id: -32002), and a provider failure followed by a prompt that
works. The sidecar's default approval is `ask`, so the tool scenarios also check that
the sidecar asked this client (`session/request_permission`, answered allow) before it
ran the command.

`npm ci` runs once per session when `tests/acp_ts/node_modules` is missing or older than
`package-lock.json`; no node/npm, or a failing `npm ci`, fails the tests, never skips.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "tests" / "acp_ts"
CLIENT = PKG / "client.mjs"
FAKE_AGENT = PKG / "fake_agent.mjs"
LOCKFILE = PKG / "package-lock.json"
SDK = "@agentclientprotocol/sdk"
SIDECAR = [sys.executable, "-m", "sidecar", "--store", "memory"]
NODE_MAJOR_MIN = 20

NPM_CI_TIMEOUT = 240  # seconds; a cold cache downloads two small packages
RUN_TIMEOUT = 60  # seconds for one `node client.mjs` run (its own watchdog fires at 45)

pytestmark = pytest.mark.timeout(NPM_CI_TIMEOUT + RUN_TIMEOUT + 30)


# --------------------------------------------------------------------------- setup


def _fail(message: str) -> None:
    pytest.fail(message, pytrace=False)


def _installed_is_current() -> bool:
    # npm writes node_modules/.package-lock.json on every install/ci.
    stamp = PKG / "node_modules" / ".package-lock.json"
    sdk = PKG / "node_modules" / SDK / "package.json"
    return stamp.is_file() and sdk.is_file() and stamp.stat().st_mtime >= LOCKFILE.stat().st_mtime


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary, with tests/acp_ts/node_modules installed from the lockfile."""
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        _fail(
            "test_acp_ts_sdk needs Node.js >= 20 and npm on PATH "
            f"(node: {node_bin or 'missing'}, npm: {npm_bin or 'missing'})"
        )
    assert node_bin is not None and npm_bin is not None
    version = subprocess.run(
        [node_bin, "--version"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < NODE_MAJOR_MIN:
        _fail(f"test_acp_ts_sdk needs Node.js >= {NODE_MAJOR_MIN}, found {version or '?'}")
    # One installer at a time (parallel pytest sessions share tests/acp_ts).
    with open(PKG / "package.json") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_is_current():
            command = [npm_bin, "ci", "--prefer-offline", "--no-audit", "--no-fund"]
            try:
                done = subprocess.run(
                    command, cwd=PKG, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT
                )
            except subprocess.TimeoutExpired:
                _fail(f"`{' '.join(command)}` in {PKG} did not finish in {NPM_CI_TIMEOUT} s")
            if done.returncode != 0:
                _fail(
                    f"`{' '.join(command)}` in {PKG} failed (exit {done.returncode}):\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                )
    return node_bin


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def step(self, name: str) -> dict[str, Any]:
        assert name in self.steps, f"step {name!r} did not run; output:\n{self.dump()}"
        return self.steps[name]

    def dump(self) -> str:
        return (
            "\n".join(json.dumps(line) for line in self.lines)
            + f"\n--- stderr ---\n{self.stderr[-4000:]}"
        )


def run_client(
    node: str,
    groups: list[str],
    tmp_path: Path,
    *,
    agent: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    command = [node, str(CLIENT), "--only", ",".join(groups), "--", *(agent or SIDECAR)]
    cwd = tmp_path / "workspace"
    cwd.mkdir(exist_ok=True)
    full_env = {
        **os.environ,
        "SIDECAR_DATA_DIR": str(tmp_path / "data"),
        "ACP_TS_CWD": str(cwd),
        "ACP_TS_TIMEOUT": str(RUN_TIMEOUT - 15),
        "ACP_TS_STEP_TIMEOUT": "20",
        **(env or {}),
    }
    # Its own process group: on a hang, node, the sidecar and its children all go.
    proc = subprocess.Popen(
        command,
        cwd=REPO,  # `python -m sidecar` imports this checkout
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        _fail(
            f"`node client.mjs --only {','.join(groups)}` hung for {RUN_TIMEOUT} s and was "
            f"killed\n{stdout[-4000:]}\n--- stderr ---\n{stderr[-4000:]}"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = []
    for raw in stdout.splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            _fail(f"client.mjs printed a line that is not JSON: {raw!r}\n{stdout[-4000:]}")
    run = Run(proc.returncode, lines, stderr)
    run.steps = {line["step"]: line for line in lines if "step" in line}
    summaries = [line for line in lines if line.get("summary")]
    assert len(summaries) == 1, f"expected one summary line (exit {proc.returncode}):\n{run.dump()}"
    run.summary = summaries[0]
    return run


def assert_clean(run: Run) -> None:
    """Nothing on the wire broke the protocol, and the sidecar exited 0 on stdin EOF."""
    problems = {kind: found for kind, found in run.summary["problems"].items() if found}
    assert not problems, (
        "protocol problems seen by the TypeScript SDK client:\n"
        f"{json.dumps(problems, indent=2)[:6000]}\n\n{run.dump()}"
    )
    exit_step = run.step("agent_exit")
    assert exit_step["ok"], f"the sidecar did not exit 0 on stdin EOF: {exit_step['detail']}"


def assert_ok(run: Run, *names: str) -> None:
    for name in names:
        line = run.step(name)
        assert line["ok"], (
            f"step {name} failed: {json.dumps(line['detail'], indent=2)}\n\n{run.dump()}"
        )


def assert_all_ok(run: Run) -> None:
    assert_clean(run)
    failed = [line for line in run.lines if "step" in line and not line["ok"]]
    assert not failed, "failed steps:\n" + "\n".join(json.dumps(line) for line in failed)
    assert run.summary["ok"] and run.returncode == 0, run.dump()


# --------------------------------------------------------------------------- the package


def test_package_pins_the_sdk_exactly(node: str) -> None:
    package = json.loads((PKG / "package.json").read_text())
    lock = json.loads(LOCKFILE.read_text())
    wanted = package["dependencies"][SDK]
    assert package["private"] is True and package["type"] == "module"
    assert re.fullmatch(r"2\.\d+\.\d+", wanted), f"{SDK} must be an exact 2.x version: {wanted}"
    assert lock["packages"][""]["dependencies"][SDK] == wanted
    assert lock["packages"][f"node_modules/{SDK}"]["version"] == wanted
    installed = json.loads((PKG / "node_modules" / SDK / "package.json").read_text())
    assert installed["version"] == wanted


# --------------------------------------------------------------------------- scenarios


def test_initialize_new_session_and_streamed_prompt(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["basic"], tmp_path)
    assert_all_ok(run)
    init = run.step("initialize")["detail"]
    assert init["protocolVersion"] == 1 and init["loadSession"] is True
    assert {"list", "close", "resume", "delete"} <= set(init["sessionCapabilities"])
    hello = run.step("basic.prompt_hello")["detail"]
    assert hello["stopReason"] == "end_turn" and hello["chunks"] >= 1
    assert hello["text"] == "Echo: hello"
    assert run.summary["info"]["deliveredUpdates"] == run.summary["info"]["wireUpdates"]


ALLOWED_ONCE = [{"outcome": "selected", "optionId": "allow_once"}]


def test_tool_call_and_tool_call_updates(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["tool"], tmp_path)
    assert_all_ok(run)
    detail = run.step("tool.tool_call")["detail"]
    assert detail["toolCall"]["kind"] == "execute"
    assert detail["finalStatus"] == "completed" and detail["toolCallUpdates"] >= 2
    assert detail["rawOutput"] == {"exitCode": 0, "cancelled": False}
    # Asked before it ran (approval `ask`), and the TypeScript client allowed it.
    assert detail["permission"] == ALLOWED_ONCE
    (asked,) = run.summary["info"]["permissionRequests"]
    assert asked["toolCallId"] == detail["toolCall"]["toolCallId"]


def test_live_output_in_standard_content(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["tool_live"], tmp_path)
    assert_all_ok(run)
    detail = run.step("tool_live.live_output_in_content")["detail"]
    assert detail["withLiveOutputInContent"] >= 1 and detail["withLiveOutputInMeta"] == 0
    assert detail["liveTexts"][-1] == "live-output-check\ndone\n"
    assert detail["permission"] == ALLOWED_ONCE


def test_cancel_during_sleep(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["cancel"], tmp_path)
    assert_all_ok(run)
    assert run.step("cancel.cancel_sleep")["detail"]["stopReason"] == "cancelled"


def test_set_mode(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["set_mode"], tmp_path)
    assert_all_ok(run)


def test_set_config_option_approval_and_mode(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["set_config_option"], tmp_path)
    assert_all_ok(run)
    approval = run.step("set_config_option.set_config_option_approval_auto")["detail"]
    assert approval["approval"]["currentValue"] == "auto"
    assert approval["asked"] == 0 and approval["finalStatus"] == "completed"
    assert run.summary["info"]["permissionRequests"] == []
    mode = run.step("set_config_option.set_config_option_mode_plan")["detail"]
    options = {o["id"]: o for o in mode["configOptions"]}
    assert options["mode"]["currentValue"] == "plan"
    assert options["approval"]["currentValue"] == "auto"
    assert set(mode["advertisedConfigOptions"]) >= {"mode", "model", "approval", "sandbox"}


def test_list_contains_the_session(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["list"], tmp_path)
    assert_all_ok(run)


def test_close_twice(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["close"], tmp_path)
    assert_all_ok(run)
    # Both closes succeed on the wire, not via the SDK's -32002-means-success rule.
    assert run.step("close.close")["detail"]["wire"] == "result"
    assert run.step("close.close_again")["detail"]["wire"] == "result"


def test_load_resume_fork_delete(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["lifecycle"], tmp_path)
    assert_all_ok(run)
    load = run.step("lifecycle.load")["detail"]
    assert load["user"] == ["hello"] and "hello" in load["agentText"]
    fork = run.step("lifecycle.fork")["detail"]
    assert fork["forkedFrom"] == run.step("lifecycle.session_new")["detail"]["sessionId"]


def test_delete_unknown_session_is_resource_not_found(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["delete_unknown"], tmp_path)
    assert_all_ok(run)
    wire = run.step("delete_unknown.delete_unknown_session")["detail"]["wire"]
    assert wire["error"]["code"] == -32002
    assert wire["error"]["data"]["sessionId"] == "sess_does_not_exist_0000"


def test_provider_failure_is_an_error_response(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["provider_failure"], tmp_path)
    assert_all_ok(run)
    error = run.step("provider_failure.prompt_fail_is_error")["detail"]["error"]
    assert "boom" in error["message"]


def test_prompt_after_provider_failure_succeeds(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["recover_after_failure"], tmp_path)
    assert_all_ok(run)
    detail = run.step("recover_after_failure.prompt_after_provider_failure")["detail"]
    assert detail["failure"]["code"] == -32050 and "boom" in detail["failure"]["message"]
    assert (detail["stopReason"], detail["status"], detail["generation"]) == ("end_turn", "idle", 2)
    assert detail["lastError"] is None


# --------------------------------------------------------------------------- the client itself
# The sidecar never misbehaves on purpose, and a reject or cancel answer is the consent
# tests' business (tests/test_consent_e2e.py), so these run client.mjs against
# tests/acp_ts/fake_agent.mjs (raw JSON-RPC, no SDK).


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("allow", {"outcome": "selected", "optionId": "opt-allow"}),
        ("reject", {"outcome": "selected", "optionId": "opt-reject"}),
        ("cancel", {"outcome": "cancelled"}),
    ],
)
def test_request_permission_answer(
    node: str, tmp_path: Path, mode: str, expected: dict[str, str]
) -> None:
    run = run_client(
        node,
        ["permission"],
        tmp_path,
        agent=[node, str(FAKE_AGENT)],
        env={"ACP_TS_PERMISSION": mode},
    )
    assert_all_ok(run)
    detail = run.step("permission.request_permission")["detail"]
    assert detail["agentSaw"] == {"outcome": expected}


def test_client_reports_every_kind_of_violation(node: str, tmp_path: Path) -> None:
    run = run_client(node, ["selftest"], tmp_path, agent=[node, str(FAKE_AGENT)])
    assert run.returncode == 1 and run.summary["ok"] is False, run.dump()
    assert_ok(run, "initialize", "selftest.session_new", "selftest.violations_prompt")
    problems = run.summary["problems"]
    # The SDK's own report of a notification its schema rejects: a console.error line.
    assert any(r["args"][0] == "Error handling notification" for r in problems["sdkReports"])
    found = {(v["verdict"], v["method"]) for v in problems["schemaViolations"]}
    assert found == {
        ("rejected", "session/update"),  # no content type tag; unknown update variant
        ("altered", "session/update"),  # invalid status repaired away; unknown field stripped
        ("altered", "session/prompt"),  # unknown result field stripped
    }
    paths = {d["path"] for v in problems["schemaViolations"] for d in v.get("differences", [])}
    # Silently repaired (invalid status) and stripped (unknown field) values are caught too.
    assert {"update.status", "update.extraRootField", "extraResultField"} <= paths
    assert [n["method"] for n in problems["unknownNotifications"]] == ["session/bogus"]
    assert [r["method"] for r in problems["unknownRequests"]] == ["fs/read_text_file"]
    assert {e["error"]["code"] for e in problems["outgoingErrors"]} == {-32700, -32601}
    assert {e["problem"] for e in problems["wireErrors"]} == {
        "line is not JSON",
        "response to a request we never sent",
    }
    assert problems["droppedBySdk"], "the two rejected updates never reached the handler"
    info = run.summary["info"]
    assert info["unregisteredExtensionNotifications"] == {"_fake/unregistered": 1}
