"""Making failure messages short, readable and free of secrets.

Statuses are shown to users and models; they quote server output (stderr, stray stdout,
exception text) which may echo the env or headers the server was given. Everything that
goes into a status passes through a `Redactor` built from the spec's secret values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable
from typing import TextIO

import httpx2
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

MIN_SECRET_LENGTH = 4
"""Shorter values are not redacted: they cannot be secrets worth the name, and replacing
every `1` or `on` would garble messages."""

_MAX_LINE = 240
_TAIL_BYTES = 8192


class Redactor:
    """Replaces every known secret value (and each word of it) with `***`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        words: set[str] = set()
        for secret in secrets:
            words.add(secret.strip())
            words.update(secret.split())
        self._words = sorted(
            (w for w in words if len(w) >= MIN_SECRET_LENGTH), key=len, reverse=True
        )

    def __call__(self, text: str) -> str:
        for word in self._words:
            text = text.replace(word, "***")
        return text


def one_line(text: str, limit: int = _MAX_LINE) -> str:
    """Collapse whitespace and cut, so a status stays one readable line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def leaf_exception(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def describe_exception(exc: BaseException) -> str:
    """A short, human description of why an operation failed."""
    exc = leaf_exception(exc)
    if isinstance(exc, MCPError):
        return f"MCP error {exc.error.code}: {exc.error.message}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, httpx2.HTTPStatusError):
        response = exc.response
        return f"HTTP {response.status_code} {response.reason_phrase}".strip()
    if isinstance(exc, httpx2.ConnectError):
        return f"could not connect: {exc}"
    if isinstance(exc, httpx2.TimeoutException):
        return "the HTTP request timed out"
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        first = errors[0]["msg"] if errors else str(exc)
        return f"the server sent an invalid message: {first}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _TailProtocol(asyncio.Protocol):
    def __init__(self, tail: StderrTail) -> None:
        self._tail = tail

    def data_received(self, data: bytes) -> None:
        self._tail.feed(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._tail.done.set()


class StderrTail:
    """Collects a stdio server's stderr through a pipe, keeping only the last few KiB.

    The tail's last line is what explains most failed starts ("ModuleNotFoundError: ...",
    "bwrap: execvp foo: No such file or directory"); lines are also logged at DEBUG.
    """

    def __init__(self, logger: logging.Logger, redact: Redactor) -> None:
        self._logger = logger
        self._redact = redact
        self._buffer = bytearray()
        self._partial = b""
        self._writer: TextIO | None = None
        self._transport: asyncio.ReadTransport | None = None
        self.done = asyncio.Event()
        self.inode = 0
        """The pipe's inode, which identifies the server process by its fd 2."""

    async def open(self) -> TextIO:
        """The write end, to hand to the child as its stderr."""
        read_fd, write_fd = os.pipe()
        self.inode = os.fstat(read_fd).st_ino
        self._writer = os.fdopen(write_fd, "w")
        reader = os.fdopen(read_fd, "rb", buffering=0)
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(lambda: _TailProtocol(self), reader)
        return self._writer

    def spawned(self) -> None:
        """Drop our copy of the write end so the pipe ends when the server's copies do."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def feed(self, data: bytes) -> None:
        self._buffer += data
        del self._buffer[:-_TAIL_BYTES]
        if self._logger.isEnabledFor(logging.DEBUG):
            *lines, self._partial = (self._partial + data).split(b"\n")
            for line in lines:
                self._logger.debug("stderr: %s", self._redact(line.decode(errors="replace")))

    def last_line(self) -> str | None:
        lines = [line.strip() for line in self._buffer.decode(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        return one_line(self._redact(lines[-1]), 200) if lines else None

    async def wait_done(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), timeout)

    def close(self) -> None:
        self.spawned()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
