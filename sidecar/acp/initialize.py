"""`initialize`, answered without the heavy imports.

The sidecar starts serving before ACP's schema module, aiohttp and the provider SDKs
are imported: a client's first request is answered at once, and every other method
waits for those imports (see `sidecar/wiring.py`). So this reply is built by hand;
`tests/test_acp_interop.py` checks that the official SDK parses it unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol.methods import EXTENSION_KEY, PROTOCOL_VERSION
from protocol.version import VERSION


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
    store_problem: str | None, provider_problem: str | None = None
) -> dict[str, Any]:
    result: dict[str, Any] = {
        # We speak exactly one version; ACP: answer with it, the client decides.
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
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
    if meta:
        result["_meta"] = meta
    return result


def initialize_handler(
    store_problem: Callable[[], str | None],
    client: ClientOptions,
    provider_problem: str | None = None,
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    async def initialize(params: dict[str, Any]) -> dict[str, Any]:
        client.read(client_capabilities(params))  # refuses malformed params
        return initialize_result(store_problem(), provider_problem)

    return initialize
