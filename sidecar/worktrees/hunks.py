"""`git diff` output as files and hunks, each hunk with a stable id.

A hunk's id hashes its file's path, its header and its lines, so the same hunk of the
same file has the same id in every listing that shows it (a page of a session's diff, a
plain `git diff` of the same change elsewhere): a review can mark hunks and find them
again. Hunks are delimited by the counts in their headers, never by guessing from line
contents, and text is split on "\\n" only (a form feed or CR inside a line stays there).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from sidecar.domain.files import Hunk

__all__ = ["FileDiff", "Hunk", "Status", "hunk_id", "parse_diff"]

Status = Literal["added", "modified", "deleted", "renamed", "copied"]

_HUNK_HEADER: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_GIT: Final = "diff --git "
_NULL: Final = "/dev/null"
_ESCAPES: Final = {
    "a": 7,
    "b": 8,
    "t": 9,
    "n": 10,
    "v": 11,
    "f": 12,
    "r": 13,
    '"': 34,
    "\\": 92,
}


@dataclass(frozen=True)
class FileDiff:
    path: str  # the new path (the old one for a deleted file)
    old_path: str | None  # set for a rename or a copy
    status: Status
    binary: bool
    additions: int
    deletions: int
    hunks: tuple[Hunk, ...]
    old_mode: str | None = None
    new_mode: str | None = None


def hunk_id(path: str, header: str, lines: Sequence[str]) -> str:
    text = f"{path}\0{header}\0" + "\n".join(lines)
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


def parse_diff(text: str) -> list[FileDiff]:
    """Files of a unified `git diff` (a/ and b/ prefixes). Anything before the first
    `diff --git` line (a commit message, a stat) is skipped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FileDiff] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(_DIFF_GIT):
            i, parsed = _parse_file(lines, i)
            files.append(parsed)
        else:
            i += 1
    return files


class _File:
    """What one file's headers said, filled in as they are read."""

    def __init__(self, old: str | None, new: str | None) -> None:
        self.old = old
        self.new = new
        self.change: Status = "modified"
        self.binary = False
        self.old_mode: str | None = None
        self.new_mode: str | None = None


def _parse_file(lines: list[str], start: int) -> tuple[int, FileDiff]:
    old, new = _header_paths(lines[start][len(_DIFF_GIT) :])
    info = _File(old, new)
    i = start + 1
    while i < len(lines) and not lines[i].startswith(("@@", _DIFF_GIT)):
        _extended_header(info, lines[i])
        i += 1
    path = info.new if info.change != "deleted" else info.old
    path = path or info.old or info.new or ""
    hunks: list[Hunk] = []
    additions = deletions = 0
    while i < len(lines) and lines[i].startswith("@@"):
        i, hunk = _parse_hunk(lines, i, path)
        hunks.append(hunk)
        additions += sum(1 for line in hunk.lines if line.startswith("+"))
        deletions += sum(1 for line in hunk.lines if line.startswith("-"))
    # Whatever else belongs to this file (a `GIT binary patch` body) up to the next one.
    while i < len(lines) and not lines[i].startswith(_DIFF_GIT):
        i += 1
    moved = info.change in ("renamed", "copied")
    return i, FileDiff(
        path=path,
        old_path=info.old if moved else None,
        status=info.change,
        binary=info.binary,
        additions=additions,
        deletions=deletions,
        hunks=tuple(hunks),
        old_mode=info.old_mode,
        new_mode=info.new_mode,
    )


