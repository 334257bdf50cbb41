"""Execution backends: how a command runs (`pipe`: plain pipes; `pty`: a real pseudo-terminal)."""
