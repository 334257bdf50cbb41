"""The core: the session manager (control plane), runtimes (one generation each), turns,
leases and the event streams. Imports the domain, the store and the agent; never an
edge (the HTTP listener reaches a runtime only through the factory it is given).
"""
