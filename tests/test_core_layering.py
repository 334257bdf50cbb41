"""`sidecar/core/` as a DAG and the runtime as its record's one writer, read from the source.

`lint-imports` checks the same DAG in `make lint`; this test names the cycle itself (with
the modules on it) and counts the imports written under `if TYPE_CHECKING:` too, which is
where an owner object used to be named by its parts.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "sidecar" / "core"


def _core_imports(path: Path) -> set[str]:
    """The sibling modules of sidecar/core that `path` imports, however guarded."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "sidecar.core":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("sidecar.core."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sidecar.core."):
                    found.add(alias.name.split(".")[2])
    return found


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in CORE.glob("*.py") if p.stem != "__init__"}
    return {name: _core_imports(path) & modules.keys() - {name} for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as the modules on it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for imported in sorted(graph[name]):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state:
                found = visit(imported)
                if found is not None:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found is not None:
                return found
    return None


def test_the_core_has_no_import_cycle_type_checking_imports_included() -> None:
    graph = _graph()
    assert {"runtime", "turns", "approvals", "manager"} <= graph.keys()
    assert "turns" in graph["runtime"]  # the walk sees the imports it must
    cycle = _cycle(graph)
    assert cycle is None, "sidecar/core import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    """The checker itself: a back-reference like the ones removed is found."""
    graph = _graph()
    graph["approvals"] = {*graph["approvals"], "runtime"}
    cycle = _cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and "runtime" in cycle


def test_only_the_runtime_assigns_a_runtime_record_or_status() -> None:
    """The runtime is the one writer of its record and status: no other module of the
    sidecar assigns `.record` or `.status` on anything (its own `_record` is private)."""
    writers: list[str] = []
    for path in sorted((CORE.parent).rglob("*.py")):
        if path == CORE / "runtime.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in ("record", "status"):
                    if not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                        writers.append(f"{path.relative_to(CORE.parent.parent)}:{node.lineno}")
    assert writers == []
