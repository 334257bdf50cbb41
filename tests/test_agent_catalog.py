"""The catalog of agents a session can run: definitions, env templates, presets, the user's
agents.toml and the command line's --agent, and whether each agent is installed."""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sidecar.agent.external.catalog import AgentCatalog, AgentInfo, load_config
from sidecar.agent.external.definitions import (
    BUILTIN,
    AgentConfigError,
    AgentDefinition,
    base_environment,
    expand_env,
    find_command,
    parse_cli_agent,
    writable_paths,
)
from sidecar.agent.external.presets import PRESETS

SECRET = "sk-SECRET-value-4242"  # must never appear in an error message


def executable(directory: Path, name: str) -> Path:
    """A real program on a PATH of our own."""
    directory.mkdir(parents=True, exist_ok=True)
    prog = directory / name
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return prog


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(text)
    return path


# --- --agent NAME=COMMAND ---------------------------------------------------------------


def test_cli_agent_splits_like_a_shell_and_takes_leading_assignments_as_env() -> None:
    defn = parse_cli_agent("x=FOO=1 BAR='${KEY:-a b}' my-agent --acp 'two words' FOO=not-env")
    assert defn.name == "x"
    assert defn.command == ("my-agent", "--acp", "two words", "FOO=not-env")
    assert dict(defn.env) == {"FOO": "1", "BAR": "${KEY:-a b}"}
    assert defn.source == "command line"
    assert expand_env(defn, {"KEY": SECRET}) == {"FOO": "1", "BAR": SECRET}


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("my-agent --acp", "'my-agent --acp'"),  # no "="
        ("Bad=agent", "'Bad'"),
        ("-x=agent", "'-x'"),
        ("=agent", "''"),
        ("a" * 41 + "=agent", "'" + "a" * 41 + "'"),
        ("builtin=agent", "'builtin'"),
        ("x=", "'x='"),
        ("x=   ", "'x=   '"),
        ("x=FOO=1", "'x=FOO=1'"),  # env entries, but no command
        ("x=agent 'unbalanced", '"agent \'unbalanced"'),
        ("x=./relative/agent", "command"),
        ("x=FOO=${ agent", "env.FOO"),
    ],
)
def test_cli_agent_errors_quote_the_offending_text(text: str, quoted: str) -> None:
    with pytest.raises(AgentConfigError) as err:
        parse_cli_agent(text)
    assert quoted in str(err.value)


def test_builtin_is_reserved_and_names_follow_the_rule() -> None:
    with pytest.raises(AgentConfigError, match="reserved"):
        parse_cli_agent("builtin=agent")
    with pytest.raises(AgentConfigError, match="reserved"):
        AgentDefinition(name=BUILTIN, command=("agent",))
    assert parse_cli_agent("a0_-" + "z" * 36 + "=agent").name == "a0_-" + "z" * 36


names = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,39}", fullmatch=True).filter(lambda n: n != BUILTIN)
var_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
words = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# A program: not empty, not a relative path, not taken for a leading VAR=VALUE env entry.
programs = words.filter(
    lambda w: bool(w) and ("/" not in w or w.startswith("/")) and not ASSIGNMENT.match(w)
)


@given(
    name=names,
    env=st.dictionaries(
        var_names,
        st.text(st.characters(codec="utf-8", exclude_characters="$\x00")),
        max_size=3,
    ),
    argv=st.tuples(programs, st.lists(words, max_size=4)).map(lambda t: [t[0], *t[1]]),
)
def test_cli_agent_round_trips_through_shlex_join(
    name: str, env: dict[str, str], argv: list[str]
) -> None:
    text = f"{name}=" + shlex.join([*(f"{k}={v}" for k, v in env.items()), *argv])
    defn = parse_cli_agent(text)
    assert (defn.name, defn.command, dict(defn.env)) == (name, tuple(argv), env)


# --- env templates ----------------------------------------------------------------------

SET = {"A": "alpha", "B_2": "${A} $$ not expanded again", "KEY": SECRET}
EMPTY = {"E": ""}
ENVIRON = {**SET, **EMPTY, "OTHER": "other"}
plain = st.text(st.characters(codec="utf-8", exclude_characters="$"))


