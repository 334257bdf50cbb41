"""Newline-delimited JSON framing shared by the sidecar and its clients."""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

# One message may be this large in either direction. 16 MiB messages are
# part of the contract; the margin covers JSON escaping of such a payload.
MAX_MESSAGE_BYTES: Final[int] = 64 * 1024 * 1024


# One encoder, made once: `json.dumps` with options builds an encoder per call, a good
# share of what a small notification costs (a turn sends several). CPython's C encoder
# when there is one (what `JSONEncoder.encode` builds per call), else the Python one.
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_MARKERS: Final[dict[int, Any]] = {}  # the containers being encoded (the cycle check)
_C_ENCODER: Final = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        _MARKERS, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
    )
)


def _dumps(message: Any) -> str:
    """What `json.dumps(message, ensure_ascii=False, separators=(",", ":"),
    allow_nan=False)` gives, and the same errors."""
    if _C_ENCODER is None or isinstance(message, str):
        return _ENCODER.encode(message)
    try:
        return "".join(_C_ENCODER(message, 0))
    except BaseException:
        _MARKERS.clear()  # a failed encode leaves its containers marked
        raise


def encode_message(message: Any) -> bytes:
    """One JSON value on one line. JSON escapes newlines inside strings.

    Text that is not valid Unicode (a lone surrogate, which JSON input may carry as
    "\\ud800") cannot be UTF-8 encoded; such a message is sent with ASCII escapes,
    exactly as it arrived, instead of failing.
    Numbers that are not JSON (NaN, Infinity) raise ValueError: nothing non-JSON goes out.
    """
    text = _dumps(message)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        ascii_text = json.dumps(message, separators=(",", ":"), allow_nan=False)
        return ascii_text.encode("ascii") + b"\n"
