"""The HTTP edge: one token-protected loopback listener per live runtime."""
