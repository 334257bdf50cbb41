"""What the start-up thread loads ahead (sidecar/acp/preload.py): ACP's schema, lean
(`_lean_models`: the models still validate and serialize, only the ones used are built,
and pydantic's own defaults are back for every model defined afterwards; in a fresh
interpreter, since an import happens once per process), and one load however many
threads ask at once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sidecar.preload import Preload

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json
import pydantic
import sidecar.acp.preload
with sidecar.acp.preload._lean_models():
    import acp.schema
from pydantic._internal import _config
from acp.schema import AvailableCommandsUpdate, NewSessionRequest, ReadTextFileRequest
server = {"name": "git", "command": "mcp-server-git", "args": [], "env": []}
request = NewSessionRequest.model_validate({"cwd": "/w", "mcpServers": [server]})
try:
    NewSessionRequest.model_validate({"cwd": 3, "mcpServers": []})
    refused = None
except pydantic.ValidationError as exc:
    refused = exc.errors()[0]["loc"]
update = AvailableCommandsUpdate.model_validate(
    {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "a", "description": "b"}]}
)
class Later(pydantic.BaseModel):
    x: int
    '''The x.'''
print(json.dumps({
    "command": request.mcp_servers[0].command,
    "refused": list(refused or []),
    "dumped": update.model_dump(by_alias=True, exclude_none=True),
    "used_built": NewSessionRequest.__pydantic_complete__,
    "unused_built": ReadTextFileRequest.__pydantic_complete__,
    "defer_default": _config.config_defaults["defer_build"],
    "later_built": Later.__pydantic_complete__,
    "description": NewSessionRequest.model_fields["cwd"].description,
}))
"""


def test_acp_models_loaded_lean_validate_build_on_use_and_the_defaults_come_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["command"] == "mcp-server-git"
    assert seen["refused"] == ["cwd"]
    assert seen["dumped"] == {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [{"name": "a", "description": "b"}],
    }
    assert seen["used_built"] is True and seen["unused_built"] is False, "built on first use"
    assert seen["description"] is None, "no field docstrings read at import"
    assert seen["defer_default"] is False and seen["later_built"] is True, "defaults restored"


def test_a_preload_runs_once_and_every_caller_waits_for_it() -> None:
    """The loop asking while the start-up thread is still importing waits for that import
    instead of starting a second one (two threads importing one package at once see each
    other's half-made modules)."""
    runs: list[str] = []
    started, finish = threading.Event(), threading.Event()

    def load() -> None:
        runs.append(threading.current_thread().name)
        started.set()
        finish.wait(10)

    preload = Preload(load)
    loader = threading.Thread(target=preload.ensure, name="loader")
    loader.start()
    assert started.wait(10)
    returned: list[float] = []
    waiter = threading.Thread(target=lambda: (preload.ensure(), returned.append(time.monotonic())))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not returned, "a caller during the load waits for it"
    finish.set()
    loader.join(10)
    waiter.join(10)
    assert runs == ["loader"] and returned and preload.done
    preload.ensure()
    assert runs == ["loader"], "loaded once"


def test_a_failed_preload_is_tried_again_by_the_next_caller() -> None:
    attempts: list[int] = []

    def load() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise ImportError("first try fails")

    preload = Preload(load)
    with pytest.raises(ImportError, match="first try fails"):
        preload.ensure()  # raised to its caller
    assert not preload.done
    preload.ensure()
    assert preload.done and len(attempts) == 2
