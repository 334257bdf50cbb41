"""A server that never answers, ignores stdin EOF and SIGTERM: only SIGKILL stops it."""

import signal
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(1)
