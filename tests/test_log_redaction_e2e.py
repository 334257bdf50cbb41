"""Secrets never in a log line, including a library's own: the real sidecar at DEBUG, its
whole stderr kept in a file (tests/raw_client.py), searched for every secret it was given
and for any piece of one; then the registry and the filter in-process, for the cases an
end-to-end run cannot pick (a traceback, arguments that do not format, short values)."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fake_process import FakeServerProcess
from raw_client import RawClient, http

from sidecar.domain.redaction import MARK, SecretRegistry
from sidecar.log_redact import RedactingFilter, configured_secrets

LEAKY = Path(__file__).resolve().parent / "mcp_servers" / "leaky_server.py"
PIECE = 10  # no run of this many characters of a secret may appear in the log


def leaked(log: str, secret: str) -> list[str]:
    """Every piece of `secret` (PIECE characters or more) found in `log`."""
    return sorted({secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)} & _windows(log))


def _windows(log: str) -> set[str]:
    return {log[i : i + PIECE] for i in range(len(log) - PIECE + 1)}


async def until_connected(client: RawClient, session_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        servers = (await client.status(session_id))["mcpServers"]
        if servers and all(s["status"] != "connecting" for s in servers):
            return {s["name"]: s for s in servers}
        assert time.monotonic() < deadline, f"the MCP server never settled: {servers}"
        await asyncio.sleep(0.1)


async def test_an_mcp_servers_env_value_never_reaches_the_log_even_through_the_sdk(
    tmp_path: Path, data_dir: Path, workspace: Path
) -> None:
    """The MCP SDK logs a server's stdout line that is not JSON-RPC inside pydantic's
    error, which quotes it (`input_value='...'`, cut to its first 24 and last 23 characters
    when long); the leaky server prints its env secret that way, whole and cut."""
    secret = f"mcp-env-{uuid.uuid4().hex}"
    server = {
        "name": "leaky",
        "command": sys.executable,
        "args": [str(LEAKY)],
        "env": [{"name": "LEAKY_SECRET", "value": secret}],
    }
    first = await RawClient.start(data_dir, log_path=tmp_path / "first.log")
    try:
        opened = await first.call(
            "session/new", {"cwd": str(workspace), "mcpServers": [server], "_meta": {}}
        )
        sid = opened["sessionId"]
        assert (await until_connected(first, sid))["leaky"]["status"] == "connected"
    finally:
        await first.close()
    # A new process knows nothing yet: resuming the stored definitions registers them.
    second = await RawClient.start(data_dir, log_path=tmp_path / "second.log")
    try:
        await second.call(
            "session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert (await until_connected(second, sid))["leaky"]["status"] == "connected"
    finally:
        await second.close()

    for client in (first, second):
        log = client.stderr_text()
        assert log.count("Failed to parse JSONRPC message from server") == 2, log[-3000:]
        assert f"input_value='oops {MARK}'" in log
        assert f"input_value='xxxxxxxxxx{MARK}...{MARK}yyyyyyyyyy'" in log
        assert leaked(log, secret) == []


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[FakeServerProcess]:
    server = await FakeServerProcess.start(
        "fake_chat_server.py", tmp_path / "fake.port", base_path="/v1"
    )
    try:
        yield server
    finally:
        await server.stop()


async def test_provider_credentials_and_the_http_token_never_reach_the_log(
    tmp_path: Path, data_dir: Path, workspace: Path, fake: FakeServerProcess
) -> None:
    """httpx logs every request's URL, credentials included (`--base-url` with a proxy's
    `user:password@`); the API key and the session's bearer token are masked too."""
    key = f"sk-{uuid.uuid4().hex}"
    password = f"proxy-{uuid.uuid4().hex}"
    base_url = fake.base_url.replace("http://", f"http://proxyuser:{password}@")
    client = await RawClient.start(
        data_dir,
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        base_url,
        env={"OPENAI_API_KEY": key},
        log_path=tmp_path / "sidecar.log",
    )
    try:
        sid = (await client.new_session(workspace))["sessionId"]
        await fake.script({"type": "text", "text": "hello"})
        assert (await client.prompt(sid, "hi"))["stopReason"] == "end_turn"
        url, token = await client.endpoint(sid)
        status, body = await http(int(url.rsplit(":", 1)[1]), "GET", "/agent/status", token)
        assert (status, body["sessionId"]) == (200, sid)
    finally:
        await client.close()
    log = client.stderr_text()
    assert f"http://proxyuser:{MARK}@127.0.0.1" in log, "httpx's request line, masked"
    for secret in (password, key, token):
        assert leaked(log, secret) == []


