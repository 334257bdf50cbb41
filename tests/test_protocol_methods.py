"""Our method constants are ACP's own (protocol/methods.py writes them out to keep the
sidecar's start-up free of the acp package)."""

from acp.meta import AGENT_METHODS, CLIENT_METHODS
from acp.meta import PROTOCOL_VERSION as ACP_PROTOCOL_VERSION

from protocol.methods import ACP_METHODS, PROTOCOL_VERSION, Method


def test_acp_method_names_match_the_sdk():
    assert PROTOCOL_VERSION == ACP_PROTOCOL_VERSION
    assert set(ACP_METHODS) <= set(AGENT_METHODS.values())
    assert Method.SESSION_UPDATE == CLIENT_METHODS["session_update"]
    for name in ACP_METHODS:
        key = name.replace("/", "_")
        assert AGENT_METHODS[key] == name
