"""ACP's SDK, loaded by the start-up thread while the event loop already answers (see
`sidecar/preload.py`): code that uses the SDK calls `ACP.ensure()` before its
`from acp... import`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator

from sidecar.preload import Preload


@contextlib.contextmanager
def _lean_models() -> Iterator[None]:
    """While `acp.schema` is imported (~250 models, most of the heavy half's time), two
    pydantic settings are changed for the models it defines, and put back at once:

    - no `use_attribute_docstrings`: it reads and parses each class's source to turn the
      docstrings under its fields into descriptions, text only a JSON schema would show
      (the sidecar validates and serializes with the models, nothing more);
    - `defer_build`: a model's validator and serializer are built when it is first used,
      so the dozen models a request needs are built then, not all of them at start.

    Only the loader thread defines models meanwhile (the light half imports no pydantic).
    Another pydantic without these internals: the models are built as they are."""
    try:
        from pydantic._internal import _config, _fields
    except ImportError:
        yield
        return
    docstrings = getattr(_fields, "extract_docstrings_from_cls", None)
    defaults = getattr(_config, "config_defaults", None)
    if docstrings is None or not isinstance(defaults, dict) or "defer_build" not in defaults:
        yield
        return
    _fields.extract_docstrings_from_cls = lambda cls, use_inspect=False: {}  # type: ignore[attr-defined]
    defer = defaults["defer_build"]
    defaults["defer_build"] = True
    try:
        yield
    finally:
        _fields.extract_docstrings_from_cls = docstrings  # type: ignore[attr-defined]
        defaults["defer_build"] = defer


def _import_acp() -> None:
    """ACP's SDK (`acp.schema`'s ~250 models, `acp.helpers`), lean: see _lean_models."""
    with _lean_models():
        importlib.import_module("acp.schema")
        importlib.import_module("acp.helpers")


# ACP's SDK: every ACP method but the first requests (`session/new`, `session/list`,
# `_session/status`) and every ACP update but text chunks and command lists need it.
ACP = Preload(_import_acp)
