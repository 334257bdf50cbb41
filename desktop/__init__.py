"""Desktop main process: a pywebview window (and a terminal client) over a supervised sidecar."""
