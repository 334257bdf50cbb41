"""The project's instruction files (AGENTS.md) for the builtin engine's system prompt.

`AGENTS.md` is read in the session's cwd and each parent up to the repository root (the
first directory upward with a `.git`, file or directory; outside a repository, the cwd
only); `CLAUDE.md` in a directory that has no `AGENTS.md`. They are given farthest first,
nearest last (the nearest is the most specific), each under a heading naming its path.

Bounded: MAX_FILE bytes of a file, MAX_TOTAL of all (the nearest are given their share
first); a cut is marked in the text. Skipped, with the reason in the summary and the
log: a binary file (NUL bytes, not UTF-8), one that is not a regular file, a symlink
whose target is outside the repository (or the cwd) or in a directory the sandbox hides
(the sidecar's data and config dirs), one that cannot be read. Nothing here fails a turn.

Re-read when it changes: `scan()` stats the candidates (a few `lstat` calls, run per
model call on the event loop) and `refresh(scan)` reads, in a worker thread, only when
some (path, mtime_ns, size, inode) changed. External
agents read their own: only the builtin engine uses this.
"""

from __future__ import annotations

import codecs
import logging
import os
import stat
from dataclasses import dataclass
from typing import Final

from sidecar.domain.files import InstructionFile

log = logging.getLogger(__name__)

NAMES: Final = ("AGENTS.md", "CLAUDE.md")  # the first found in a directory is its file
MAX_FILE: Final = 32 * 1024
MAX_TOTAL: Final = 64 * 1024
HEADING: Final = (
    "# Project instructions\n"
    "The project's instruction files follow, the farthest directory first: where they "
    "differ, the nearer file wins."
)

Key = tuple[int, int, int]  # (mtime_ns, size, inode)


def project_root(cwd: str) -> str | None:
    """The first directory from `cwd` upward that holds a `.git` (a worktree's is a file)."""
    directory = os.path.abspath(cwd)
    while True:
        if os.path.lexists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def directories(cwd: str, root: str | None) -> list[str]:
    """From the root down to the cwd (farthest first); the cwd alone without a root."""
    here = os.path.abspath(cwd)
    if root is None:
        return [here]
    found = [here]
    while here != root:
        parent = os.path.dirname(here)
        if parent == here:  # not under the root after all: the cwd only
            return [os.path.abspath(cwd)]
        here = parent
        found.append(here)
    return found[::-1]


@dataclass(frozen=True, slots=True)
class _Candidate:
    path: str
    key: Key | None  # None: skipped before reading (`problem` says why)
    problem: str | None = None


Scan = tuple[_Candidate, ...]  # the instruction files found, in order, as stat saw them


@dataclass(frozen=True, slots=True)
class _Read:
    """A file's first MAX_FILE + 1 bytes (one more tells whether there is more)."""

    data: bytes
    size: int
    problem: str | None = None


def _under(real: str, directory: str) -> bool:
    return os.path.commonpath([real, directory]) == directory


def _candidate(directory: str, boundary: str, hidden: tuple[str, ...]) -> _Candidate | None:
    for name in NAMES:
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return _Candidate(path, None, f"cannot be read: {exc.strerror or exc}")
        if stat.S_ISLNK(info.st_mode):
            real = os.path.realpath(path)
            if not _under(real, boundary):
                return _Candidate(path, None, "a symlink to outside the project")
            if any(_under(real, dark) for dark in hidden):
                return _Candidate(path, None, "a symlink into a directory the sandbox hides")
            try:
                info = os.stat(path)
            except OSError as exc:
                return _Candidate(path, None, f"cannot be read: {exc.strerror or exc}")
        if not stat.S_ISREG(info.st_mode):
            return _Candidate(path, None, "not a regular file")
        return _Candidate(path, (info.st_mtime_ns, info.st_size, info.st_ino))
    return None


def _read(path: str) -> _Read:
    # O_NONBLOCK: a FIFO swapped in after the stat does not hang the turn.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return _Read(b"", info.st_size, "not a regular file")
        data = handle.read(MAX_FILE + 1)
    if b"\0" in data:
        return _Read(b"", info.st_size, "a binary file (NUL bytes)")
    return _Read(data, info.st_size)


