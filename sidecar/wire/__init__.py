"""Domain values -> our wire shapes, shared by both edges (ACP over stdio, HTTP): the
session summary, transcript entries, SSE events, and the one error table.

Only the edges import this package; the core never does.
"""
