"""Checkpoints: the session's working tree, snapshotted into a shadow git repository.

`git.py` runs git against the shadow repository (never the user's own `.git`),
`shadow.py` is that repository (snapshots, refs, diffs, restores, crash recovery),
`history.py` works out from its refs what a rewind may touch and what it must not.
"""
