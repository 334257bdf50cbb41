"""The params of `session/load`, `session/resume` and `session/fork`: ACP's own models,
plus what they do not keep as the client sent it.

ACP's models drop MCP server entries they cannot read and reshape the rest, while the
store keeps the list as the client sent it (env and headers included: the store is
private) and our MCP parser names what is wrong in it. They also replace a malformed
`_meta` with none, and read a `field_meta` key as `_meta`; ours is read from `_meta`
only, and refused when it is not an object. So each request here is ACP's model and
those values side by side. Each class reads its params with `model_validate`, the
one thing a route's `Params` calls (routes.py); ACP's SDK is loaded there, on the
method's first call, never at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sidecar.acp import preload
from sidecar.domain.errors import InvalidInput

if TYPE_CHECKING:
    from acp.schema import ForkSessionRequest, LoadSessionRequest, ResumeSessionRequest

# The servers as sent: a list (ACP's model refused anything else) or None (not sent).
SentServers = list[object] | None


def _sent_servers(params: Mapping[str, object]) -> SentServers:
    servers = params.get("mcpServers")
    return servers if isinstance(servers, list) else None


def _sent_meta(params: Mapping[str, object]) -> Mapping[str, object]:
    meta = params.get("_meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise InvalidInput("_meta", "must be an object")
    return meta


@dataclass(frozen=True, slots=True)
class LoadParams:
    acp: LoadSessionRequest
    mcp_servers: SentServers

    @classmethod
    def model_validate(cls, params: Mapping[str, object]) -> LoadParams:
        preload.ACP.ensure()
        from acp.schema import LoadSessionRequest

        request = LoadSessionRequest.model_validate({"mcpServers": [], **params})
        return cls(request, _sent_servers(params))


@dataclass(frozen=True, slots=True)
class ResumeParams:
    acp: ResumeSessionRequest
    mcp_servers: SentServers

    @classmethod
    def model_validate(cls, params: Mapping[str, object]) -> ResumeParams:
        preload.ACP.ensure()
        from acp.schema import ResumeSessionRequest

        return cls(ResumeSessionRequest.model_validate(params), _sent_servers(params))


@dataclass(frozen=True, slots=True)
class ForkParams:
    """Also `_meta.turn`: fork before that turn (None: the whole session)."""

    acp: ForkSessionRequest
    mcp_servers: SentServers
    before_turn: int | None

    @classmethod
    def model_validate(cls, params: Mapping[str, object]) -> ForkParams:
        preload.ACP.ensure()
        from acp.schema import ForkSessionRequest

        request = ForkSessionRequest.model_validate({"mcpServers": [], **params})
        turn = _sent_meta(params).get("turn")
        if turn is not None and (type(turn) is not int or turn < 1):
            raise InvalidInput("_meta.turn", "must be a turn number (1 or more)")
        return cls(request, _sent_servers(params), turn)
