"""Every patch of a third-party library's internals, one module per library, each with the
system check that fails at start-up when what it replaces or relies on has changed.

A module here names its ``TARGETS``: the attributes of the library the patch (or, for
``openai``, ``mcp``, ``daphne`` and ``channels``, code elsewhere) depends on, with the shape
it was written for. ``targets.check_for`` turns them into a Django system check with an id of
its own, registered by ``chatsite.server.apps``; ``manage.py check``, ``migrate`` and ``serve``
run it. requirements.txt pins each library at the version the targets describe.
"""