@st.composite
def template(draw: st.DrawFn) -> tuple[str, str]:
    """A template built from pieces, and what it expands to against ENVIRON."""
    text, expected = [], []
    for kind in draw(st.lists(st.sampled_from(["lit", "$$", "$c", "req", "opt"]), max_size=8)):
        if kind == "lit":
            piece = draw(plain)
            text.append(piece)
            expected.append(piece)
        elif kind == "$$":
            text.append("$$")
            expected.append("$")
        elif kind == "$c":  # a "$" before anything but "$" or "{" is literal
            c = draw(st.sampled_from(["x", " ", "A", "}", ":"]))
            text.append("$" + c)
            expected.append("$" + c)
        elif kind == "req":
            var = draw(st.sampled_from(sorted(SET)))
            text.append("${" + var + "}")
            expected.append(SET[var])
        else:
            var = draw(st.sampled_from(["A", "E", "UNSET", "KEY"]))
            default = draw(st.text(st.characters(codec="utf-8", exclude_characters="}")))
            text.append("${" + var + ":-" + default + "}")
            expected.append(ENVIRON.get(var) or default)
    return "".join(text), "".join(expected)


@given(template())
def test_templates_expand_references_and_keep_everything_else(case: tuple[str, str]) -> None:
    text, expected = case
    defn = AgentDefinition(name="t", command=("agent",), env={"OUT": text}, source="config")
    assert expand_env(defn, ENVIRON) == {"OUT": expected}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$", "$"),
        ("a$", "a$"),
        ("$HOME", "$HOME"),
        ("$${A}", "${A}"),
        ("$$$${A}", "$${A}"),
        ("$$${A}", "$alpha"),
        ("${A:-}", "alpha"),
        ("${UNSET:-}", ""),
        ("${E:-fallback}", "fallback"),
        ("${UNSET:-$$}", "$$"),  # a default is literal up to the first "}"
        ("{}", "{}"),
    ],
)
def test_template_edge_cases(text: str, expected: str) -> None:
    defn = AgentDefinition(name="t", command=("agent",), env={"OUT": text})
    assert expand_env(defn, ENVIRON)["OUT"] == expected


def test_unset_required_variable_names_agent_variable_and_entry_but_no_value() -> None:
    claude = AgentDefinition(
        name="claude",
        command=("claude-agent-acp",),
        env={"ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}", "OK": "${KEY}"},
    )
    with pytest.raises(AgentConfigError) as err:
        expand_env(claude, {"KEY": SECRET})
    assert str(err.value) == (
        "agent 'claude': ANTHROPIC_API_KEY is not set "
        "(its env entry ANTHROPIC_API_KEY=${ANTHROPIC_API_KEY} needs it)"
    )
    assert SECRET not in str(err.value)


def test_empty_required_variable_and_literal_text_of_the_entry_stay_out_of_the_message() -> None:
    # A key written straight into the template is config, not environment, but still a key.
    defn = AgentDefinition(
        name="x", command=("agent",), env={"AUTH": f"Bearer {SECRET} ${{TOKEN}} ${{U:-{SECRET}}}"}
    )
    with pytest.raises(AgentConfigError) as err:
        expand_env(defn, {"TOKEN": "", "U": SECRET})
    message = str(err.value)
    assert "agent 'x'" in message and "TOKEN is set but empty" in message
    assert "AUTH=…${TOKEN}…${U:-…}" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("template", "field"),
    [("${", "env.K"), ("a${1A}", "env.K"), ("${A-x}", "env.K"), ("${}", "env.K")],
)
def test_malformed_templates_are_refused_at_definition_without_the_text(
    template: str, field: str
) -> None:
    with pytest.raises(AgentConfigError) as err:
        AgentDefinition(name="m", command=("agent",), env={"K": SECRET + template})
    assert "agent 'm'" in str(err.value) and field in str(err.value)
    assert SECRET not in str(err.value)


def test_pass_env_passes_only_what_is_set_and_env_entries_win() -> None:
    defn = AgentDefinition(
        name="p",
        command=("agent",),
        pass_env=("KEY", "MISSING", "E", "OVERRIDDEN"),
        env={"OVERRIDDEN": "mine", "MODE": "fast"},
    )
    environ = {**ENVIRON, "OVERRIDDEN": "theirs", "OPENAI_API_KEY": "not for this agent"}
    assert expand_env(defn, environ) == {
        "KEY": SECRET,
        "E": "",
        "OVERRIDDEN": "mine",
        "MODE": "fast",
    }


def test_base_environment_keeps_the_basics_and_no_secrets() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "USER": "u",
        "LOGNAME": "u",
        "SHELL": "/bin/sh",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "LC_CTYPE": "C",
        "TERM": "xterm",
        "TZ": "UTC",
        "TMPDIR": "/tmp",
        "XDG_CONFIG_HOME": "/home/u/.config",
        "ANTHROPIC_API_KEY": SECRET,
        "OPENAI_API_KEY": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "PYTHONPATH": "/x",
        "LCX": "no",
        "path": "lowercase is another variable",
    }
    kept = base_environment(environ)
    assert set(kept) == {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE",
        "TERM", "TZ", "TMPDIR", "XDG_CONFIG_HOME",
    }  # fmt: skip
    assert all(kept[k] == environ[k] for k in kept)


