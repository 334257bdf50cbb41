"""Scenario 7's material: working trees of real files, the floors, and plain git as a peer.

A tree is `n` files of a few KB (512 B to 6 KB of source-like text, seeded, every file
distinct so git cannot share blobs) in nested directories (`src/pkgNN/modNN/`, 25 files
to a directory, 20 directories to a package) and a `.gitignore`; the mtimes are set an
hour back, as an existing checkout's are, so git's racy-clean check (a file as new as
the index is hashed again) does not hash files a real session would not.

The floors, timed in the same rounds as the snapshots: reading every file once (what a
snapshot without a stat cache pays at the least), hashing every file as git would
(`git hash-object --stdin-paths`, nothing stored), `lstat` of every file (what any
snapshot that notices changes must do), and starting one git process (`git --version`;
a snapshot is four of them). The peer: a plain repository over the same tree, its own
GIT_DIR and index outside the tree, git's default config: `git add -A` + `git
write-tree` (a snapshot as git itself takes one), `git status --porcelain`, and `git
checkout TREE -- PATHS` (a restore alone).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.transcripts import WORDS

PER_DIR = 25
DIRS_PER_PACKAGE = 20
IGNORE = "__pycache__/\n*.pyc\n*.log\nbuild/\n"
SIZES = (512, 6144)  # bytes per file, uniform between


@dataclass
class Tree:
    root: Path
    files: list[str]  # relative paths, `.gitignore` excluded
    size: int = 0  # bytes in all
    build_s: float = 0.0
    edits: int = field(default=0, repr=False)

    def edit(self, path: str) -> bytes:
        """Change one file as an agent's edit would: a line added. Its new content."""
        self.edits += 1
        full = self.root / path
        content = full.read_bytes() + f"# edit {self.edits}\n".encode()
        full.write_bytes(content)
        return content


def _line_pool(rng: random.Random, count: int = 4000) -> list[str]:
    pool = []
    for _ in range(count):
        indent = " " * (4 * rng.randint(0, 3))
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
        pool.append(f"{indent}{words}\n")
    return pool


def build(root: Path, count: int, rng: random.Random) -> Tree:
    """`count` files under `root` (which must not exist yet)."""
    started = time.perf_counter()
    root.mkdir(parents=True)
    (root / ".gitignore").write_text(IGNORE)
    pool = _line_pool(rng)
    tree = Tree(root, [])
    for index in range(count):
        leaf = index // PER_DIR
        relative = (
            f"src/pkg{leaf // DIRS_PER_PACKAGE:02d}/mod{leaf % DIRS_PER_PACKAGE:02d}/"
            f"file{index:05d}.py"
        )
        target = rng.randint(*SIZES)
        parts = [f'"""file {index} of {count}: {relative}"""\n']
        length = len(parts[0])
        while length < target:
            line = rng.choice(pool)
            parts.append(line)
            length += len(line)
        full = root / relative
        full.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(parts).encode()
        full.write_bytes(data)
        tree.files.append(relative)
        tree.size += len(data)
    past = time.time() - 3600
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (past, past))
    tree.build_s = time.perf_counter() - started
    return tree


def _walk(directory: str, read: bool) -> int:
    seen = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                seen += _walk(entry.path, read)
            elif read:
                with open(entry.path, "rb") as handle:
                    seen += len(handle.read())
            else:
                entry.stat(follow_symlinks=False)
                seen += 1
    return seen


def read_tree_ms(root: Path) -> float:
    """Every file opened and read once (page cache warm, as for the snapshots)."""
    started = time.perf_counter_ns()
    _walk(str(root), read=True)
    return (time.perf_counter_ns() - started) / 1e6


def stat_tree_ms(root: Path) -> float:
    """Every directory listed and every file `lstat`ed once."""
    started = time.perf_counter_ns()
    _walk(str(root), read=False)
    return (time.perf_counter_ns() - started) / 1e6


class PlainGit:
    """A plain repository over a tree (blocking calls; each returns its ms)."""

    def __init__(self, git: str, git_dir: Path, work_tree: Path) -> None:
        self.git = git
        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(git_dir.parent),  # nobody's ~/.gitconfig
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        self.env = base | {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work_tree)}
        self.work_tree = work_tree
        subprocess.run([git, "init", "-q", "--bare", str(git_dir)], env=base, check=True)

    def copy(self, git_dir: Path) -> PlainGit:
        """Another repository over the same tree holding what this one does (objects
        hard-linked, the index copied): its stat cache filled without hashing again."""

        def link(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(self.env["GIT_DIR"], git_dir, copy_function=link)
        os.unlink(git_dir / "index")
        shutil.copy2(Path(self.env["GIT_DIR"]) / "index", git_dir / "index")
        twin = PlainGit.__new__(PlainGit)
        twin.git, twin.work_tree = self.git, self.work_tree
        twin.env = self.env | {"GIT_DIR": str(git_dir)}
        return twin

    def _git(self, *args: str) -> bytes:
        done = subprocess.run(
            [self.git, *args], cwd=self.work_tree, env=self.env, capture_output=True, check=True
        )
        return done.stdout

    def add_ms(self) -> tuple[float, str]:
        """`git add -A` + `git write-tree`: (ms, the tree)."""
        started = time.perf_counter_ns()
        self._git("add", "-A")
        tree = self._git("write-tree").decode().strip()
        return (time.perf_counter_ns() - started) / 1e6, tree

    def status_ms(self) -> float:
        started = time.perf_counter_ns()
        self._git("status", "--porcelain")
        return (time.perf_counter_ns() - started) / 1e6

    def checkout_ms(self, tree: str, paths: list[str]) -> float:
        started = time.perf_counter_ns()
        self._git("checkout", tree, "--", *paths)
        return (time.perf_counter_ns() - started) / 1e6

    def hash_all_ms(self, paths: list[str]) -> float:
        """Every file hashed as a blob, nothing stored: what a snapshot without a stat
        cache would pay on top of reading."""
        started = time.perf_counter_ns()
        subprocess.run(
            [self.git, "hash-object", "--stdin-paths"],
            input=("\n".join(paths) + "\n").encode(),
            cwd=self.work_tree, env=self.env, capture_output=True, check=True,
        )  # fmt: skip
        return (time.perf_counter_ns() - started) / 1e6

    def version_ms(self) -> float:
        started = time.perf_counter_ns()
        self._git("--version")
        return (time.perf_counter_ns() - started) / 1e6