# ---- the registry and the filter, in-process ----------------------------------------------


def logged(registry: SecretRegistry, emit: Any) -> str:
    """What a handler carrying the filter writes for `emit(logger)`."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    handler.addFilter(RedactingFilter(registry))
    logger = logging.getLogger(f"some.library.{uuid.uuid4().hex}")
    logger.propagate, logger.level = False, logging.DEBUG
    logger.addHandler(handler)
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    return out.getvalue()


def test_messages_arguments_tracebacks_and_stacks_are_masked() -> None:
    secret = "tok_0123456789abcdef"
    registry = SecretRegistry()
    registry.add(secret)

    def emit(logger: logging.Logger) -> None:
        logger.debug("header %s and %r", f"Bearer {secret}", {"v": secret})
        try:
            raise ValueError(f"the server said {secret}")
        except ValueError:
            logger.exception("failed with %s", secret, stack_info=True)
        logger.warning("%d apples", secret)  # does not format: dropped, never printed raw

    text = logged(registry, emit)
    assert secret not in text
    assert f"header Bearer {MARK} and {{'v': '{MARK}'}}" in text
    assert f"ValueError: the server said {MARK}" in text
    assert "arguments that could not be formatted left out" in text


def test_what_counts_as_the_same_secret_and_what_is_left_alone() -> None:
    registry = SecretRegistry()
    secret = "p@ss w0rd/with'quote"
    registry.add(secret, "12345", "", None)
    assert registry.redact(f"as given {secret}") == f"as given {MARK}"
    assert registry.redact("url p%40ss%20w0rd%2Fwith%27quote") == f"url {MARK}"
    assert registry.redact('json "p@ss w0rd/with\'quote"') == f'json "{MARK}"'
    assert registry.redact("a word of it: w0rd/with'quote") == f"a word of it: {MARK}"
    assert registry.redact("short values stay: 12345, p@ss") == "short values stay: 12345, p@ss"
    # Pieces of a secret at a cut mark, as pydantic and reprlib shorten what they quote.
    token = "abcdef0123456789ghijkl"
    registry.add(token)
    assert registry.redact("'xxxxabcdef0123...6789ghijklyyy'") == f"'xxxx{MARK}...{MARK}yyy'"
    assert registry.redact("connecting... done") == "connecting... done"
    registry.discard(token)
    assert registry.redact(token) == token, "discarded: a runtime's token once it is gone"
    registry.add("Bearer sk-header-value")
    assert registry.redact("Authorization: Bearer x") == "Authorization: Bearer x"


def test_the_start_up_secrets_are_the_keys_and_every_url_password() -> None:
    env = {"OPENAI_API_KEY": "sk-one", "ANTHROPIC_API_KEY": "", "PGPASSWORD": "pg-pass", "X": "y"}
    urls = [
        "postgresql://me:s%40cret@db/app",
        "host=db password=kv-pass dbname=app",
        "http://127.0.0.1:1/v1",
        None,
    ]
    assert set(configured_secrets(urls, env)) == {
        "sk-one",
        "pg-pass",
        "s%40cret",
        "s@cret",
        "kv-pass",
    }
