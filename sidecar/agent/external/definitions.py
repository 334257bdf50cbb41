"""What an external ACP agent is (argv, environment, writable state) and the pure steps the
engine takes before spawning one: expand its environment, find its program, name its paths.

Errors name the agent, the field and the variable, never a variable's value: the messages
reach logs and clients, and the values are API keys.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sidecar.domain.agent_options import BUILTIN as _BUILTIN

# Reserved name: our own agent loop (it has no AgentDefinition).
BUILTIN = _BUILTIN
SOURCES = ("preset", "config", "command line")
NAME_RULE = "1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or digit"

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BASE_VARS = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR"})
_BASE_PREFIXES = ("LC_", "XDG_")


class AgentConfigError(ValueError):
    """A definition or its environment is wrong; the message names what (agent, field,
    variable) and never contains an env VALUE. `agent`, `field` and `problem` let the config
    loader restate it as a location in its file."""

    def __init__(
        self, message: str, *, agent: str = "", field: str = "", problem: str = ""
    ) -> None:
        super().__init__(message)
        self.agent = agent
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class _Ref:
    name: str
    default: str | None  # None: required


_Segment = str | _Ref


def parse_template(text: str) -> list[_Segment]:
    """Split an env template into literal text and ${VAR} / ${VAR:-default} references
    ("$$" is a literal "$", a "$" before anything else is literal, a default is literal text
    up to the first "}"). ValueError names the position only, never the text."""
    out: list[_Segment] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            literal.append("$")
            i += 2
        elif text.startswith("${", i):
            end = text.find("}", i + 2)
            if end < 0:
                raise ValueError(f"the '${{' at character {i + 1} has no closing '}}'")
            name, sep, default = text[i + 2 : end].partition(":-")
            if not _VAR.fullmatch(name):
                raise ValueError(
                    f"the '${{' at character {i + 1} does not start ${{NAME}} or ${{NAME:-default}}"
                )
            if literal:
                out.append("".join(literal))
                literal = []
            out.append(_Ref(name, default if sep else None))
            i = end + 1
        else:
            literal.append(text[i])
            i += 1
    if literal:
        out.append("".join(literal))
    return out


def _shown(segments: list[_Segment]) -> str:
    """A template as an error may show it: references kept, literal text (which could be a
    key written into the config) replaced by '…'."""
    return "".join(
        "…" if isinstance(s, str) else f"${{{s.name}{'' if s.default is None else ':-…'}}}"
        for s in segments
    )


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """One external agent. Construction validates every field, so presets, the config file
    and the command line are held to the same rules."""

    name: str  # [a-z0-9][a-z0-9_-]{0,39}; not "builtin"
    command: tuple[str, ...]  # argv; command[0] a program name (PATH lookup) or an absolute path
    # templates; left out of the hash (a mapping has none), still compared
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    pass_env: tuple[str, ...] = ()  # passed through from the sidecar's environment when set
    writable: tuple[str, ...] = ()  # besides the cwd: absolute, "~" or "~/..." (user's home)
    install: str | None = None  # the command that installs it, shown while not installed
    isolated_home: bool = False  # each session its own HOME (under the data dir)
    # One process may serve several sessions (ACP allows it; declared, never guessed):
    # sessions of this agent whose sandbox is identical share one process and connection.
    shared_process: bool = False
    source: str = "preset"  # "preset" | "config" | "command line"

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "pass_env", tuple(self.pass_env))
        object.__setattr__(self, "writable", tuple(self.writable))
        check_name(self.name)
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {self.source!r}")
        for fld, problem in _problems(self):
            raise AgentConfigError(
                f"agent {self.name!r} ({self.source}): {fld}: {problem}",
                agent=self.name,
                field=fld,
                problem=problem,
            )


def check_name(name: str) -> None:
    """Refuse a name that is not an agent's (shown in URLs and logs, so kept plain)."""
    if name == BUILTIN:
        raise AgentConfigError(
            f"agent name {name!r} is reserved for our own agent loop",
            agent=name,
            problem="the name is reserved for our own agent loop",
        )
    if not _NAME.fullmatch(name):
        raise AgentConfigError(
            f"agent name {name!r}: must be {NAME_RULE}", agent=name, problem=f"must be {NAME_RULE}"
        )


