"""Write rules by directory, as documented: a `prefix` rule for a file tool that writes names
a directory and covers every path below it, normalized, never reaching out of the cwd;
unit tests of `sidecar/domain/rules.py`, then the real sidecar asking (or not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Sidecar

from desktop.client import RpcError
from protocol.errors import ErrorCode
from sidecar.agent.tools import files
from sidecar.domain.errors import InvalidInput
from sidecar.domain.rules import PATH_TOOLS, Decision, Match, Rule, decide, parse_rules


def allow_under(value: str, tool: str = "write_file") -> Rule:
    return Rule(Decision.ALLOW, tool, Match.PREFIX, value)


def test_the_path_tools_are_the_file_tools_that_write() -> None:
    assert PATH_TOOLS == files.WRITES


@pytest.mark.parametrize("value", ["src/", "src", "./src/", "src//", "src/lib/.."])
def test_a_directory_covers_every_path_below_it_and_nothing_else(value: str) -> None:
    for subject in ("src/a.py", "src/lib/b.py", "src", "./src/a.py"):
        assert allow_under(value).matches("write_file", subject), subject
        assert allow_under(value, "edit_file").matches("edit_file", subject), subject
    for subject in (
        "srcs/c.py",
        "src.py",
        "other.py",
        "lib/src/a.py",
        "../src/a.py",
        "/abs/src/a.py",
        "/src/a",
    ):
        assert not allow_under(value).matches("write_file", subject), subject


def test_the_cwd_itself_covers_relative_paths_only_and_absolute_ones_compare_absolute() -> None:
    assert allow_under("./").matches("write_file", "deep/down/x.txt")
    assert not allow_under("./").matches("write_file", "/etc/passwd")
    assert allow_under("/tmp/out/").matches("write_file", "/tmp/out/x.txt")
    assert not allow_under("/tmp/out/").matches("write_file", "tmp/out/x.txt")
    assert not allow_under("/tmp/out/").matches("write_file", "/tmp/outside.txt")


def test_a_directory_rule_is_for_its_tool_and_deny_still_wins() -> None:
    rules = [allow_under("src/"), Rule(Decision.DENY, "write_file", Match.PREFIX, "src/secret/")]
    assert decide(rules, "write_file", "src/a.py") is Decision.ALLOW
    assert decide(rules, "write_file", "src/secret/key.pem") is Decision.DENY
    assert decide(rules, "edit_file", "src/a.py") is None
    assert decide(rules, "bash", "src/a.py") is None
    # Commands keep their word prefixes.
    rule = Rule(Decision.ALLOW, "bash", Match.PREFIX, "git log")
    assert rule.matches("bash", "git log --oneline")
    assert not rule.matches("bash", "git logx")
    assert not rule.matches("bash", "git log/..")


@pytest.mark.parametrize("value", ["../", "..", "src/../../", "./.."])
def test_a_directory_rule_that_climbs_out_is_refused_naming_the_field(value: str) -> None:
    raw = [
        {"decision": "allow", "tool": "bash", "match": "prefix", "value": "../x"},
        {"decision": "allow", "tool": "write_file", "match": "prefix", "value": value},
    ]
    with pytest.raises(InvalidInput) as refused:
        parse_rules(raw)
    assert refused.value.field == "rules.1.value"
    assert "inside the cwd" in str(refused.value)


async def test_a_rule_for_src_writes_below_it_without_asking_and_still_asks_elsewhere(
    sidecar: Sidecar, workspace: Path
) -> None:
    sid = (await sidecar.new_session(workspace))["sessionId"]
    rule = {"decision": "allow", "tool": "write_file", "match": "prefix", "value": "src/"}
    await sidecar.call("_session/permissions/set", {"sessionId": sid, "rules": [rule]})

    await sidecar.prompt(sid, "/write src/a.py print(1)")
    await sidecar.prompt(sid, "/write src/lib/b.py print(2)")
    assert (workspace / "src" / "a.py").read_text() == "print(1)"
    assert (workspace / "src" / "lib" / "b.py").read_text() == "print(2)"
    assert sidecar.asked == [], "the rule covers every path below src/"

    await sidecar.prompt(sid, "/write other.py print(3)")
    await sidecar.prompt(sid, "/write srcs/c.py print(4)")
    asked = [params["toolCall"]["rawInput"]["path"] for params in sidecar.asked]
    assert asked == ["other.py", "srcs/c.py"]

    with pytest.raises(RpcError) as refused:
        bad = {**rule, "value": "src/../../"}
        await sidecar.call("_session/permissions/set", {"sessionId": sid, "rules": [bad]})
    assert refused.value.code == ErrorCode.INVALID_PARAMS
    assert refused.value.data["field"] == "rules.0.value"
