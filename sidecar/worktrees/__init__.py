"""Git worktrees for sessions: a session works on its own branch in its own directory,
then the user merges it back (merge, squash or rebase), discards it or exports it as a
patch series, after reviewing its diff file by file and hunk by hunk.

`git.py` runs git on the user's repository (a stable environment, a process group per
call), `hunks.py` parses `git diff` into files and hunks with stable ids, `manager.py`
is the operations. Nothing here knows about sessions: callers hand in paths and names.
"""
