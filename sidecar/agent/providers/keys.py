"""API keys and what to tell the user when a provider refuses or cannot be reached.

A keyless local server (Ollama, vLLM, llama.cpp) needs no key, and the SDKs insist on
one, so a placeholder is sent there; to a hosted API (OpenAI's, Anthropic's) it never
is: a missing key is a problem reported at start and on every prompt, before any
request leaves the machine. Light module: imported at start-up.
"""

from __future__ import annotations

import os
from typing import Final
from urllib.parse import urlsplit

PLACEHOLDER_API_KEY: Final = "not-needed"
HOSTED: Final = frozenset({"api.openai.com", "api.anthropic.com"})


def is_hosted(base_url: str | None, default: str) -> bool:
    host = urlsplit(base_url or default).hostname or ""
    return host in HOSTED or host.endswith((".openai.com", ".anthropic.com"))


def resolve_key(explicit: str | None, env_var: str) -> str | None:
    return explicit or os.environ.get(env_var) or None


def missing_key(key: str | None, base_url: str | None, default: str, env_var: str) -> str | None:
    """Why no request may be sent (None: a key is there, or the server needs none)."""
    if key or not is_hosted(base_url, default):
        return None
    host = urlsplit(base_url or default).hostname
    return (
        f"no API key for {host}: set {env_var} in the sidecar's environment "
        "(or use --base-url for a keyless local server)"
    )


def status_hint(status: int, env_var: str) -> str:
    """A next step for an HTTP refusal."""
    if status in (401, 403):
        return f" — check the API key ({env_var}) and its permissions"
    if status == 404:
        return " — check the model name (--model, or the model option) and --base-url"
    if status == 429:
        return " — rate limited or out of quota: wait, or check the account's plan"
    if status >= 500:
        return " — the provider failed: retry later"
    return ""


def connection_hint(base_url: str) -> str:
    return f" — is the server at {base_url} running and reachable? (--base-url sets it)"
