"""Real third-party ACP agents from npm (tests/agents/npm's committed lockfile), set up to
run offline against a loopback fake model server.

Why here: the project runs external agents as a session's engine, and its tests must use
the agents users run, pinned, installed by `npm ci`, never fetched at test time. Each
`*_launch` writes the config files its agent needs into a fresh home and returns the argv
and the complete environment (nothing inherited but PATH and the locale), so the agent
sees no user config and no real key.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

NPM_DIR = Path(__file__).parent / "npm"
MODULES = NPM_DIR / "node_modules"
CLAUDE_JS = MODULES / "@zed-industries/claude-agent-acp/dist/index.js"
CODEX_BIN = MODULES / "@zed-industries/codex-acp-linux-x64/bin/codex-acp"
CODEX_MODEL = "gpt-5.3-codex"


@dataclass(frozen=True)
class Launch:
    """How to start one agent: argv and its whole environment."""

    argv: list[str]
    env: dict[str, str]


def ensure_installed() -> Path:
    """node_modules, installed by `npm ci` when missing or older than the lockfile; a missing
    node/npm or a failed install raises with npm's output (a test must fail, not skip)."""
    lock = NPM_DIR / "package-lock.json"
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            raise RuntimeError(f"real-agent tests need `{tool}` (Node 20+) on PATH")
    stamp = MODULES / ".package-lock.json"  # npm writes it at the end of an install
    with (NPM_DIR / ".install.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # parallel test processes install once
        if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
            done = subprocess.run(
                ["npm", "ci", "--prefer-offline", "--no-audit", "--no-fund"],
                cwd=NPM_DIR,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                out = f"{done.stdout}\n{done.stderr}"
                raise RuntimeError(f"npm ci failed ({done.returncode}):\n{out}")
    for path in (CLAUDE_JS, CODEX_BIN):
        if not path.exists():
            raise RuntimeError(f"npm ci did not install {path.relative_to(NPM_DIR)}")
    return MODULES


def base_env(home: Path) -> dict[str, str]:
    """PATH and locale only, and a fresh HOME: no user config or credentials leak in."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    home.mkdir(parents=True, exist_ok=True)
    return env


def claude_launch(home: Path, base_url: str) -> Launch:
    """claude-agent-acp (it spawns a `claude` child per session) against base_url (no /v1)."""
    env = base_env(home) | {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key",
        "IS_SANDBOX": "1",  # needed when run as root
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    seed_claude_home(home)
    return Launch([shutil.which("node") or "node", str(CLAUDE_JS)], env)


def seed_claude_home(home: Path) -> None:
    """A fresh plugin blocklist cache: without one, claude fetches its plugins' security list
    from raw.githubusercontent.com at every start (it trusts a cache for an hour)."""
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    cache = {"fetchedAt": now, "plugins": []}
    (plugins / "blocklist.json").write_text(json.dumps(cache), encoding="utf-8")


def codex_config(base_url: str, sandbox_mode: str) -> str:
    """config.toml: one provider, ours, with no retries and nothing phoned home."""
    return f"""\
model = "{CODEX_MODEL}"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "{sandbox_mode}"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}/v1"
env_key = "FAKE_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def codex_launch(home: Path, base_url: str, sandbox_mode: str = "read-only") -> Launch:
    """codex-acp's native binary against base_url (no /v1), CODEX_HOME in home."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url, sandbox_mode), "utf-8")
    # codex puts its sandbox helper (codex-linux-sandbox, run under bwrap) in CODEX_HOME,
    # but refuses to below the temporary dir: TMPDIR in home keeps a home in /tmp usable.
    tmpdir = home / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = base_env(home) | {
        "CODEX_HOME": str(codex_home),
        "FAKE_KEY": "sk-fake-key",
        "TMPDIR": str(tmpdir),
    }
    return Launch([str(CODEX_BIN)], env)


def pids_with(marker: str) -> list[int]:
    """Processes whose environment holds marker (e.g. AGENT_TEST_MARKER=<uuid>)."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found
