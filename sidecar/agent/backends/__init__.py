"""Execution backends: how a tool's command runs (pipe now; a real PTY later)."""
