"""autobahn's debug lines, formatted only when one is written.

Every websocket connection daphne accepts runs autobahn's ``_connectionMade``, which lists
the protocol's settings and hands ``pprint.pformat`` of that list to a debug log call. The
argument is built whether or not debug logging is on: about 2 % of daphne's CPU under load
(docs/performance.md, a fifteenth round). The same text is still written when debug logging
is on; it is only made later.
"""

from __future__ import annotations

import pprint
from typing import Any


class DeferredPformat:
    """``pprint.pformat(value)``, computed when the log line is formatted."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __str__(self) -> str:
        return pprint.pformat(self.value)

    def __repr__(self) -> str:
        return str(self)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def defer_autobahn_debug_formatting() -> None:
    from autobahn.websocket import protocol

    # A class where a function was: its instance stands in for the text until formatted.
    protocol.pformat = DeferredPformat  # type: ignore[assignment]
