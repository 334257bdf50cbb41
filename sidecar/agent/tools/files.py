"""The file tools: read_file, write_file, edit_file, list_files.

Paths are relative to the session cwd (absolute ones are taken as they are) and resolved
through symlinks before anything is decided: a write whose real target lies outside the
cwd is refused unless the session's sandbox is `off`, whatever the path looks like (`..`,
a symlink in the cwd pointing out). Every failure is a tool result the model can read
(`ToolError`: an OSError of any kind names the path and the cause), never an exception
out of the turn. Files are opened non-blocking and read bounded, so a FIFO or a special
file planted in the cwd is refused instead of hanging the turn. Output is bounded: a read
returns at most `MAX_READ_LINES` lines / `MAX_READ_BYTES`, a listing at most `MAX_LIST`
paths.

A write is planned first (`plan_write`: the file's real path, its current text and the
new one, so the user approves exactly that diff) and applied later (`apply_write`), which
refuses if the file changed in between: nothing is ever silently overwritten. The approval
is of the real path: `safe_write.replace` reaches it again without following any symlink,
so a symlink put in its place or in place of a parent directory meanwhile (by the agent's
own commands, say) is refused, never followed out of the cwd. A write through a symlink
whose target is in the cwd writes that target (the link stays); one whose target is
outside is refused like any path outside. A new file is 0644; an existing one keeps its
mode.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pathspec

from sidecar.agent.tools import safe_write
from sidecar.domain.tools import EDIT_FILE as EDIT_FILE  # the tools' names, re-exported
from sidecar.domain.tools import FILE_TOOL_KINDS, FILE_TOOL_TITLES
from sidecar.domain.tools import LIST_FILES as LIST_FILES
from sidecar.domain.tools import READ_FILE as READ_FILE
from sidecar.domain.tools import WRITE_FILE as WRITE_FILE

NAMES: Final = frozenset({READ_FILE, WRITE_FILE, EDIT_FILE, LIST_FILES})
WRITES: Final = frozenset({WRITE_FILE, EDIT_FILE})
READS: Final = (READ_FILE, LIST_FILES)
KINDS: Final = FILE_TOOL_KINDS
TITLES: Final = FILE_TOOL_TITLES

MAX_READ_LINES: Final = 2000
MAX_READ_BYTES: Final = 256 * 1024
MAX_FILE_BYTES: Final = 10 * 1024 * 1024  # files larger than this are not read or edited
MAX_LIST: Final = 1000
MAX_WRITE_BYTES: Final = 10 * 1024 * 1024


class ToolError(Exception):
    """A refusal or failure, in words for the model."""


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


PATH = {"type": "string", "description": "A path, relative to the session directory."}
SPECS: Final[dict[str, dict[str, Any]]] = {
    READ_FILE: _function(
        READ_FILE,
        "Read a text file, with line numbers. Large files: read a part with offset/limit.",
        {
            "path": PATH,
            "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines."},
        },
        ["path"],
    ),
    WRITE_FILE: _function(
        WRITE_FILE,
        "Create or replace a file with the given content.",
        {"path": PATH, "content": {"type": "string"}},
        ["path", "content"],
    ),
    EDIT_FILE: _function(
        EDIT_FILE,
        "Replace old_text by new_text in a file. old_text must occur exactly once, unless "
        "replace_all is true.",
        {
            "path": PATH,
            "old_text": {"type": "string"},
            "new_text": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        ["path", "old_text", "new_text"],
    ),
    LIST_FILES: _function(
        LIST_FILES,
        "List files under a directory (default: the session directory), skipping what "
        ".gitignore ignores. pattern filters names, e.g. '*.py'.",
        {"path": PATH, "pattern": {"type": "string"}},
        [],
    ),
}


# ---- arguments and paths ------------------------------------------------------------------


def arguments(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw or "{}")
    except ValueError as exc:
        raise ToolError(f"arguments are not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise ToolError("arguments must be a JSON object")
    return parsed


def _text(args: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ToolError(f"{name!r} must be a string")
    return value


def _count(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise ToolError(f"{name!r} must be a positive integer")
    return value


def resolve(cwd: str, path: str) -> Path:
    """The real path `path` names (relative paths from the cwd; symlinks followed)."""
    if not path.strip():
        raise ToolError("path must not be empty")
    if "\x00" in path:
        raise ToolError("path must not contain NUL")
    try:
        path.encode()
    except UnicodeEncodeError:  # JSON can carry "\ud800"; no file name can (not echoed)
        raise ToolError("path is not valid Unicode (it has a lone surrogate)") from None
    joined = Path(cwd, path) if not os.path.isabs(path) else Path(path)
    return Path(os.path.realpath(joined))


def inside(cwd: str, target: Path) -> bool:
    root = os.path.realpath(cwd)
    return str(target) == root or str(target).startswith(root.rstrip("/") + "/")


# Kernel and device trees: the sidecar's own /proc (its environment: provider keys), the
# host's /proc/sys and /sys (as root, writable), devices. A sandboxed command sees its own
# namespace's; the file tools run in the sidecar's process, so they reach none of these.
_KERNEL_TREES: Final = ("/proc", "/sys", "/dev")


def reachable(target: Path, hidden: Sequence[str]) -> None:
    """Refuse a real path the file tools must not read or write: under a directory the
    sandbox hides from commands (the sidecar's data and config dirs: every session's
    transcript and MCP secrets) or under /proc, /sys, /dev."""
    text = str(target)
    for top in (*_KERNEL_TREES, *hidden):
        if text == top or text.startswith(top.rstrip("/") + "/"):
            what = (
                "the kernel's or the devices' tree"
                if top in _KERNEL_TREES
                else ("the sidecar's own data, hidden from the agent")
            )
            raise ToolError(f"refused: {target} is in {top} ({what})")


def shown(cwd: str, target: Path) -> str:
    """How a path is shown to the model and the user: relative when it is in the cwd."""
    return os.path.relpath(target, os.path.realpath(cwd)) if inside(cwd, target) else str(target)


def failed(target: Path, exc: OSError) -> ToolError:
    """An OSError on `target` in words: the path and the cause (never the errno alone)."""
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{target} does not exist")
    if isinstance(exc, PermissionError):
        return ToolError(f"{target}: permission denied")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{target}: one of its parents is not a directory")
    return ToolError(f"{target}: {exc.strerror or exc}")


_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _read_existing(target: Path) -> bytes | None:
    """The bytes of the regular file `target` (a real path), None if there is none.
    Opened without following a symlink (the path was resolved: one there now is a loop or
    was put there since) and without blocking (a FIFO opens, then is refused)."""
    try:
        fd = os.open(target, _READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise failed(target, exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{target} is a directory (list_files lists it)")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{target} is not a regular file")
        data = safe_write.read_at_most(fd, MAX_FILE_BYTES)
    except OSError as exc:
        raise failed(target, exc) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        size = max(info.st_size, len(data))
        raise ToolError(f"{target} is {size} bytes: too large (limit {MAX_FILE_BYTES})")
    return data


def _read_bytes(target: Path) -> bytes:
    data = _read_existing(target)
    if data is None:
        raise ToolError(f"{target} does not exist")
    return data


def _decode(target: Path, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{target} is a binary file ({len(data)} bytes); not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{target} is not UTF-8 text ({len(data)} bytes); not shown") from None


# ---- read and list ------------------------------------------------------------------------


def read_text(cwd: str, path: str, hidden: Sequence[str] = ()) -> str | None:
    """A text file in the cwd whole (an external agent's `fs/read_text_file`); None when
    there is none. Refused outside the cwd and where `reachable` refuses."""
    target = resolve(cwd, path)
    reachable(target, hidden)
    if not inside(cwd, target):
        raise ToolError(f"refused: {target} is outside the session directory {cwd}")
    data = _read_existing(target)
    return None if data is None else _decode(target, data)


def read_file(cwd: str, args: dict[str, Any], hidden: Sequence[str] = ()) -> tuple[str, Path]:
    target = resolve(cwd, _text(args, "path"))
    reachable(target, hidden)
    text = _decode(target, _read_bytes(target))
    lines = text.splitlines()
    first = _count(args, "offset") or 1
    limit = min(_count(args, "limit") or MAX_READ_LINES, MAX_READ_LINES)
    chosen = lines[first - 1 : first - 1 + limit]
    out: list[str] = []
    size = 0
    for number, line in enumerate(chosen, start=first):
        row = f"{number:6}\t{line}"
        size += len(row) + 1
        if size > MAX_READ_BYTES:
            out.append(f"[cut at {MAX_READ_BYTES} bytes: read from line {number} on]")
            break
        out.append(row)
    last = first + len(chosen) - 1
    if not lines:
        out.append("[empty file]")
    elif last < len(lines) and not out[-1].startswith("[cut"):
        out.append(f"[lines {first}-{last} of {len(lines)}: more with offset={last + 1}]")
    return "\n".join(out), target


def _ignores(directory: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        data = _read_existing(directory / ".gitignore")
    except ToolError:  # a .gitignore that cannot be read ignores nothing
        return None
    if data is None:
        return None
    lines = data.decode(errors="replace").splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError:  # a line that is no pattern (a lone "!"): git skips it, so do we
        return pathspec.GitIgnoreSpec.from_lines(line for line in lines if _pattern(line))


def _pattern(line: str) -> bool:
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


def list_files(cwd: str, args: dict[str, Any], hidden: Sequence[str] = ()) -> tuple[str, Path]:
    top = resolve(cwd, _text(args, "path", required=False) or ".")
    reachable(top, hidden)
    pattern = _text(args, "pattern", required=False)
    try:
        is_dir = stat.S_ISDIR(os.stat(top).st_mode)
    except OSError as exc:
        raise failed(top, exc) from None
    if not is_dir:
        raise ToolError(f"{top} is not a directory")
    found: list[str] = []
    more = False
    # Each directory's .gitignore applies below it, as git's do.
    stack: list[tuple[Path, list[tuple[Path, pathspec.GitIgnoreSpec]]]] = [(top, [])]
    while stack and not more:
        directory, specs = stack.pop()
        own = _ignores(directory)
        specs = [*specs, (directory, own)] if own is not None else specs
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                continue
            path = Path(entry.path)
            is_dir = entry.is_dir(follow_symlinks=False)
            if any(
                spec.match_file(str(path.relative_to(base)) + ("/" if is_dir else ""))
                for base, spec in specs
            ):
                continue
            if is_dir:
                if entry.path not in hidden:  # a hidden dir inside: neither listed nor shown
                    stack.append((path, specs))
                continue
            if pattern and not fnmatch.fnmatch(entry.name, pattern):
                continue
            if len(found) >= MAX_LIST:
                more = True
                break
            found.append(shown(cwd, path))
    found.sort()
    if more:
        found.append(f"[more than {MAX_LIST} files: narrow it with path or pattern]")
    return ("\n".join(found) or "[no files]"), top


# ---- writes: planned (and approved), then applied ----------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    target: Path
    display: str  # the path as shown
    old_text: str | None  # None: a new file
    new_text: str
    fingerprint: str | None  # of the file when planned (None: it did not exist)
    line: int  # first changed line, for the location

    def summary(self) -> str:
        verb = "Created" if self.old_text is None else "Wrote"
        return f"{verb} {self.display} ({len(self.new_text.splitlines())} lines)."


def _first_change(old: str, new: str) -> int:
    for number, (a, b) in enumerate(zip(old.splitlines(), new.splitlines(), strict=False), 1):
        if a != b:
            return number
    return min(len(old.splitlines()), len(new.splitlines())) + 1


def plan_write(
    cwd: str,
    name: str,
    args: dict[str, Any],
    may_leave_cwd: bool,
    hidden: Sequence[str] = (),
) -> PlannedWrite:
    target = resolve(cwd, _text(args, "path"))
    reachable(target, hidden)
    if not inside(cwd, target) and not may_leave_cwd:
        raise ToolError(
            f"refused: {target} is outside the session directory {cwd} "
            "(only the sandbox setting 'off' allows writes there)"
        )
    try:
        if stat.S_ISDIR(os.stat(target).st_mode):
            raise ToolError(f"{target} is a directory")
    except FileNotFoundError:
        pass  # a new file (its parents are made when it is written)
    except OSError as exc:
        raise failed(target, exc) from None
    old_data = _read_existing(target)
    old = None if old_data is None else _decode(target, old_data)
    if name == WRITE_FILE:
        new = _text(args, "content")
    else:
        if old is None:
            raise ToolError(f"{target} does not exist (write_file creates files)")
        find, replacement = _text(args, "old_text"), _text(args, "new_text")
        if not find:
            raise ToolError("old_text must not be empty")
        count = old.count(find)
        replace_all = args.get("replace_all") is True
        if count == 0:
            raise ToolError(f"old_text was not found in {shown(cwd, target)}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_text was found {count} times in {shown(cwd, target)}: make it unique, "
                "or set replace_all"
            )
        new = old.replace(find, replacement) if replace_all else old.replace(find, replacement, 1)
    try:
        size = len(new.encode())
    except UnicodeEncodeError:
        raise ToolError("the new text is not valid Unicode (it has a lone surrogate)") from None
    if size > MAX_WRITE_BYTES:
        raise ToolError(f"refused: more than {MAX_WRITE_BYTES} bytes")
    return PlannedWrite(
        target,
        shown(cwd, target),
        old,
        new,
        safe_write.fingerprint(old_data),
        _first_change(old or "", new),
    )


def apply_write(plan: PlannedWrite) -> str:
    """Write exactly what was approved, at the path approved; refused if the file or any
    directory on its path changed since it was planned."""
    try:
        safe_write.replace(plan.target, plan.new_text.encode(), plan.fingerprint, MAX_FILE_BYTES)
    except safe_write.Changed as exc:
        what = f" ({exc}); nothing was written" if str(exc) else ""
        raise ToolError(
            f"refused: {plan.display} changed since the write was approved{what}; "
            "read it again and retry"
        ) from None
    except OSError as exc:
        raise ToolError(f"writing {plan.display} failed: {exc.strerror or exc}") from None
    return plan.summary()
