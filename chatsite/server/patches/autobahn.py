"""autobahn's debug lines, formatted only when one is written.

autobahn builds the arguments of its debug log calls whether or not debug logging is on:
``pprint.pformat`` of the protocol's settings on every connection daphne accepts, and
``hltype``/``hlval`` (the caller's qualified name and the peer, coloured through click) on
every frame written and every read from a socket. That cost daphne CPU at every connection
and every frame (docs/performance.md#autobahn-debug). Each is replaced here by a stand-in that makes
the same text when a debug line is formatted; with debug logging off, nothing formats it.

The names are replaced in autobahn's modules, so a release that renames or drops one would
leave the stand-in unused without a word: ``check`` (``chatsite.server.E001``) says so.
"""

from __future__ import annotations

import pprint
from collections.abc import Callable
from typing import Any

from chatsite.server.patches.targets import Target, check_for

TARGETS = (
    # What the stand-ins call to make the text, with the arguments autobahn passes.
    Target("autobahn.util", "hltype", parameters=("obj",)),
    Target("autobahn.util", "hlval", parameters=("val", "color", "bold")),
    # The module-level names the log calls look up, which the patch replaces.
    Target("autobahn.websocket.protocol", "pformat"),
    Target("autobahn.websocket.protocol", "hltype"),
    Target("autobahn.websocket.protocol", "hlval"),
    Target("autobahn.twisted.websocket", "hltype"),
    Target("autobahn.twisted.websocket", "hlval"),
    Target("autobahn.websocket.protocol", "Timings.__str__", parameters=("self",)),
)


class DeferredText:
    """``make(value)``, computed when the log line is formatted."""

    __slots__ = ("make", "value")

    def __init__(self, make: Callable[[Any], str], value: Any) -> None:
        self.make = make
        self.value = value

    def __str__(self) -> str:
        return self.make(self.value)

    def __repr__(self) -> str:
        return str(self)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def deferring(make: Callable[[Any], str]) -> Callable[[Any], DeferredText]:
    """``make``, deferred: the returned function stands in for it in a log call's arguments."""

    def defer(value: Any) -> DeferredText:
        return DeferredText(make, value)

    return defer


def _as_text(method: Callable[[Any], Any]) -> Callable[[Any], str]:
    # Timings.__str__ returns what the module's pformat returns, and must return text.
    def text(self: Any) -> str:
        return str(method(self))

    return text


def defer_autobahn_debug_formatting() -> None:
    from autobahn import util
    from autobahn.twisted import websocket as twisted_websocket
    from autobahn.websocket import protocol

    # The modules' own names: every log call in them looks these up when it runs.
    protocol.pformat = deferring(pprint.pformat)  # type: ignore[assignment]
    protocol.Timings.__str__ = _as_text(protocol.Timings.__str__)  # type: ignore[method-assign]
    for module in (protocol, twisted_websocket):
        module.hltype = deferring(util.hltype)  # type: ignore[attr-defined]
        module.hlval = deferring(util.hlval)  # type: ignore[attr-defined]


check = check_for(
    check_id="chatsite.server.E001",
    library="autobahn",
    patch="chatsite/server/patches/autobahn.py",
    targets=TARGETS,
)
