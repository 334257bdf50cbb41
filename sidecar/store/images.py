"""The data dir's image store: images users sent with prompts, kept by the digest of
their bytes (one copy however often sent), private to the user like every file of ours.

What is kept is checked by its content, never by the name or type the client gave: the
bytes must decode (Pillow reads the header and verifies the file) as PNG, JPEG, GIF or
WebP, within `MAX_BYTES` and `MAX_PIXELS` (a decompression bomb is refused before it is
decoded). An SVG, a script, a PDF, anything else is refused naming `prompt`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
import os
import struct
import warnings
from pathlib import Path
from typing import Final

from sidecar.domain.errors import InvalidInput
from sidecar.domain.images import ImageRef

MAX_BYTES: Final = 5 * 1024 * 1024  # what both provider APIs take per image
MAX_PIXELS: Final = 40_000_000
_FORMATS: Final = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}


def _checked(data: bytes) -> tuple[str, int, int]:
    """(mime type, width, height) from the content; InvalidInput when it is no image."""
    # The sidecar's first image pays for the import, not its start.
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as opened:
                kind, (width, height) = opened.format, opened.size
                if width * height > MAX_PIXELS:
                    raise InvalidInput(
                        "prompt", f"the image is {width}x{height} pixels; at most {MAX_PIXELS}"
                    )
                opened.verify()
    except InvalidInput:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InvalidInput("prompt", "the image is too large to decode") from None
    except UnidentifiedImageError:  # its message names the buffer object, not the bytes
        raise InvalidInput(
            "prompt", "the image is not a PNG, JPEG, GIF or WebP (no image format recognised)"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as exc:
        # What Pillow raises for bytes that are not an image (or a truncated one).
        raise InvalidInput("prompt", f"the image is not a PNG, JPEG, GIF or WebP ({exc})") from None
    mime = _FORMATS.get(kind or "")
    if mime is None:
        raise InvalidInput("prompt", f"images must be PNG, JPEG, GIF or WebP, not {kind}")
    return mime, width, height


def _decoded(data_b64: str) -> bytes:
    try:
        data = base64.b64decode(data_b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("prompt", "an image's data is not base64") from None
    if len(data) > MAX_BYTES:
        raise InvalidInput(
            "prompt", f"the image is {len(data)} bytes; at most {MAX_BYTES} are taken"
        )
    return data


class ImageStore:
    def __init__(self, root: Path | None) -> None:
        self._root = root  # None: in memory, for this process only (tests, --store memory)
        self._memory: dict[str, bytes] = {}

    async def check(self, data_b64: str) -> None:
        """What `put` would refuse, refused without keeping anything: a message queued
        for a later turn is checked when it is queued, kept when its turn comes."""
        await asyncio.to_thread(_checked, _decoded(data_b64))

    async def put(self, data_b64: str) -> ImageRef:
        data = _decoded(data_b64)
        mime, width, height = await asyncio.to_thread(_checked, data)
        digest = hashlib.sha256(data).hexdigest()
        if self._root is None:
            self._memory[digest] = data
        else:
            await asyncio.to_thread(self._write, digest, data)
        return ImageRef(digest, mime, len(data), width, height)

    def _write(self, digest: str, data: bytes) -> None:
        assert self._root is not None
        path = self._root / digest
        if path.exists():
            return  # the same bytes, sent again
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(".part")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)

    async def read(self, digest: str) -> bytes:
        """The image's bytes; InvalidInput naming `id` when there is none such."""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise InvalidInput("id", "not an image id")
        if self._root is None:
            found = self._memory.get(digest)
            if found is None:
                raise InvalidInput("id", f"no image {digest}")
            return found
        try:
            return await asyncio.to_thread((self._root / digest).read_bytes)
        except FileNotFoundError:
            raise InvalidInput("id", f"no image {digest} in this data dir") from None

    async def load(self, digest: str) -> tuple[str, bytes]:
        """(mime type, bytes) of a kept image, its type read from its content again."""
        data = await self.read(digest)
        mime, _, _ = await asyncio.to_thread(_checked, data)
        return mime, data