def _extended_header(info: _File, line: str) -> None:
    if line.startswith("--- "):
        side = _side_path(line[4:])
        if side is None:
            info.change = "added"
        elif info.change not in ("renamed", "copied"):
            info.old = side
    elif line.startswith("+++ "):
        side = _side_path(line[4:])
        if side is None:
            info.change = "deleted"
        elif info.change not in ("renamed", "copied"):
            info.new = side
    elif line.startswith("new file mode "):
        info.change, info.new_mode = "added", line[len("new file mode ") :]
    elif line.startswith("deleted file mode "):
        info.change, info.old_mode = "deleted", line[len("deleted file mode ") :]
    elif line.startswith("old mode "):
        info.old_mode = line[len("old mode ") :]
    elif line.startswith("new mode "):
        info.new_mode = line[len("new mode ") :]
    elif line.startswith(("rename from ", "copy from ")):
        info.change = "renamed" if line.startswith("rename") else "copied"
        info.old = _unquote(line.split(" ", 2)[2])
    elif line.startswith(("rename to ", "copy to ")):
        info.change = "renamed" if line.startswith("rename") else "copied"
        info.new = _unquote(line.split(" ", 2)[2])
    elif line.startswith("index "):
        parts = line.split(" ")
        if len(parts) == 3 and info.old_mode is None and info.new_mode is None:
            info.old_mode = info.new_mode = parts[2]
    elif line.startswith("Binary files ") or line == "GIT binary patch":
        info.binary = True


def _parse_hunk(lines: list[str], start: int, path: str) -> tuple[int, Hunk]:
    header = lines[start]
    match = _HUNK_HEADER.match(header)
    if match is None:
        raise ValueError(f"malformed hunk header in the diff of {path}: {header!r}")
    old_left = int(match.group(2)) if match.group(2) is not None else 1
    new_left = int(match.group(4)) if match.group(4) is not None else 1
    body: list[str] = []
    i = start + 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i] or " "  # an empty context line whose space was stripped
        kind = line[0]
        if kind == " ":
            old_left, new_left = old_left - 1, new_left - 1
        elif kind == "-":
            old_left -= 1
        elif kind == "+":
            new_left -= 1
        elif kind != "\\":
            break  # the hunk is shorter than its header says: stop at what is not ours
        body.append(line)
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        body.append(lines[i])  # "\ No newline at end of file" after the last line
        i += 1
    return i, Hunk(id=hunk_id(path, header, body), header=header, lines=tuple(body))


def _side_path(raw: str) -> str | None:
    """The path of a `---`/`+++` line; None for /dev/null. git ends a name that has a
    space with a tab; `diff -u` adds a timestamp after one."""
    if not raw.startswith('"'):
        raw = raw.split("\t", 1)[0]
    if raw == _NULL:
        return None
    return _strip_prefix(_unquote(raw))


def _header_paths(rest: str) -> tuple[str | None, str | None]:
    """The two paths of `diff --git a/X b/Y`. Unquoted names may hold spaces, so equal
    halves are tried first (every change but a rename); a rename's own headers follow."""
    if rest.startswith('"'):
        first, after = _take_quoted(rest)
        second = after[1:] if after.startswith(" ") else after
        return _strip_prefix(first), _strip_prefix(_unquote(second))
    size = len(rest) - 5
    if size > 0 and size % 2 == 0:
        half = size // 2
        a, b = rest[2 : 2 + half], rest[half + 5 :]
        if rest.startswith("a/") and rest[2 + half : half + 5] == " b/" and a == b:
            return a, b
    quoted = rest.find(' "')
    if quoted != -1:
        return _strip_prefix(rest[:quoted]), _strip_prefix(_unquote(rest[quoted + 1 :]))
    cut = rest.find(" b/")
    if cut == -1:
        return None, None
    return _strip_prefix(rest[:cut]), _strip_prefix(rest[cut + 1 :])


def _strip_prefix(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def _unquote(raw: str) -> str:
    if not raw.startswith('"'):
        return raw
    value, _ = _take_quoted(raw)
    return value


def _take_quoted(raw: str) -> tuple[str, str]:
    """A C-quoted name at the start of `raw` (git quotes names with control characters,
    quotes or backslashes even with core.quotePath off) and what follows it."""
    out = bytearray()
    i = 1
    while i < len(raw):
        char = raw[i]
        if char == '"':
            return out.decode("utf-8", errors="replace"), raw[i + 1 :]
        if char == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in "01234567" and i + 3 < len(raw):
                out.append(int(raw[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt) if nxt.isascii() else 63))
            i += 2
            continue
        out += char.encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace"), ""