# --- writable paths and programs --------------------------------------------------------


def test_writable_paths_expand_home_and_normalise() -> None:
    defn = AgentDefinition(
        name="w", command=("agent",), writable=("~", "~/.claude", "~/a/../.b.json", "/var//x/")
    )
    assert writable_paths(defn, "/home/u") == (
        "/home/u",
        "/home/u/.claude",
        "/home/u/.b.json",
        "/var/x",
    )


@pytest.mark.parametrize("entry", ["rel/dir", ".claude", "~user/x", "", "./x"])
def test_relative_writable_entries_are_refused_at_parse_time(entry: str) -> None:
    with pytest.raises(AgentConfigError) as err:
        AgentDefinition(name="w", command=("agent",), writable=("/ok", entry))
    assert "agent 'w'" in str(err.value) and "writable.1" in str(err.value)


def test_find_command_looks_names_up_on_the_given_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    prog = executable(bin_dir, "my-agent")
    (bin_dir / "not-executable").write_text("#!/bin/sh\n")
    other = str(tmp_path / "empty")
    named = AgentDefinition(name="a", command=("my-agent", "--acp"))
    assert find_command(named, str(bin_dir)) == str(prog)
    assert find_command(named, os.pathsep.join([other, str(bin_dir)])) == str(prog)
    assert find_command(named, other) is None
    assert find_command(named, "") is None
    plain_file = AgentDefinition(name="a", command=("not-executable",))
    assert find_command(plain_file, str(bin_dir)) is None


def test_find_command_checks_an_absolute_program_itself(tmp_path: Path) -> None:
    prog = executable(tmp_path / "bin", "abs-agent")
    assert find_command(AgentDefinition(name="a", command=(str(prog),)), "") == str(prog)
    prog.chmod(0o644)
    assert find_command(AgentDefinition(name="a", command=(str(prog),)), "") is None
    gone = AgentDefinition(name="a", command=(str(tmp_path / "gone"),))
    assert find_command(gone, str(tmp_path / "bin")) is None
    folder = AgentDefinition(name="a", command=(str(tmp_path / "bin"),))
    assert find_command(folder, None) is None


@pytest.mark.parametrize("command", [(), ("",), ("bin/agent",), ("./agent", "--acp")])
def test_commands_must_be_a_program_name_or_an_absolute_path(command: tuple[str, ...]) -> None:
    with pytest.raises(AgentConfigError) as err:
        AgentDefinition(name="c", command=command)
    assert "agent 'c'" in str(err.value) and "command" in str(err.value)


def test_definitions_are_immutable_and_hashable() -> None:
    env = {"A": "1"}
    defn = AgentDefinition(name="i", command=["agent"], env=env)  # type: ignore[arg-type]
    env["A"] = "changed"
    assert defn.command == ("agent",) and defn.env == {"A": "1"}
    with pytest.raises(TypeError):
        defn.env["A"] = "2"  # type: ignore[index]
    assert hash(defn) == hash(AgentDefinition(name="i", command=("agent",), env={"A": "1"}))
    with pytest.raises(ValueError, match="source"):
        AgentDefinition(name="i", command=("agent",), source="elsewhere")


# --- presets ----------------------------------------------------------------------------


def test_presets_are_the_four_known_agents_each_with_an_install_command() -> None:
    assert set(PRESETS) == {"claude", "codex", "gemini", "qwen"}
    for name, defn in PRESETS.items():
        assert defn.name == name and defn.source == "preset"
        assert defn.install and defn.install.startswith("npm install -g @")
        assert defn.writable and all(w.startswith("~/") for w in defn.writable)
    assert PRESETS["claude"].command == ("claude-agent-acp",)
    # Declared, never guessed: only the agents tried with several sessions per process.
    assert {n for n, d in PRESETS.items() if d.shared_process} == {"claude", "codex"}
    assert parse_cli_agent("mine=my-agent").shared_process is False
    assert PRESETS["gemini"].command == ("gemini", "--acp")
    assert "ANTHROPIC_API_KEY" in PRESETS["claude"].pass_env
    assert "OPENAI_API_KEY" not in PRESETS["claude"].pass_env


