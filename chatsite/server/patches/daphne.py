"""What the sockets' back-pressure takes from daphne and Twisted.

``SocketDrain.attach`` (``chatsite/server/sockets/drain.py``) finds daphne's protocol in the
``send`` it is given (a ``partial`` of ``Server.handle_reply`` bound to the protocol) and
registers itself as the streaming producer of the protocol's Twisted transport. Under any
other ``send`` it waits for nothing, as it must under the test client; so a daphne that built
``send`` another way would turn the back-pressure off without a word. This check
(``chatsite.server.E006``) says so at start-up instead.
"""

from __future__ import annotations

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target(
        "daphne.server",
        "Server.create_application",
        parameters=("self", "protocol", "scope"),
        source_contains=("send=partial(self.handle_reply, protocol)",),
    ),
    Target("daphne.server", "Server.handle_reply", parameters=("self", "protocol", "message")),
    # The transport's producer interface the drain registers on.
    Target(
        "twisted.internet.abstract",
        "FileDescriptor.registerProducer",
        parameters=("self", "producer", "streaming"),
    ),
    Target("twisted.internet.abstract", "FileDescriptor.unregisterProducer", parameters=("self",)),
    Target("twisted.internet.abstract", "FileDescriptor.producer"),
    Target("twisted.internet.abstract", "FileDescriptor.streamingProducer"),
)

check = check_for(
    check_id="chatsite.server.E006",
    library="daphne",
    patch="chatsite/server/sockets/drain.py",
    targets=TARGETS,
)
