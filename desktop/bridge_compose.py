"""The js_api calls the composer needs beyond plain text: `@` completion
(`_session/files`), a stored image of the transcript (`_session/image`), and the checking
of what the page sends beside a prompt's text (`resource_link` mentions, `image` blocks).
A mixin of `desktop.bridge.Bridge`, kept apart so the bridge stays one screen per concern.

Arguments from the page are checked here, so a page bug gets a message naming the field
before anything reaches the sidecar (which checks an image's content itself).
"""

from __future__ import annotations

from typing import Any, Final

from protocol.methods import Method

MAX_QUERY: Final = 1024
MAX_LIMIT: Final = 500
MAX_ATTACHED: Final = 50  # blocks beside one prompt's text
MAX_IMAGE_DATA: Final = 8 * 1024 * 1024  # base64 characters (the sidecar's cap is 5 MiB bytes)
MAX_NAME: Final = 4096
MAX_RESOURCE_TEXT: Final = 1_000_000  # characters of an embedded resource's text
IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
CARRIERS: Final = ("image", "resource")  # blocks that are a message without text


class ComposeInput(ValueError):
    """The page sent an argument that is not valid (a page bug); the message names it."""


def _sid(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ComposeInput("sessionId must be non-empty text")
    return value


def _bad(message: str) -> dict[str, Any]:
    return {"error": {"code": "invalid_input", "title": "Invalid input", "message": message}}


def _link(block: dict[str, Any], where: str) -> dict[str, Any]:
    if set(block) != {"type", "name", "uri"}:
        raise ComposeInput(f"{where} (resource_link) must have exactly type, name and uri")
    name, uri = block["name"], block["uri"]
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ComposeInput(f"{where}.name must be non-empty text (a path)")
    if not isinstance(uri, str) or not uri.startswith("file://") or len(uri) > 2 * MAX_NAME:
        raise ComposeInput(f"{where}.uri must be a file:// URI")
    return {"type": "resource_link", "name": name, "uri": uri}


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    if set(block) != {"type", "mimeType", "data"}:
        raise ComposeInput(f"{where} (image) must have exactly type, mimeType and data")
    if block["mimeType"] not in IMAGE_TYPES:
        raise ComposeInput(f"{where}.mimeType must be one of {', '.join(IMAGE_TYPES)}")
    data = block["data"]
    if not isinstance(data, str) or not data or len(data) > MAX_IMAGE_DATA:
        raise ComposeInput(f"{where}.data must be non-empty base64 (at most 8 MB of text)")
    return {"type": "image", "mimeType": block["mimeType"], "data": data}


def _resource(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An embedded text resource: `{type, resource: {uri, text, mimeType?}}`, bounded."""
    resource = block.get("resource")
    if set(block) != {"type", "resource"} or not isinstance(resource, dict):
        raise ComposeInput(f"{where} (resource) must have exactly type and resource")
    if not {"uri", "text"} <= set(resource) <= {"uri", "text", "mimeType"}:
        raise ComposeInput(f"{where}.resource must have uri and text (and mimeType)")
    uri, text = resource["uri"], resource["text"]
    if not isinstance(uri, str) or not uri.strip() or len(uri) > 2 * MAX_NAME:
        raise ComposeInput(f"{where}.resource.uri must be a URI")
    if not isinstance(text, str) or len(text) > MAX_RESOURCE_TEXT:
        raise ComposeInput(f"{where}.resource.text must be text (at most 1 MB)")
    mime = resource.get("mimeType", "text/plain")
    if not isinstance(mime, str) or len(mime) > 200:
        raise ComposeInput(f"{where}.resource.mimeType must be a media type")
    return {"type": "resource", "resource": {"uri": uri, "text": text, "mimeType": mime}}


def attached(value: Any, name: str = "attachments") -> list[dict[str, Any]]:
    """The blocks the page sends beside a prompt's text, checked: `resource_link`
    (`{type, name, uri}`), `image` (`{type, mimeType, data}`) and an embedded text
    `resource` (`{type, resource: {uri, text, mimeType?}}`) only."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_ATTACHED:
        raise ComposeInput(f"{name} must be a list of at most {MAX_ATTACHED} blocks")
    blocks = []
    for i, block in enumerate(value):
        where = f"{name}[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "resource_link":
            blocks.append(_link(block, where))
        elif kind == "image":
            blocks.append(_image(block, where))
        elif kind == "resource":
            blocks.append(_resource(block, where))
        else:
            raise ComposeInput(f"{where}.type must be resource_link, image or resource")
    return blocks


def prompt_content(text: Any, attachments: Any, limit: int) -> list[dict[str, Any]]:
    """A prompt as ACP content: its text (when there is any) and the blocks beside it. A
    message of only an image (a screenshot pasted, then Enter) goes without text."""
    if not isinstance(text, str) or len(text) > limit:
        raise ComposeInput(f"prompt must be text (at most {limit} characters)")
    blocks = attached(attachments)
    if not text.strip() and not any(b["type"] in CARRIERS for b in blocks):
        raise ComposeInput("prompt must be non-empty text, or come with an image")
    return [{"type": "text", "text": text}] * bool(text.strip()) + blocks


class ComposeCalls:
    """`_session/files` for the `@` popup, `_session/image` for the transcript."""

    def _request(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError  # the Bridge's: one sidecar request, errors as data

    def files(self, session_id: str, query: str = "", limit: int = 30) -> Any:
        """Paths under the session's cwd matching `query` fuzzily, best first."""
        if not isinstance(query, str) or len(query) > MAX_QUERY or "\n" in query:
            return _bad(f"query must be text of one line (at most {MAX_QUERY} characters)")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return _bad(f"limit must be a whole number from 1 to {MAX_LIMIT}")
        try:
            params = {"sessionId": _sid(session_id), "query": query, "limit": limit}
        except ComposeInput as exc:
            return _bad(str(exc))
        return self._request(Method.FILES, params)

    def image(self, session_id: str, image_id: str) -> Any:
        """A stored image of a user entry (`{id, mimeType, data}`), to show it."""
        if not isinstance(image_id, str) or not image_id.strip() or len(image_id) > 128:
            return _bad("id must be non-empty text (an image's digest)")
        try:
            params = {"sessionId": _sid(session_id), "id": image_id}
        except ComposeInput as exc:
            return _bad(str(exc))
        return self._request(Method.IMAGE, params)
