"""Desktop main process: a pywebview window over the sidecar (next issue)."""