def _problems(d: AgentDefinition) -> list[tuple[str, str]]:
    """Each (field, problem) of a definition, in field order; messages carry no values."""
    found: list[tuple[str, str]] = []
    if not d.command or not all(isinstance(a, str) for a in d.command) or not d.command[0]:
        found.append(("command", "must be a non-empty list of strings"))
    elif "/" in d.command[0] and not os.path.isabs(d.command[0]):
        found.append(
            ("command", "the program must be a name looked up on PATH or an absolute path")
        )
    for key, template in d.env.items():
        if not isinstance(key, str) or not _VAR.fullmatch(key):
            found.append(("env", f"{key!r} is not a variable name"))
        elif not isinstance(template, str):
            found.append((f"env.{key}", "must be a string"))
        else:
            try:
                parse_template(template)
            except ValueError as e:
                found.append((f"env.{key}", str(e)))
    for i, var in enumerate(d.pass_env):
        if not isinstance(var, str) or not _VAR.fullmatch(var):
            found.append((f"pass_env.{i}", "must be a variable name"))
    for i, entry in enumerate(d.writable):
        if not isinstance(entry, str) or not (
            entry == "~" or entry.startswith("~/") or os.path.isabs(entry)
        ):
            found.append((f"writable.{i}", "must be an absolute path, '~' or start with '~/'"))
    if d.install is not None and (not isinstance(d.install, str) or not d.install.strip()):
        found.append(("install", "must be a non-empty string"))
    if not isinstance(d.isolated_home, bool):
        found.append(("isolated_home", "must be true or false"))
    if not isinstance(d.shared_process, bool):
        found.append(("shared_process", "must be true or false"))
    return found


def parse_cli_agent(text: str) -> AgentDefinition:
    """`--agent NAME=COMMAND`: COMMAND split as a shell would; its leading VAR=VALUE words
    are env entries (templates, as in the config file's `env`)."""
    name, sep, rest = text.partition("=")
    if not sep:
        raise AgentConfigError(f"--agent {text!r}: expected NAME=COMMAND", problem="no '='")
    if name == BUILTIN or not _NAME.fullmatch(name):
        what = "is reserved for our own agent loop" if name == BUILTIN else f"must be {NAME_RULE}"
        raise AgentConfigError(f"--agent {text!r}: the name {name!r} {what}", agent=name)
    try:
        words = shlex.split(rest)
    except ValueError as e:  # "No closing quotation" / "No escaped character"
        raise AgentConfigError(
            f"--agent {text!r}: the command {rest!r} cannot be split ({e})", agent=name
        ) from e
    env: dict[str, str] = {}
    while words and _VAR.fullmatch(words[0].partition("=")[0]) and "=" in words[0]:
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if not words:
        raise AgentConfigError(f"--agent {text!r}: no command after {name}=", agent=name)
    return AgentDefinition(name=name, command=tuple(words), env=env, source="command line")


def expand_env(defn: AgentDefinition, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables the agent gets on top of base_environment(): its pass_env present in
    `environ`, then its env templates expanded against `environ` (an unset or empty required
    ${VAR} is an error; ${VAR:-default} takes the default when VAR is unset or empty)."""
    out = {var: environ[var] for var in defn.pass_env if var in environ}
    for key, template in defn.env.items():
        segments = parse_template(template)
        parts: list[str] = []
        for seg in segments:
            if isinstance(seg, str):
                parts.append(seg)
            elif environ.get(seg.name):
                parts.append(environ[seg.name])
            elif seg.default is not None:
                parts.append(seg.default)
            else:
                state = "is set but empty" if seg.name in environ else "is not set"
                raise AgentConfigError(
                    f"agent {defn.name!r}: {seg.name} {state} (its env entry "
                    f"{key}={_shown(segments)} needs it)",
                    agent=defn.name,
                    field=f"env.{key}",
                    problem=f"{seg.name} {state}",
                )
        out[key] = "".join(parts)
    return out


def base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What every agent inherits: the session basics (PATH, HOME, locale, terminal, temp and
    XDG dirs) and nothing else, so one provider's keys never reach another's agent."""
    return {k: v for k, v in environ.items() if k in _BASE_VARS or k.startswith(_BASE_PREFIXES)}


def writable_paths(defn: AgentDefinition, home: str) -> tuple[str, ...]:
    """The definition's writable entries as normalised absolute paths, "~" being `home`."""
    if not os.path.isabs(home):
        raise AgentConfigError(f"agent {defn.name!r}: the home directory must be absolute")
    out: list[str] = []
    for entry in defn.writable:
        if entry == "~" or entry.startswith("~/"):
            entry = home + entry[1:]
        out.append(os.path.normpath(entry))
    return tuple(out)


def find_command(defn: AgentDefinition, path: str | None) -> str | None:
    """The program the agent runs, or None when it is not installed: a name is looked up on
    `path` (None: the sidecar's PATH), an absolute path must exist and be executable."""
    program = defn.command[0]
    if os.path.isabs(program):
        ok = os.path.isfile(program) and os.access(program, os.X_OK)
        return program if ok else None
    return shutil.which(program, path=path)
