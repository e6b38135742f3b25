"""autobahn's per-connection debug text is made only if a debug line is written."""

from __future__ import annotations

import pprint
import string

from agents.autobahn_debug import DeferredPformat
from tests.fresh_python import assert_prints_ok

SETTINGS = [
    ("openHandshakeTimeout", 5, "WebSocketServerFactory"),
    ("utf8validateIncoming", True, "x"),
]


def test_the_deferred_text_is_pprints_when_formatted():
    deferred = DeferredPformat(SETTINGS)
    assert str(deferred) == pprint.pformat(SETTINGS)
    # As Twisted's logger formats an event: a string.Formatter over the format and its fields.
    formatted = string.Formatter().format("\n{attrs}", attrs=deferred)
    assert formatted == "\n" + pprint.pformat(SETTINGS)
    assert f"{deferred:>400}".strip() == pprint.pformat(SETTINGS)


def test_nothing_is_formatted_until_asked(monkeypatch):
    calls = []
    monkeypatch.setattr(pprint, "pformat", lambda value: calls.append(value) or "text")
    deferred = DeferredPformat(SETTINGS)
    assert calls == []
    assert str(deferred) == "text"
    assert calls == [SETTINGS]


def test_daphne_started_through_chatsite_daphne_defers_it():
    # In a process of its own, as daphne is started.
    check = (
        "import chatsite.daphne;"
        "from autobahn.websocket import protocol;"
        "from agents.autobahn_debug import DeferredPformat;"
        "assert protocol.pformat is DeferredPformat;"
        "print('ok')"
    )
    assert_prints_ok(check)
