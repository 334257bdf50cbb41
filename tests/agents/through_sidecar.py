"""Real agents (claude-agent-acp, codex-acp) as a session's engine through our sidecar,
with the sidecar itself inside the fake model server's loopback-only network namespace.

Why a launcher: the harness starts `<python> -m sidecar ...`; here `<python>` is a script
that execs nsenter into the namespace first, so the sidecar, and every agent it spawns in
bubblewrap (which keeps its parent's network), reach only the loopback model server.

Why a tap: the sidecar is the agent's ACP client, so what the agent asks of it (fs/*,
terminal/*, session/request_permission) is seen by no one but the sidecar. The agent's
command in agents.toml is this file run as `tap LOG -- ARGV...`: a line-for-line relay of
its stdio that writes each JSON-RPC message's direction, id, method and a short form of
its params to LOG (under the agent's home, which the sandbox leaves writable).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

if str(Path(__file__).parents[1]) not in sys.path:  # run as a script: reach tests/
    sys.path.insert(0, str(Path(__file__).parents[1]))

from agents.model_servers import ServerControl  # noqa: E402
from agents.netns import Netns  # noqa: E402
from agents.real_agents import Launch  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve()
MODEL_SERVERS = HERE.parent / "model_servers.py"
SHOWN = 300  # characters of a string kept in the tap's log


@dataclass
class World:
    """One namespace with a model server in it, and the paths of this test."""

    ns: Netns
    control: ServerControl
    base_url: str
    tmp: Path


async def start_world(kind: str, tmp: Path) -> World:
    """The model server of `kind` as the owner of a fresh loopback-only namespace."""
    sock = tmp / "control.sock"
    ns = Netns.start([sys.executable, str(MODEL_SERVERS), kind, "--control", str(sock)], tmp)
    try:
        await asyncio.to_thread(ns.wait_for, sock)
        control = ServerControl(sock)
        return World(ns, control, await control.base_url(), tmp)
    except BaseException:
        ns.stop()
        raise


def launcher(ns: Netns, where: Path) -> str:
    """An executable that runs `<this interpreter> ARGS` inside ns (the harness's `python`)."""
    argv = ns.enter([sys.executable], REPO)
    path = where / "in-netns"
    path.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n', encoding="utf-8")
    path.chmod(0o700)
    return str(path)


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def agents_toml(
    path: Path,
    name: str,
    launch: Launch,
    extra_env: dict[str, str],
    writable: list[Path],
    *,
    shared: bool = False,
) -> Path:
    """agents.toml with one agent: launch's argv behind the tap (its log in writable[0]) and
    launch's environment (HOME left out: the sidecar sets the agent's HOME to its own);
    `shared`: declared `shared_process`, as the preset of that name is."""
    tap_log = tap_log_path(writable[0])
    # There from the start: the sandbox binds what an argv names under /tmp once it exists
    # (`sandbox.program_roots`), so every process of the agent gets the same sandbox (and
    # sessions of a `shared_process` agent the same process).
    tap_log.parent.mkdir(parents=True, exist_ok=True)
    tap_log.touch()
    command = [sys.executable, str(HERE), "tap", str(tap_log), "--", *launch.argv]
    env = {k: v for k, v in launch.env.items() if k != "HOME"} | extra_env
    path.write_text(
        f"[agents.{name}]\n"
        f"command = [{', '.join(toml_string(a) for a in command)}]\n"
        f"env = {{ {', '.join(f'{k} = {toml_string(v)}' for k, v in env.items())} }}\n"
        f"writable = [{', '.join(toml_string(str(p)) for p in writable)}]\n"
        + ("shared_process = true\n" if shared else ""),
        encoding="utf-8",
    )
    return path


def tap_log_path(home: Path) -> Path:
    return home / "acp-tap.jsonl"


def tapped(home: Path) -> list[dict[str, Any]]:
    """Every message the tap saw, in order: {"from": "agent"|"host", "id", "method", ...}."""
    path = tap_log_path(home)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]


def agent_requests(entries: list[dict[str, Any]]) -> list[str]:
    """The requests the agent made of its client (us), as `method path-or-command`."""
    out = []
    for e in entries:
        if e["from"] == "agent" and "method" in e and "id" in e:
            params = e.get("params") or {}
            what = params.get("path") or params.get("command") or ""
            out.append(f"{e['method']} {what}".strip())
    return out


def permission_answers(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """For each session/request_permission the agent made: the kind of the agent's own
    option the sidecar's answer selected ("cancelled" when it selected none)."""
    asked = {
        e["id"]: {o["optionId"]: o["kind"] for o in (e.get("params") or {}).get("options", [])}
        for e in entries
        if e["from"] == "agent" and e.get("method") == "session/request_permission"
    }
    out = []
    for e in entries:
        if e["from"] == "host" and "method" not in e and e.get("id") in asked:
            outcome = (e.get("result") or {}).get("outcome") or {}
            option = outcome.get("optionId")
            kind = asked[e["id"]].get(option, "unknown") if option else "cancelled"
            out.append((str(option), kind))
    return out


def host_requests(entries: list[dict[str, Any]]) -> list[str]:
    """The requests the sidecar made of the agent (initialize, session/new, ...)."""
    return [e["method"] for e in entries if e["from"] == "host" and "method" in e and "id" in e]


# -- the tap (runs inside the agent's sandbox) -----------------------------------------------


def brief(value: Any) -> Any:
    """value with every string cut to SHOWN characters (the log stays readable)."""
    if isinstance(value, str):
        return value[:SHOWN]
    if isinstance(value, dict):
        return {k: brief(v) for k, v in value.items()}
    if isinstance(value, list):
        return [brief(v) for v in value[:20]]
    return value


def _entry(direction: str, line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    entry: dict[str, Any] = {"from": direction}
    for key in ("id", "method", "error"):
        if key in message:
            entry[key] = message[key]
    params = message.get("params")
    if message.get("method") == "session/update" and isinstance(params, dict):
        entry["params"] = {"sessionUpdate": (params.get("update") or {}).get("sessionUpdate")}
    elif params is not None:
        entry["params"] = brief(params)
    if "result" in message:
        entry["result"] = brief(message["result"])
    return entry


def _pump(src: IO[bytes], dst: IO[bytes], direction: str, log: IO[str], lock: Any) -> None:
    try:
        for line in iter(src.readline, b""):
            entry = _entry(direction, line)
            if entry is not None:
                with lock:
                    log.write(json.dumps(entry) + "\n")
            dst.write(line)
            dst.flush()
    except OSError:
        pass  # the other side is gone: the relay ends with it
    finally:
        try:
            dst.close()
        except OSError:
            pass  # already broken: nothing left to flush


def tap(log_path: Path, argv: list[str]) -> int:
    """Run argv with its stdin and stdout relayed through us, each message logged."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with log_path.open("a", encoding="utf-8", buffering=1) as log:
        inbound = threading.Thread(
            target=_pump, args=(sys.stdin.buffer, child.stdin, "host", log, lock), daemon=True
        )
        outbound = threading.Thread(
            target=_pump, args=(child.stdout, sys.stdout.buffer, "agent", log, lock)
        )
        inbound.start()
        outbound.start()
        code = child.wait()
        outbound.join()
    return code


if __name__ == "__main__":
    if len(sys.argv) < 5 or sys.argv[1] != "tap" or sys.argv[3] != "--":
        sys.exit("usage: through_sidecar.py tap LOG -- ARGV...")
    sys.exit(tap(Path(sys.argv[2]), sys.argv[4:]))