def test_presets_are_not_available_with_an_empty_path() -> None:
    catalog = AgentCatalog.load(None, path="")
    rows = {info.name: info for info in catalog.infos()}
    assert rows[BUILTIN] == AgentInfo(BUILTIN, "", True, None, BUILTIN, None)
    for name in PRESETS:
        assert rows[name].available is False
        assert rows[name].install == PRESETS[name].install
        assert rows[name].source == "preset"


def test_a_preset_becomes_available_once_its_program_is_on_path(tmp_path: Path) -> None:
    executable(tmp_path, "gemini")
    catalog = AgentCatalog.load(None, path=str(tmp_path))
    assert catalog.info("gemini").available is True
    assert catalog.info("gemini").command == "gemini --acp"
    assert catalog.info("claude").available is False


# --- the catalog: presets < agents.toml < --agent ---------------------------------------

FULL = f"""
[agents.myagent]
command = ["my-agent", "--acp"]
env = {{ MY_KEY = "${{MY_KEY}}", MODE = "fast", LITERAL = "{SECRET}" }}
pass_env = ["OTHER_KEY"]
writable = ["~/.myagent"]
install = "pipx install my-agent"
isolated_home = true
shared_process = true

[agents.claude]
command = "claude-agent-acp --model 'big one'"
"""


def test_a_missing_config_file_leaves_the_presets(tmp_path: Path) -> None:
    catalog = AgentCatalog.load(tmp_path / "nowhere" / "agents.toml", path="")
    assert catalog.names() == [BUILTIN, "claude", "codex", "gemini", "qwen"]
    assert catalog.get("codex") is PRESETS["codex"]


