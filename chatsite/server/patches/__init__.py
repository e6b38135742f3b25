"""Every patch of a third-party library's internals, one module per library."""
