"""The agents a session can run besides our own loop: their definitions and catalog."""
