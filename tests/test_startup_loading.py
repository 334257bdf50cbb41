"""The heavy half's lean load of ACP's schema (sidecar/app.py `_lean_models`): the
models still validate and serialize, only the ones used are built, and pydantic's own
defaults are back for every model defined afterwards. In a fresh interpreter, since an
import happens once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json
import pydantic
import sidecar.app
with sidecar.app._lean_models():
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
