"""`initialize`'s params as a pydantic model: what refuses (or coerces) anything but the
plain well-formed params that `sidecar.acp.initialize` reads without it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class InitializeParams(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    protocol_version: int = Field(alias="protocolVersion", ge=0, le=65535)
    client_capabilities: dict[str, Any] | None = Field(default=None, alias="clientCapabilities")
