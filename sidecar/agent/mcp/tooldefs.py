"""How an MCP tool is offered to the model: its schema, safety hints and ACP tool kind.

Annotations are *hints* from the server (the MCP spec says clients must not trust them from
untrusted servers); they are surfaced so the permission layer can decide, not to decide here.

ACP `kind` mapping (the first rule that applies wins):

- `readOnlyHint: true` and `openWorldHint: true` given explicitly -> `"fetch"` (reads from
  outside, e.g. web search)
- `readOnlyHint: true` -> `"read"`
- `destructiveHint: true` given explicitly -> `"delete"` (may destroy data: the riskiest kind)
- `destructiveHint: false` given explicitly, or `readOnlyHint: false` given -> `"edit"`
  (it changes something)
- nothing said -> `"other"`; MCP has no hint for "runs code", so `"execute"` is never guessed.

`destructive` follows the spec defaults: unannotated tools count as destructive, read-only
tools never do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # annotations only: the SDK's types cost ~0.5 s of import
    import mcp_types as types

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One MCP tool as offered to the model. `parameters` is shared: treat it as read-only."""

    name: str
    server: str
    tool: str
    title: str | None
    description: str
    parameters: dict[str, Any]
    read_only: bool
    destructive: bool
    kind: ToolKind


def tool_kind(annotations: types.ToolAnnotations | None) -> ToolKind:
    """The ACP kind for a tool's annotations (see the module docstring)."""
    if annotations is None:
        return "other"
    if annotations.read_only_hint is True:
        return "fetch" if annotations.open_world_hint is True else "read"
    if annotations.destructive_hint is True:
        return "delete"
    if annotations.destructive_hint is False or annotations.read_only_hint is False:
        return "edit"
    return "other"


def schema_problem(schema: object) -> str | None:
    """Why a tool's input schema cannot be given to a model, or None if it can.

    Cheap structural checks only (the root must be an object schema, `properties` an object
    of schemas, `required` a list of names): full meta-schema validation costs milliseconds
    per tool, too much for servers with hundreds of tools.
    """
    if not isinstance(schema, dict):
        return "input schema is not a JSON object"
    kind = schema.get("type", "object")
    if kind != "object":
        return f"input schema type is {kind!r}, not 'object'"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return "input schema 'properties' is not an object"
    for key, value in properties.items():
        if not isinstance(value, dict | bool):
            return f"input schema property {key!r} is not a schema"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
        return "input schema 'required' is not a list of names"
    return None


def describe_tool(server: str, tool: types.Tool) -> ToolSpec | str:
    """The `ToolSpec` for a listed tool (public name still empty), or why it is skipped."""
    problem = schema_problem(tool.input_schema)
    if problem is not None:
        return problem
    parameters = tool.input_schema
    if "type" not in parameters:
        parameters = {"type": "object", **parameters}
    annotations = tool.annotations
    read_only = annotations is not None and annotations.read_only_hint is True
    destructive_hint = annotations.destructive_hint if annotations is not None else None
    title = tool.title or (annotations.title if annotations is not None else None)
    return ToolSpec(
        name="",
        server=server,
        tool=tool.name,
        title=title,
        description=tool.description or title or "",
        parameters=parameters,
        read_only=read_only,
        destructive=not read_only and destructive_hint is not False,
        kind=tool_kind(annotations),
    )


def collect_tools(
    server: str, listed: list[types.Tool], *, max_tools: int
) -> tuple[tuple[ToolSpec, ...], list[str]]:
    """The usable tools of one listing (first `max_tools`), and notes on what was skipped."""
    notes: list[str] = []
    specs: dict[str, ToolSpec] = {}
    for tool in listed:
        described = describe_tool(server, tool)
        if isinstance(described, str):
            notes.append(f"skipped tool {tool.name!r}: {described}")
        elif tool.name in specs:
            notes.append(f"skipped a second tool named {tool.name!r}")
        else:
            specs[tool.name] = described
    if len(specs) > max_tools:
        notes.append(f"the server offers more than {max_tools} tools; only the first are used")
    return tuple(specs.values())[:max_tools], notes
