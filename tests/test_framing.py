"""`encode_message` writes exactly what `json.dumps` would (one encoder made once, not one
per call), with the same errors, and a failed message never affects the next one."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import encode_message

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _reference(message: Any) -> bytes:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_a_message_is_encoded_as_json_dumps_encodes_it(message: Any) -> None:
    assert encode_message(message) == _reference(message)


def test_what_json_refuses_is_refused_the_same_way_and_leaves_nothing_behind() -> None:
    message: dict[str, Any] = {"result": {"value": math.nan}}
    with pytest.raises(ValueError, match="not JSON compliant"):
        encode_message(message)
    message["result"]["value"] = 1.5  # the same containers, now valid: no stale cycle mark
    assert encode_message(message) == b'{"result":{"value":1.5}}\n'
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        encode_message({"params": loop})
    del loop["self"]
    assert encode_message({"params": loop}) == b'{"params":{}}\n'
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_message({"x": object()})
    assert encode_message("\ud800") == b'"\\ud800"\n'  # a lone surrogate: ASCII escapes
