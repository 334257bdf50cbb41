"""An image a user sent with a prompt, as the transcript refers to it: by the digest of
its bytes (the file in the data dir's image store), with what its content says it is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# What a model is given: the formats both provider APIs take.
MIME_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True, slots=True)
class ImageRef:
    digest: str  # sha256 of the bytes, hex: the image's id on the wire
    mime_type: str
    size: int  # bytes
    width: int
    height: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.digest,
            "mimeType": self.mime_type,
            "bytes": self.size,
            "width": self.width,
            "height": self.height,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ImageRef | None:
        """None for a stored reference this version cannot read (it is left out)."""
        digest, mime = raw.get("id"), raw.get("mimeType")
        numbers = [raw.get(k) for k in ("bytes", "width", "height")]
        if not isinstance(digest, str) or mime not in MIME_TYPES:
            return None
        if not all(type(n) is int for n in numbers):
            return None
        size, width, height = (int(n) for n in numbers)  # type: ignore[arg-type]
        return cls(digest, str(mime), size, width, height)
