"""Server plumbing, apart from the domain: the process loop, database connections and pools,
sockets, the heap, the supervisor, and every patch of a third-party library.

Nothing here imports ``agents``: the domain builds on this package, never the other way.
"""
