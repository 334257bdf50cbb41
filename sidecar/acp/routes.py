"""The ACP edge's route table: every method the sidecar answers, the model its params are
read with, and the handler that takes them typed.

A handler never parses its params: the route does, once, before calling it, so a bad
param is refused the same way for every method (a pydantic error, mapped to -32602 by
`server.call_handler`). ACP's own models (`acp.schema`) are named, not imported: the
route loads ACP's SDK through `preload` and resolves the name on the method's first
call (session_params.py's readers load it likewise, in their `model_validate`). That
lazy loading is what keeps `session/new`, `session/list` and `_session/status` (read
with our models) answerable while ACP's schema is still loading (sidecar/app.py).

A model is anything with a pydantic-style `model_validate(params)` (`Model`): ours,
ACP's, or a small class that reads with ACP's model and keeps beside it what that model
does not (session_params.py: the client's `mcpServers` as sent). The dispatcher itself
(`server.RpcServer`) knows only the table's `Handler`s, built here by `handlers()`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from sidecar.acp import preload
from sidecar.acp.server import Handler


class Model(Protocol):
    """What a route reads params with (a pydantic model has this)."""

    @classmethod
    def model_validate(cls, obj: dict[str, Any], /) -> Self: ...


P = TypeVar("P", bound=Model)


class Params(Generic[P]):
    """How a method's params are read: a model class, or the name of one of ACP's
    (`acp.schema`, loaded on first use), with defaults for keys a client may leave out."""

    def __init__(self, model: type[P] | str, defaults: Mapping[str, Any] | None = None) -> None:
        self._model: type[P] | None = None if isinstance(model, str) else model
        self._name = model if isinstance(model, str) else model.__name__
        self._defaults = dict(defaults or {})

    @property
    def name(self) -> str:
        return self._name

    def model(self) -> type[P]:
        if self._model is None:
            preload.ACP.ensure()  # the SDK loads in one thread, never twice (preload's doc)
            self._model = cast(
                "type[P]", getattr(importlib.import_module("acp.schema"), self._name)
            )
        return self._model

    def parse(self, params: dict[str, Any]) -> P:
        params = {**self._defaults, **params} if self._defaults else params
        return self.model().model_validate(params)


@dataclass(frozen=True, slots=True)
class Route(Generic[P]):
    method: str
    params: Params[P]
    handler: Callable[[P], Awaitable[object]]

    def bind(self) -> Handler:
        """The handler as the dispatcher calls it: params as a JSON object in, parsed here."""
        parse, handler = self.params.parse, self.handler

        async def handle(params: dict[str, Any]) -> object:
            return wire(await handler(parse(params)))

        handle.__name__ = getattr(handler, "__name__", self.method)
        return handle


def wire(result: object) -> object:
    """A handler's typed result as JSON: ours (`protocol.models.WireModel.to_wire`: every
    field, nulls included, as the HTTP edge sends them too), ACP's as its SDK dumps them
    (unset optional fields left out), a dict as it is."""
    to_wire = getattr(result, "to_wire", None)
    if to_wire is not None:
        return to_wire()
    dump = getattr(result, "model_dump", None)
    if dump is not None:
        return dump(by_alias=True, exclude_none=True, mode="json")
    return result


def handlers(routes: Iterable[Route[Any]]) -> dict[str, Handler]:
    """method -> the dispatcher's handler, one per route (a method routed twice is a bug)."""
    table: dict[str, Handler] = {}
    for route in routes:
        if route.method in table:
            raise ValueError(f"method {route.method} has two routes")
        table[route.method] = route.bind()
    return table
