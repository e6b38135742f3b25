"""Back-pressure for websockets: knowing when a client has read what it was sent.

ASGI's ``send`` returns as soon as daphne has buffered a message, so a client that never
reads makes daphne buffer without end. daphne runs on Twisted, whose transports tell a
registered *streaming producer* to pause when more than their buffer size is waiting to be
written and to resume once it has all gone out. ``SocketDrainMiddleware`` registers a
``SocketDrain`` on the transport behind daphne's ``send`` and puts it in the scope; the
consumer waits on it between replay pages (agents/consumers.py). Under a server without
such a transport (the test client, another ASGI server) the scope holds None and nothing
waits; so that daphne still gives one is checked at start-up (``chatsite.server.E006``,
``chatsite/server/patches/daphne.py``), not left to that silence.
"""

from __future__ import annotations

import asyncio
from typing import Any

SCOPE_KEY = "socket_drain"


class SocketDrain:
    """Twisted's producer interface; ``drained`` is set while nothing is waiting to be sent.

    A transport has one producer. daphne's HTTP channel registered itself on the connection
    before the websocket upgrade; it stays informed: every call is passed on to it.
    """

    def __init__(self, previous: Any = None) -> None:
        self.drained = asyncio.Event()
        self.drained.set()
        self.previous = previous

    # Twisted's names: the transport pauses its producer when its buffer is full, resumes it
    # once the buffer is written out, and stops it when the connection is gone.
    def pauseProducing(self) -> None:
        self.drained.clear()
        self._pass_on("pauseProducing")

    def resumeProducing(self) -> None:
        self.drained.set()
        self._pass_on("resumeProducing")

    def stopProducing(self) -> None:
        self.drained.set()
        self._pass_on("stopProducing")

    def _pass_on(self, name: str) -> None:
        method = getattr(self.previous, name, None)
        if method is not None:
            method()

    @classmethod
    def attach(cls, send: Any) -> SocketDrain | None:
        """Register on the transport of daphne's ``send``, a partial bound to its protocol."""
        bound = getattr(send, "args", ())
        protocol = next((arg for arg in bound if hasattr(arg, "transport")), None)
        transport: Any = getattr(protocol, "transport", None)
        if not hasattr(transport, "registerProducer"):
            return None
        previous = getattr(transport, "producer", None)
        if previous is not None:
            if not getattr(transport, "streamingProducer", False):
                return None  # a pull producer would need to be driven; leave it alone
            transport.unregisterProducer()
        drain = cls(previous)
        transport.registerProducer(drain, True)
        return drain


class SocketDrainMiddleware:
    """Outermost websocket middleware: it alone sees the server's own ``send``."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            scope = {**scope, SCOPE_KEY: SocketDrain.attach(send)}
        return await self.application(scope, receive, send)
