"""`initialize`, answered without the heavy imports.

The sidecar starts serving before ACP's schema module, aiohttp and the provider SDKs
are imported: a client's first request is answered at once, and every other method
waits for those imports (see `sidecar/wiring.py`). So this reply is built by hand;
`tests/test_acp_interop.py` checks that the official SDK parses it unchanged.

Its `_meta` names what will not work before anything is tried: the store, the provider,
and the command sandbox (`sandboxProblem`, the same text session summaries carry). The
sandbox self-test (a bwrap run, 10-30 ms) starts as the sidecar begins to serve
(`sidecar/early_probe.py`); `initialize` waits for it, but never longer than
`SANDBOX_WAIT`: a self-test still running then is left out, and said by every
session's `sandboxProblem` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol.methods import EXTENSION_KEY, PROTOCOL_VERSION
from protocol.version import VERSION

SANDBOX_WAIT = 1.0  # seconds `initialize` may wait for the sandbox self-test's verdict


def client_capabilities(params: dict[str, Any]) -> dict[str, Any] | None:
    """The client's capabilities; malformed params are refused (ValidationError). Well-formed
    params are read as they are; anything else goes through the pydantic model, imported
    then (pydantic is not on the path to the first answer)."""
    version = params.get("protocolVersion")
    capabilities = params.get("clientCapabilities")
    if (
        type(version) is int
        and 0 <= version <= 65535
        and (capabilities is None or type(capabilities) is dict)
        and params.keys() <= {"protocolVersion", "clientCapabilities", "_meta"}
    ):
        return capabilities
    from sidecar.acp.initialize_model import InitializeParams

    return InitializeParams.model_validate(params).client_capabilities


@dataclass
class ClientOptions:
    """What the stdio client asked for at `initialize`. Extension notifications
    (`_session/state`, ...) go only to a client that asked: one that does not know them
    prints them as noise."""

    extension_notifications: bool = False

    def read(self, capabilities: dict[str, Any] | None) -> None:
        meta = (capabilities or {}).get("_meta")
        ours = meta.get(EXTENSION_KEY) if isinstance(meta, dict) else None
        self.extension_notifications = isinstance(ours, dict) and ours.get("notifications") is True


def initialize_result(
    store_problem: str | None,
    provider_problem: str | None = None,
    sandbox_problem: str | None = None,
    images: bool = False,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        # We speak exactly one version; ACP: answer with it, the client decides.
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            # Images: where the configured provider's API takes them (the builtin agent
            # sends them; an external agent takes them where it says so).
            "promptCapabilities": {"image": images, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True, "acp": False},
            "sessionCapabilities": {
                "list": {},
                "delete": {},
                "fork": {},
                "resume": {},
                "close": {},
            },
            "auth": {},
        },
        "authMethods": [],
        "agentInfo": {"name": "acp-session-host", "title": "Session host", "version": VERSION},
    }
    meta: dict[str, Any] = {}
    if store_problem is not None:
        meta["storeError"] = store_problem
    if provider_problem is not None:
        meta["providerProblem"] = provider_problem  # e.g. no API key: said before any prompt
    if sandbox_problem is not None:
        meta["sandboxProblem"] = sandbox_problem  # no command can run: bwrap cannot start
    if meta:
        result["_meta"] = meta
    return result


async def sandbox_verdict(probing: asyncio.Future[str | None] | None) -> str | None:
    """The self-test's problem (None: the sandbox works, or no verdict within
    SANDBOX_WAIT); the future is shared by every `initialize`, and never cancelled."""
    if probing is None:
        return None
    if not probing.done():
        await asyncio.wait({probing}, timeout=SANDBOX_WAIT)  # cancels nothing on timeout
    if not probing.done() or probing.cancelled() or probing.exception() is not None:
        return None
    return probing.result()


def initialize_handler(
    store_problem: Callable[[], str | None],
    client: ClientOptions,
    provider_problem: str | None = None,
    sandbox: asyncio.Future[str | None] | None = None,
    images: bool = False,
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """`sandbox`: the start-up's self-test, settled with its problem (None: it works)."""

    async def initialize(params: dict[str, Any]) -> dict[str, Any]:
        client.read(client_capabilities(params))  # refuses malformed params
        problem = await sandbox_verdict(sandbox)
        return initialize_result(store_problem(), provider_problem, problem, images)

    return initialize
