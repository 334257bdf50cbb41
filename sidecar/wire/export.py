"""A session as a file: JSON Lines (to import again) and Markdown (to read).

JSON Lines: line 1 is `protocol.models.ExportHeader` (format name, version, the record
without its MCP server definitions, which may hold secrets); every later line is one
transcript row exactly as the store keeps it, in order. `parse_jsonl` checks every
line with the pydantic models and says which line is wrong; nothing is half-read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from protocol.models import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    ExportedRow,
    ExportedSession,
    ExportedUsage,
    ExportHeader,
)
from sidecar.domain.errors import InvalidInput
from sidecar.domain.records import SessionRecord, iso
from sidecar.domain.rules import rules_from_json
from sidecar.domain.transcript import (
    AssistantEntry,
    Entry,
    MarkerEntry,
    ToolResultEntry,
    UserEntry,
    from_row,
)


def jsonl_header(record: SessionRecord) -> str:
    session = ExportedSession(
        session_id=record.session_id,
        title=record.title,
        cwd=record.cwd,
        mode=record.mode,
        backend=record.backend,
        model=record.model,
        created_at=iso(record.created_at),
        updated_at=iso(record.updated_at),
        message_count=record.message_count,
        turns=record.turns,
        context_from=record.context_from,
        summary_index=record.summary_index,
        forked_from=record.forked_from,
        imported_from=record.imported_from,
        agent=record.agent,
        archived=record.archived,
        approval=record.approval,
        sandbox=record.sandbox,
        rules=[rule.to_wire() for rule in rules_from_json(record.rules)],
        usage=ExportedUsage(input_tokens=record.usage_input, output_tokens=record.usage_output),
    )
    header = ExportHeader(format=EXPORT_FORMAT, version=EXPORT_VERSION, session=session)
    return json.dumps(header.to_wire(), ensure_ascii=False)


def jsonl_row(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def parse_jsonl(lines: Iterable[str]) -> tuple[ExportHeader, list[dict[str, Any]]]:
    """The header and the rows of an export. Raises InvalidInput naming the first bad
    line (1-based) and what is wrong with it."""
    header: ExportHeader | None = None
    rows: list[dict[str, Any]] = []
    number = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            if header is None:
                raise InvalidInput("import", f"line {number}: empty (expected the header)")
            continue  # a trailing newline, or blank lines between entries
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise InvalidInput("import", f"line {number}: not JSON ({exc})") from None
        try:
            if header is None:
                header = ExportHeader.model_validate(value)
                continue
            ExportedRow.model_validate(value)
        except ValidationError as exc:
            what = "header" if header is None else "transcript entry"
            raise InvalidInput("import", f"line {number}: bad {what}: {_problem(exc)}") from None
        rows.append(value)
    if header is None:
        raise InvalidInput("import", "empty: no header line")
    expected = header.session.message_count
    if len(rows) != expected:
        raise InvalidInput(
            "import",
            f"the header counts {expected} transcript entries, the file has {len(rows)} "
            f"(line {number} is the last): a cut or edited file",
        )
    return header, rows


# ---- Markdown --------------------------------------------------------------------------


def _fence(text: str, info: str = "") -> str:
    """A code fence longer than any run of backticks inside."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}\n"


def markdown_header(record: SessionRecord) -> str:
    lines = [
        f"# {record.title}",
        "",
        f"- Session: `{record.session_id}`",
        f"- Directory: `{record.cwd}`",
        f"- Mode: {record.mode.value}; backend: {record.backend.value}"
        + (f"; model: {record.model}" if record.model else ""),
        f"- Created: {iso(record.created_at)}; last activity: {iso(record.updated_at)}",
        f"- Turns: {record.turns}; entries: {record.message_count}",
    ]
    if record.forked_from:
        lines.append(f"- Forked from: `{record.forked_from}`")
    if record.imported_from:
        lines.append(f"- Imported from: `{record.imported_from}`")
    return "\n".join(lines) + "\n"


def markdown_entry(row: dict[str, Any]) -> str:
    entry: Entry = from_row(row)
    if isinstance(entry, UserEntry):
        turn = f" (turn {entry.turn})" if entry.turn is not None else ""
        return f"\n## User{turn}\n\n{entry.text}\n"
    if isinstance(entry, AssistantEntry):
        parts = ["\n## Assistant\n"]
        if entry.text:
            parts.append(f"\n{entry.text}\n")
        for call in entry.tool_calls:
            parts.append(f"\n**Tool call** `{call.name}` ({call.call_id})\n\n")
            parts.append(_fence(call.arguments, "json"))
        return "".join(parts)
    if isinstance(entry, ToolResultEntry):
        status = "" if entry.exit_code is None else f", exit {entry.exit_code}"
        cut = ", truncated" if entry.truncated else ""
        return f"\n**Result** of `{entry.tool}`{status}{cut}\n\n" + _fence(entry.content)
    assert isinstance(entry, MarkerEntry)
    return f"\n> *{entry.kind.value}*: {entry.text}\n"
