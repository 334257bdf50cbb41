"""The window's own preferences, kept in the user's config dir (not the sessions
database): the colour theme, the recently used working directories, whether to show
system notifications."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import platformdirs

from desktop.mcp_servers import APP

log = logging.getLogger(__name__)

THEMES = ("system", "light", "dark")
MAX_RECENT = 8


def default_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP))


class Settings:
    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or default_dir()) / "window.json"
        self._lock = threading.Lock()
        self._data = self._load()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            theme = self._data.get("theme")
            recent = self._data.get("recentFolders")
            return {
                "theme": theme if theme in THEMES else "system",
                "recentFolders": [r for r in recent if isinstance(r, str)][:MAX_RECENT]
                if isinstance(recent, list)
                else [],
                "notifications": self._data.get("notifications") is not False,
            }

    @property
    def notifications(self) -> bool:
        """Whether a turn that ends, fails or waits for approval unseen is notified (on
        unless turned off)."""
        with self._lock:
            return self._data.get("notifications") is not False

    def set_notifications(self, on: bool) -> dict[str, Any]:
        if not isinstance(on, bool):
            raise ValueError("notifications must be true or false")
        with self._lock:
            self._data["notifications"] = on
            self._save()
        return self.snapshot()

    def set_theme(self, theme: str) -> dict[str, Any]:
        if theme not in THEMES:
            raise ValueError(f"theme must be one of {', '.join(THEMES)}")
        with self._lock:
            self._data["theme"] = theme
            self._save()
        return self.snapshot()

    def add_recent(self, folder: str) -> None:
        with self._lock:
            recent = [r for r in self._data.get("recentFolders") or [] if r != folder]
            self._data["recentFolders"] = [folder, *recent][:MAX_RECENT]
            self._save()

    def last_live(self, store: str) -> list[str]:
        """The sessions of `store` (a data dir) that were live when the app last ran."""
        with self._lock:
            by_store = self._data.get("lastLive")
            ids = by_store.get(store) if isinstance(by_store, dict) else None
            return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []

    def set_last_live(self, store: str, ids: list[str]) -> None:
        with self._lock:
            by_store = self._data.get("lastLive")
            if not isinstance(by_store, dict):
                by_store = self._data["lastLive"] = {}
            if by_store.get(store) == ids:
                return
            if ids:
                by_store[store] = ids
            else:
                by_store.pop(store, None)
            self._save()

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(self._data, out, indent=2)
            os.replace(tmp, self.path)
        except OSError as exc:  # a preference that cannot be saved is not worth an error
            log.warning("could not save %s: %s", self.path, exc)
