"""The docs tell the truth about the command lines and the tree.

Every option `python -m sidecar`, `python -m sidecar migrate` and `python -m desktop` accept
appears in the docs; every option an option table documents exists; every repository path
the docs name exists; every relative link resolves. The options are read from the
programs' own `--help` (a black box: what a user sees), not from the parser's code.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# A repository path as the docs write it: a top-level folder of ours, then a path.
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:protocol|sidecar|desktop|tests|bench|scripts|docs)/[\w./-]*)"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PROGRAMS = {
    "sidecar": [sys.executable, "-m", "sidecar"],
    "sidecar migrate": [sys.executable, "-m", "sidecar", "migrate"],
    "desktop": [sys.executable, "-m", "desktop"],
}


def _help_options(argv: list[str]) -> set[str]:
    done = subprocess.run(
        [*argv, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    return set(OPTION.findall(done.stdout)) - {"--help"}


def _docs_text() -> str:
    return "\n".join(path.read_text() for path in DOCS)


def _documented_options() -> set[str]:
    """The options in the first cell of an option table's rows (`| `--name` | ...`)."""
    found: set[str] = set()
    for path in DOCS:
        for line in path.read_text().splitlines():
            cells = line.split("|")
            if line.startswith("| `--") and len(cells) > 2:
                found |= set(OPTION.findall(cells[1]))
    return found


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_cli_option_is_documented(program: str) -> None:
    text = _docs_text()
    missing = sorted(
        option for option in _help_options(PROGRAMS[program]) if f"`{option}" not in text
    )
    assert not missing, f"options of `python -m {program}` the docs never name: {missing}"


def test_every_documented_option_exists() -> None:
    known = set().union(*(_help_options(argv) for argv in PROGRAMS.values()))
    unknown = sorted(_documented_options() - known)
    assert _documented_options(), "no option table found in the docs"
    assert not unknown, f"options the docs' tables describe that no program accepts: {unknown}"


def test_every_path_named_in_the_docs_exists() -> None:
    missing: list[str] = []
    for path in DOCS:
        in_code = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:  # layout trees and shell examples name generated or relative things
                continue
            for named in REPO_PATH.findall(LINK.sub("]", line)):  # links: the next test
                named = named.rstrip(".")
                if not (ROOT / named).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {named}")
    assert not missing, "paths the docs name that do not exist:\n" + "\n".join(missing)


def test_every_relative_link_resolves() -> None:
    broken: list[str] = []
    for path in DOCS:
        for target in LINK.findall(path.read_text()):
            if re.match(r"^(https?:|mailto:|#)", target):
                continue
            file = target.split("#", 1)[0]
            if file and not (path.parent / file).exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_readme_is_a_short_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md is {len(lines)} lines; move detail into docs/"
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in "\n".join(lines), f"README's map misses docs/{page.name}"
