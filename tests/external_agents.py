"""Test helpers for sessions run by an external ACP agent (our scripted one).

`AgentSetup` writes an agents.toml naming the scripted agent (tests/agents/scripted_agent.py)
under a few names with different behaviours, each with its own log and state dir outside
the workspace (made writable for it by the definition, as a real agent's state dir is),
and a marker variable so a test can find every process it left behind.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

SCRIPTED = Path(__file__).resolve().parent / "agents" / "scripted_agent.py"


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


class AgentSetup:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.marker = uuid.uuid4().hex
        self.state = root / "agent-state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.file = root / "agents.toml"
        self.names: list[str] = []
        self._tables: list[str] = []

    def log_path(self, name: str) -> Path:
        return self.state / f"{name}.log"

    def add(
        self, name: str, caps: str | None = None, *, shared: bool = False, **env: str
    ) -> AgentSetup:
        """An agent `name` running the scripted agent with SCRIPTED_AGENT_<KEY>=value for
        each keyword (fail="new-hang" -> SCRIPTED_AGENT_FAIL=new-hang); `shared`: declared
        `shared_process` (one process serves its sessions in the same sandbox)."""
        values = {
            "SCRIPTED_AGENT_LOG": str(self.log_path(name)),
            "SCRIPTED_AGENT_STATE": str(self.state / name),
            "AGENT_TEST_MARKER": self.marker,
            **{f"SCRIPTED_AGENT_{key.upper()}": value for key, value in env.items()},
        }
        if caps is not None:
            values["SCRIPTED_AGENT_CAPS"] = caps
        (self.state / name).mkdir(exist_ok=True)
        env_table = ", ".join(f"{key} = {toml_string(v)}" for key, v in values.items())
        self._tables.append(
            f"[agents.{name}]\n"
            f"command = [{toml_string(sys.executable)}, {toml_string(str(SCRIPTED))}]\n"
            f"env = {{ {env_table} }}\n"
            f"writable = [{toml_string(str(self.state))}]\n"
            + ("shared_process = true\n" if shared else "")
        )
        self.names.append(name)
        self.file.write_text("\n".join(self._tables))
        return self

    def args(self) -> list[str]:
        return ["--agents-file", str(self.file)]

    def received(self, name: str) -> list[dict[str, Any]]:
        """What the agent `name` received (its log: requests, notifications, answers)."""
        path = self.log_path(name)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def methods(self, name: str) -> list[str]:
        return [entry["method"] for entry in self.received(name) if "method" in entry]

    def agent_session(self, name: str, prompt: str) -> str:
        """The agent's own session id of the session that sent `prompt` (a text sent once)."""
        for entry in self.received(name):
            if entry.get("method") == "session/prompt":
                params = entry["params"]
                if any(block.get("text") == prompt for block in params["prompt"]):
                    return str(params["sessionId"])
        raise AssertionError(f"{name} was never sent {prompt!r}")

    def agents(self) -> list[int]:
        """The agent processes themselves still running (not the bubblewrap around them)."""
        found = []
        for pid in self.alive():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
                    found.append(pid)
            except OSError:
                continue  # gone since
        return found

    def alive(self) -> list[int]:
        """Processes still running whose environment holds this setup's marker."""
        found = []
        needle = f"AGENT_TEST_MARKER={self.marker}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in environ.split(b"\0") and state != "Z":
                found.append(int(entry))
        return found
