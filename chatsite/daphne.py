"""daphne on uvloop: ``python -m chatsite.daphne`` takes daphne's own arguments.

daphne makes the asyncio loop Twisted runs on when ``daphne.server`` is first imported, so the
loop's kind has to be chosen before that, here, rather than in settings or ``asgi.py``.
"""

from agents.autobahn_debug import defer_autobahn_debug_formatting
from chatsite.server.loop import make_uvloop_the_default

make_uvloop_the_default()
defer_autobahn_debug_formatting()

from daphne.cli import CommandLineInterface  # noqa: E402

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