def _text(data: bytes, limit: int) -> tuple[str, int] | None:
    """The first `limit` bytes as text, a character cut in half left out; None: not
    UTF-8. Returns (text, bytes used)."""
    if len(data) <= limit:
        try:
            return data.decode("utf-8"), len(data)
        except UnicodeDecodeError:
            return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data[:limit], final=False)
    except UnicodeDecodeError:
        return None
    return text, len(text.encode("utf-8"))


class ProjectInstructions:
    """One session's instruction files, cached by their stat; `section` is the prompt's
    part, `files` what the summary shows."""

    def __init__(self, cwd: str, hidden: tuple[str, ...] = ()) -> None:
        """`hidden`: real paths no symlink may lead into (the sidecar's own dirs)."""
        self.cwd = os.path.abspath(cwd)
        self._hidden = hidden
        self.root = project_root(self.cwd)
        self._boundary = os.path.realpath(self.root or self.cwd)
        self._directories = directories(self.cwd, self.root)
        self._seen: tuple[_Candidate, ...] | None = None  # the last scan
        self._reads: dict[tuple[str, Key], _Read] = {}
        self.files: tuple[InstructionFile, ...] = ()
        self.section = ""

    def scan(self) -> Scan:
        """The candidates as they are now: a few `lstat` calls, cheap enough for the event
        loop (a thread hop per model call cost ~30-90 µs, more than the stats)."""
        return tuple(
            found
            for found in (_candidate(d, self._boundary, self._hidden) for d in self._directories)
            if found is not None
        )

    def unchanged(self, scan: Scan) -> bool:
        """Whether `scan` is the one the text was last made from (nothing to read)."""
        return scan == self._seen

    def refresh(self, scan: Scan | None = None) -> bool:
        """Read what changed since the last scan (`scan`: one just made, else made here).
        True when the files or the text did (the summary is told). Reads files: run it
        off the event loop when `unchanged(scan)` is False."""
        if scan is None:
            scan = self.scan()
        if scan == self._seen:
            return False
        self._seen = scan
        reads: dict[tuple[str, Key], _Read] = {}
        for candidate in scan:
            if candidate.key is None:
                continue
            cached = self._reads.get((candidate.path, candidate.key))
            if cached is None:
                try:
                    cached = _read(candidate.path)
                except OSError as exc:
                    cached = _Read(b"", 0, f"cannot be read: {exc.strerror or exc}")
            reads[(candidate.path, candidate.key)] = cached
        self._reads = reads
        files, section = self._assemble(scan)
        changed = (files, section) != (self.files, self.section)
        self.files, self.section = files, section
        for file in files:
            if file.skipped is not None:
                log.warning("instruction file %s skipped: %s", file.path, file.skipped)
        return changed

    def _assemble(self, scan: Scan) -> tuple[tuple[InstructionFile, ...], str]:
        """Budgets from the nearest file out (it matters most), shown farthest first."""
        left = MAX_TOTAL
        shown: list[tuple[InstructionFile, str]] = []
        for candidate in reversed(scan):
            if candidate.key is None:
                assert candidate.problem is not None
                shown.append((InstructionFile(candidate.path, 0, False, candidate.problem), ""))
                continue
            read = self._reads[(candidate.path, candidate.key)]
            if read.problem is not None:
                shown.append((InstructionFile(candidate.path, read.size, False, read.problem), ""))
                continue
            decoded = _text(read.data, min(MAX_FILE, left))
            if decoded is None:
                problem = "not UTF-8 text"
                shown.append((InstructionFile(candidate.path, read.size, False, problem), ""))
                continue
            text, used = decoded
            left -= used
            cut = used < read.size
            if cut:
                name = os.path.basename(candidate.path)
                text = f"{text.rstrip()}\n[... {name} cut at {used} bytes of {read.size}]"
            shown.append((InstructionFile(candidate.path, read.size, cut), text))
        shown.reverse()
        parts = [f"## {file.path}\n{text.strip()}" for file, text in shown if not file.skipped]
        section = "\n\n".join([HEADING, *parts]) if parts else ""
        return tuple(file for file, _ in shown), section
