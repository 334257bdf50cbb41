"""The agents a session can run: our own loop, the presets, the user's config file and the
command line's `--agent`, each later source replacing an earlier one of the same name; and
what each is now (installed? what did it advertise?), the rows of `_session/agents`."""

from __future__ import annotations

import copy
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sidecar.agent.external.definitions import (
    BUILTIN,
    AgentConfigError,
    AgentDefinition,
    check_name,
    find_command,
)
from sidecar.agent.external.presets import PRESETS


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """One row of `_session/agents`."""

    name: str
    command: str  # shlex.join of the argv ("" for builtin)
    available: bool
    install: str | None
    source: str  # "builtin" | "preset" | "config" | "command line"
    capabilities: Mapping[str, Any] | None  # advertised at its last initialize (None: never)


class _Entry(BaseModel):
    """One [agents.NAME] table. Strict and closed: a typo is an error, not a default."""

    model_config = ConfigDict(extra="forbid", strict=True)
    command: list[str] | str
    env: dict[str, str] = {}
    pass_env: list[str] = []
    writable: list[str] = []
    install: str | None = None
    isolated_home: bool = False
    shared_process: bool = False


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    agents: dict[str, _Entry] = {}


# What a wrong field must be; pydantic's own wording would name types ("list[str]").
_MUST = {
    "command": "must be a non-empty list of strings, or a string split as a shell would",
    "env": "must be a table of strings",
    "pass_env": "must be a list of variable names",
    "writable": "must be a list of paths",
    "install": "must be a string",
    "isolated_home": "must be true or false",
    "shared_process": "must be true or false",
    "agents": "must be a table of [agents.NAME] tables",
}
_MUST_EACH = {  # one element of a list or table field
    "env": "must be a string",
    "pass_env": "must be a variable name",
    "writable": "must be a path",
}


def _problem(err: Mapping[str, Any]) -> str:
    """ "LOC: PROBLEM" for one pydantic error, without its input (it may be a key)."""
    loc = [str(p) for p in err["loc"]]
    if len(loc) >= 3 and loc[0] == "agents" and loc[2] == "command":
        loc = loc[:3]  # the union's branches (list[str], str) are one field to the user
    if err["type"] == "extra_forbidden":
        return f"{'.'.join(loc)}: unknown key"
    if err["type"] == "missing":
        return f"{'.'.join(loc)}: is required"
    if len(loc) == 2 and loc[0] == "agents":
        return f"{'.'.join(loc)}: must be a table"
    fld = loc[2] if len(loc) >= 3 else loc[0]
    must = _MUST_EACH.get(fld) if len(loc) > 3 else None
    return f"{'.'.join(loc)}: {must or _MUST.get(fld, 'is not valid')}"


def _read(config_file: Path) -> dict[str, Any]:
    try:
        raw = config_file.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise AgentConfigError(f"{config_file}: cannot be read ({e.strerror})") from e
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise AgentConfigError(f"{config_file}: is not UTF-8 text") from e
    except tomllib.TOMLDecodeError as e:
        raise AgentConfigError(f"{config_file}: is not valid TOML ({e})") from e


def load_config(config_file: Path) -> dict[str, AgentDefinition]:
    """The definitions of a config file ({} when it does not exist); AgentConfigError names
    the file and the field ("agents.foo.command: ...") and never repeats a value."""
    data = _read(config_file)
    try:
        parsed = _File.model_validate(data)
    except ValidationError as e:
        problems = dict.fromkeys(_problem(err) for err in e.errors(include_input=False))
        raise AgentConfigError(f"{config_file}: {'; '.join(problems)}") from None
    out: dict[str, AgentDefinition] = {}
    for name, entry in parsed.agents.items():
        try:
            check_name(name)
            if isinstance(entry.command, str):
                try:
                    command = tuple(shlex.split(entry.command))
                except ValueError as e:
                    raise AgentConfigError(
                        "", agent=name, field="command", problem=f"cannot be split ({e})"
                    ) from e
            else:
                command = tuple(entry.command)
            out[name] = AgentDefinition(
                name=name,
                command=command,
                env=entry.env,
                pass_env=tuple(entry.pass_env),
                writable=tuple(entry.writable),
                install=entry.install,
                isolated_home=entry.isolated_home,
                shared_process=entry.shared_process,
                source="config",
            )
        except AgentConfigError as e:
            where = ".".join(p for p in ("agents", name, e.field) if p)
            raise AgentConfigError(
                f"{config_file}: {where}: {e.problem}", agent=name, field=e.field, problem=e.problem
            ) from None
    return out


class AgentCatalog:
    """The agents by name, plus what each advertised when it last started (in memory)."""

    def __init__(
        self, definitions: Mapping[str, AgentDefinition], *, path: str | None = None
    ) -> None:
        for key, defn in definitions.items():
            if key != defn.name:
                raise ValueError(f"definition {defn.name!r} is filed under {key!r}")
        self._defs = dict(definitions)
        self._path = path  # the PATH programs are looked up on (None: the sidecar's own)
        self._capabilities: dict[str, Mapping[str, Any]] = {}

    @classmethod
    def load(
        cls,
        config_file: Path | None,
        cli: Sequence[AgentDefinition] = (),
        *,
        path: str | None = None,
    ) -> AgentCatalog:
        """Presets, replaced by the config file's agents, replaced by the command line's."""
        defs = dict(PRESETS)
        if config_file is not None:
            defs.update(load_config(config_file))
        seen: set[str] = set()
        for defn in cli:
            if defn.name in seen:
                raise AgentConfigError(
                    f"--agent {defn.name}=...: the agent {defn.name!r} is given twice",
                    agent=defn.name,
                )
            seen.add(defn.name)
            defs[defn.name] = defn
        return cls(defs, path=path)

    def names(self) -> list[str]:
        return [BUILTIN, *sorted(self._defs)]

    def get(self, name: str) -> AgentDefinition:
        """KeyError for an unknown name and for "builtin" (it has no definition)."""
        return self._defs[name]

    def knows(self, name: str) -> bool:
        return name == BUILTIN or name in self._defs

    def remember(self, name: str, capabilities: Mapping[str, Any]) -> None:
        """Keep a copy of what the agent advertised, so a later change by the caller does not
        alter the catalog."""
        if not self.knows(name):
            raise KeyError(name)
        self._capabilities[name] = MappingProxyType(copy.deepcopy(dict(capabilities)))

    def info(self, name: str) -> AgentInfo:
        caps = self._capabilities.get(name)
        if name == BUILTIN:
            return AgentInfo(BUILTIN, "", True, None, BUILTIN, caps)
        defn = self._defs[name]
        return AgentInfo(
            name=name,
            command=shlex.join(defn.command),
            available=find_command(defn, self._path) is not None,
            install=defn.install,
            source=defn.source,
            capabilities=caps,
        )

    def infos(self) -> list[AgentInfo]:
        return [self.info(n) for n in self.names()]
