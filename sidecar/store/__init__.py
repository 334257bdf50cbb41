"""Session stores: one async interface; memory and SQLite implementations."""

from sidecar.store.base import INTERRUPTED_MARKER, SessionStore
from sidecar.store.memory import MemorySessionStore
from sidecar.store.sqlite import SqliteSessionStore

__all__ = ["INTERRUPTED_MARKER", "MemorySessionStore", "SessionStore", "SqliteSessionStore"]
