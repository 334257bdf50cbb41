"""Filesystem helpers every part below the core may use (the trash of deleted sessions'
directories). No session logic, no wire vocabulary: files and directories only."""
