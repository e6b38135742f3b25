"""What the conversation socket's own ``dispatch`` replaces in Channels.

``ConversationConsumer`` (``agents/consumers.py``) overrides Channels' ``dispatch`` and
``websocket_disconnect`` so that a socket's messages skip the hop to the one thread-sensitive
executor that Channels' versions make to close stale database connections. The override has
to keep Channels' contract: ``dispatch(message)`` is what ``AsyncConsumer.__call__`` hands
each message to, and handlers are found by ``get_handler_name``. This check
(``chatsite.server.E007``) fails at start-up if Channels changes that.
"""

from __future__ import annotations

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    Target(
        "channels.consumer",
        "AsyncConsumer.dispatch",
        parameters=("self", "message"),
        source_contains=("get_handler_name(message)",),
    ),
    Target(
        "channels.consumer",
        "AsyncConsumer.__call__",
        parameters=("self", "scope", "receive", "send"),
        source_contains=("self.dispatch",),
    ),
    Target("channels.consumer", "get_handler_name", parameters=("message",)),
    Target(
        "channels.generic.websocket",
        "AsyncWebsocketConsumer.websocket_disconnect",
        parameters=("self", "message"),
    ),
)

check = check_for(
    check_id="chatsite.server.E007",
    library="channels",
    patch="agents/consumers.py",
    targets=TARGETS,
)
