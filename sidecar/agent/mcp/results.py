"""Turning an MCP tool result into what the model reads: bounded text plus images.

Every failure (tool error, protocol error, timeout, dead server) is a result with
`is_error=True` and a sentence the model can act on, so the agent loop never has to handle
MCP exceptions. Output is capped because a single tool can return megabytes, and whatever is
returned lands in the model's context window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a result is converted: the SDK's types are heavy
    import mcp_types as types

MAX_IMAGES = 8
MAX_IMAGE_BYTES = 10 * 1024 * 1024
"""Total base64 characters of images kept per result; images beyond it are dropped."""
_MAX_MIRROR_PARSE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class McpCallResult:
    """The outcome of one tool call: `images` are `(mime_type, base64_data)` pairs."""

    text: str
    images: list[tuple[str, str]] = field(default_factory=list)
    is_error: bool = False


def error_result(message: str) -> McpCallResult:
    return McpCallResult(text=message, is_error=True)


def convert_result(result: types.CallToolResult, output_cap: int) -> McpCallResult:
    import mcp_types as types

    """Flatten content blocks into text and images, add structured content, cap the text."""
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    notes: list[str] = []
    image_bytes = 0

    def add_image(mime: str, data: str) -> None:
        nonlocal image_bytes
        if len(images) >= MAX_IMAGES or image_bytes + len(data) > MAX_IMAGE_BYTES:
            notes.append(f"[image ({mime}, {len(data)} base64 characters) dropped: too large]")
            return
        image_bytes += len(data)
        images.append((mime, data))

    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            add_image(block.mime_type, block.data)
        elif isinstance(block, types.AudioContent):
            notes.append(f"[audio ({block.mime_type}) omitted: audio is not supported]")
        elif isinstance(block, types.ResourceLink):
            label = f" ({block.name})" if block.name else ""
            notes.append(f"[resource link: {block.uri}{label}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                texts.append(f"[resource {resource.uri}]\n{resource.text}")
            elif (resource.mime_type or "").startswith("image/"):
                add_image(resource.mime_type or "image/png", resource.blob)
            else:
                notes.append(
                    f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'},"
                    f" {len(resource.blob)} base64 characters) omitted]"
                )
    structured = result.structured_content
    if structured is not None and not _already_in(structured, texts):
        texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(texts + notes)
    if not text and not images:
        text = "the tool reported an error without a message" if result.is_error else "(no output)"
    return McpCallResult(text=cap_text(text, output_cap), images=images, is_error=result.is_error)


def cap_text(text: str, cap: int) -> str:
    """Keep the head of `text` so the result, note included, fits in `cap` characters."""
    if len(text) <= cap:
        return text
    note = f"\n[output truncated: showing the first {{}} of {len(text)} characters]"
    keep = max(0, cap - len(note.format(cap)))
    return text[:keep] + note.format(keep)


def _already_in(structured: Any, texts: list[str]) -> bool:
    """Servers are told to mirror structured content as text; don't give the model both.

    FastMCP-style servers wrap a plain return value as `{"result": value}` and send the value
    itself as text, so that unwrapped value counts as a mirror too.
    """
    mirrors = [structured]
    if isinstance(structured, dict) and list(structured) == ["result"]:
        mirrors.append(structured["result"])
    for text in texts:
        if any(isinstance(mirror, str) and text == mirror for mirror in mirrors):
            return True
        if len(text) > _MAX_MIRROR_PARSE:
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if any(parsed == mirror for mirror in mirrors):
            return True
    return False
