"""The window page's unit tests (`tests/ui/*.test.js`, `node --test`), run by pytest, and
the page's files: each one index.html loads is in git and in the package.

The page's state and its ordering rules live in `desktop/ui/store.js`, which has no DOM
and no bridge, so node runs its reducers directly; this wrapper makes them part of
`make test` and CI. Node.js is required like it is for tests/test_acp_ts_sdk.py: a
missing `node` fails here, it is never a skip.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UI_TESTS = REPO / "tests" / "ui"
UI = REPO / "desktop" / "ui"
NODE_MAJOR_MIN = 20  # `node --test` with a directory argument
RUN_TIMEOUT = 60


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("tests/ui needs Node.js >= 20 on PATH (node: missing)", pytrace=False)
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < NODE_MAJOR_MIN:
        pytest.fail(f"tests/ui needs Node.js >= {NODE_MAJOR_MIN}, found {version or '?'}")
    return node


def test_page_store_unit_tests_pass() -> None:
    files = sorted(UI_TESTS.glob("*.test.js"))
    assert files, f"no *.test.js in {UI_TESTS}"
    done = subprocess.run(
        [_node(), "--test", *map(str, files)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    failed = re.search(r"^# fail (\d+)", done.stdout, re.MULTILINE)
    passed = re.search(r"^# pass (\d+)", done.stdout, re.MULTILINE)
    assert done.returncode == 0 and failed and failed.group(1) == "0", (
        f"node --test tests/ui failed (exit {done.returncode}):\n"
        f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    )
    assert passed and int(passed.group(1)) > 0, f"no test ran:\n{done.stdout[-3000:]}"


def _page_files() -> list[str]:
    """What index.html loads: its scripts and stylesheets, relative to desktop/ui."""
    html = (UI / "index.html").read_text()
    names = re.findall(r'<script src="([^"]+)"', html) + re.findall(
        r'<link [^>]*href="([^"]+)"', html
    )
    return ["index.html", *names]


def test_every_file_the_page_loads_is_tracked_and_packaged() -> None:
    files = _page_files()
    assert "store.js" in files and "app.js" in files, files
    tracked = subprocess.run(
        ["git", "ls-files", "desktop/ui"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    missing = [f for f in files if f"desktop/ui/{f}" not in tracked]
    assert not missing, f"loaded by desktop/ui/index.html but not in git: {missing}"
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    globs = package_data.get("desktop", [])
    unpackaged = [f for f in files if not any(fnmatch.fnmatch(f"ui/{f}", g) for g in globs)]
    assert not unpackaged, (
        f"not in [tool.setuptools.package-data] desktop (a `pip install .` would lack them): "
        f"{unpackaged}"
    )