def test_config_adds_agents_and_replaces_presets(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    executable(bin_dir, "my-agent")
    catalog = AgentCatalog.load(config(tmp_path, FULL), path=str(bin_dir))
    assert catalog.names() == [BUILTIN, "claude", "codex", "gemini", "myagent", "qwen"]
    mine = catalog.get("myagent")
    assert mine == AgentDefinition(
        name="myagent",
        command=("my-agent", "--acp"),
        env={"MY_KEY": "${MY_KEY}", "MODE": "fast", "LITERAL": SECRET},
        pass_env=("OTHER_KEY",),
        writable=("~/.myagent",),
        install="pipx install my-agent",
        isolated_home=True,
        shared_process=True,
        source="config",
    )
    claude = catalog.get("claude")
    assert claude.command == ("claude-agent-acp", "--model", "big one")
    assert claude.source == "config" and claude.pass_env == () and claude.install is None
    assert claude.shared_process is False  # a table replacing a preset replaces it whole
    assert catalog.info("myagent") == AgentInfo(
        "myagent", "my-agent --acp", True, "pipx install my-agent", "config", None
    )
    assert catalog.info("claude").command == "claude-agent-acp --model 'big one'"


def test_the_command_line_wins_over_config_and_presets(tmp_path: Path) -> None:
    cli = [parse_cli_agent("myagent=other --flag"), parse_cli_agent("codex=FOO=1 codex-acp -v")]
    catalog = AgentCatalog.load(config(tmp_path, FULL), cli)
    assert catalog.get("myagent").command == ("other", "--flag")
    assert catalog.get("myagent").source == "command line"
    assert catalog.get("codex").env == {"FOO": "1"}
    assert catalog.info("codex").source == "command line"
    assert catalog.get("claude").source == "config"


def test_the_same_agent_twice_on_the_command_line_is_an_error() -> None:
    with pytest.raises(AgentConfigError, match="'x' is given twice"):
        AgentCatalog.load(None, [parse_cli_agent("x=a"), parse_cli_agent("x=b")])


def test_names_get_knows_builtin_first(tmp_path: Path) -> None:
    catalog = AgentCatalog({"zed": parse_cli_agent("zed=z"), "abc": parse_cli_agent("abc=a")})
    assert catalog.names() == [BUILTIN, "abc", "zed"]
    assert catalog.knows(BUILTIN) and catalog.knows("abc") and not catalog.knows("claude")
    with pytest.raises(KeyError):
        catalog.get(BUILTIN)
    with pytest.raises(KeyError):
        catalog.get("claude")
    with pytest.raises(KeyError):
        catalog.info("claude")
    with pytest.raises(ValueError, match="filed under"):
        AgentCatalog({"abc": parse_cli_agent("zed=z")})


def test_remember_keeps_a_copy_of_what_an_agent_advertised() -> None:
    catalog = AgentCatalog.load(None, path="")
    advertised: dict[str, Any] = {"loadSession": True, "promptCapabilities": {"image": False}}
    catalog.remember("claude", advertised)
    catalog.remember(BUILTIN, {"loadSession": True})
    advertised["promptCapabilities"]["image"] = True
    assert catalog.info("claude").capabilities == {
        "loadSession": True,
        "promptCapabilities": {"image": False},
    }
    assert catalog.info(BUILTIN).capabilities == {"loadSession": True}
    assert catalog.info("codex").capabilities is None
    with pytest.raises(KeyError):
        catalog.remember("unknown", {})
    assert [i.name for i in catalog.infos()] == catalog.names()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[agents.foo]\ncommand = []", "agents.foo.command: must be a non-empty list of strings"),
        ("[agents.foo]\ncommand = 5", "agents.foo.command: must be a non-empty list of strings"),
        ('[agents.foo]\ncommand = ["a", 3]', "agents.foo.command: must be"),
        ('[agents.foo]\ncommand = [""]', "agents.foo.command: must be"),
        ("[agents.foo]\ncommand = \"a 'b\"", "agents.foo.command: cannot be split"),
        ('[agents.foo]\ncommand = "rel/agent"', "agents.foo.command: the program must be"),
        ('[agents.foo]\ncomand = ["a"]', "agents.foo.comand: unknown key"),
        ('[agents.foo]\ncomand = ["a"]', "agents.foo.command: is required"),
        ('[agent.foo]\ncommand = ["a"]', "agent: unknown key"),
        ('[agents.Foo]\ncommand = ["a"]', "agents.Foo: must be 1 to 40"),
        ('[agents.builtin]\ncommand = ["a"]', "agents.builtin: the name is reserved"),
        (f'[agents.foo]\ncommand = ["a"]\nenv = {{ K = 1, L = "{SECRET}" }}', "agents.foo.env.K: must be a string"),
        (f'[agents.foo]\ncommand = ["a"]\nenv = {{ K = "{SECRET}${{" }}', "agents.foo.env.K: the '${' at character"),
        ('[agents.foo]\ncommand = ["a"]\nenv = { "NOT A NAME" = "x" }', "agents.foo.env: 'NOT A NAME' is not a variable name"),
        ('[agents.foo]\ncommand = ["a"]\nenv = "K=1"', "agents.foo.env: must be a table of strings"),
        ('[agents.foo]\ncommand = ["a"]\npass_env = ["OK", "no-dash"]', "agents.foo.pass_env.1: must be a variable name"),
        ('[agents.foo]\ncommand = ["a"]\npass_env = [1]', "agents.foo.pass_env.0: must be a variable name"),
        ('[agents.foo]\ncommand = ["a"]\nwritable = ["rel"]', "agents.foo.writable.0: must be an absolute path"),
        ('[agents.foo]\ncommand = ["a"]\nwritable = "~/.x"', "agents.foo.writable: must be a list of paths"),
        ('[agents.foo]\ncommand = ["a"]\ninstall = 3', "agents.foo.install: must be a string"),
        ('[agents.foo]\ncommand = ["a"]\ninstall = " "', "agents.foo.install: must be a non-empty string"),
        ('[agents.foo]\ncommand = ["a"]\nisolated_home = 1', "agents.foo.isolated_home: must be true or false"),
        ('[agents.foo]\ncommand = ["a"]\nisolated_home = "yes"', "agents.foo.isolated_home: must be true or false"),
        ('[agents.foo]\ncommand = ["a"]\nshared_process = "yes"', "agents.foo.shared_process: must be true or false"),
        ("agents = 3", "agents: must be a table"),
        (f'agents = {{ foo = "{SECRET}" }}', "agents.foo: must be a table"),
        (f'[agents.foo\ncommand = "{SECRET}"', "is not valid TOML"),
    ],
)  # fmt: skip
def test_config_errors_name_the_file_and_field_and_no_value(
    tmp_path: Path, text: str, where: str
) -> None:
    path = config(tmp_path, text)
    with pytest.raises(AgentConfigError) as err:
        AgentCatalog.load(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert where in message
    assert SECRET not in message


def test_a_config_file_that_cannot_be_read_or_decoded_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "agents.toml"
    folder.mkdir()
    with pytest.raises(AgentConfigError, match="cannot be read") as err:
        load_config(folder)
    assert str(folder) in str(err.value)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'[agents.foo]\ncommand = ["\xff"]\n')
    with pytest.raises(AgentConfigError, match="binary.toml: is not UTF-8"):
        load_config(binary)


def test_an_empty_config_file_is_no_agents(tmp_path: Path) -> None:
    assert load_config(config(tmp_path, "# nothing yet\n")) == {}
    assert load_config(config(tmp_path, "[agents]\n")) == {}
