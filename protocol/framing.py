"""Newline-delimited JSON framing shared by the sidecar and its clients."""

from __future__ import annotations

import json
from typing import Any, Final

# One message may be this large in either direction. 16 MiB messages are
# part of the contract; the margin covers JSON escaping of such a payload.
MAX_MESSAGE_BYTES: Final[int] = 64 * 1024 * 1024


def encode_message(message: Any) -> bytes:
    """One JSON value on one line. JSON escapes newlines inside strings.

    Text that is not valid Unicode (a lone surrogate, which JSON input may carry as
    "\\ud800") cannot be UTF-8 encoded; such a message is sent with ASCII escapes,
    exactly as it arrived, instead of failing.
    Numbers that are not JSON (NaN, Infinity) raise ValueError: nothing non-JSON goes out.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        ascii_text = json.dumps(message, separators=(",", ":"), allow_nan=False)
        return ascii_text.encode("ascii") + b"\n"
