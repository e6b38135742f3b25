"""daphne on uvloop: ``python -m chatsite.server.process.daphne`` takes daphne's own arguments.

daphne makes the asyncio loop Twisted runs on when ``daphne.server`` is first imported, so the
loop's kind has to be chosen before that, here, rather than in settings or ``asgi.py``.

daphne runs no system checks, and this is where the autobahn patch goes in: the checks of what
it and the sockets' back-pressure rely on (``chatsite.server.E001``, ``E006``) run here first,
and a daphne whose libraries changed under them stops with their messages.
"""

import sys

from chatsite.server.loop import make_uvloop_the_default
from chatsite.server.patches import autobahn
from chatsite.server.patches import daphne as daphne_patch

make_uvloop_the_default()
_changed = [*autobahn.check(), *daphne_patch.check()]
if _changed:
    sys.exit("\n".join(f"{error.id}: {error.msg}\n    HINT: {error.hint}" for error in _changed))
autobahn.defer_autobahn_debug_formatting()

from daphne.cli import CommandLineInterface  # noqa: E402

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
