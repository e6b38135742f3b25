"""autobahn's debug text (per connection, per frame) is made only if a debug line is written."""

from __future__ import annotations

import pprint
import string

from chatsite.server.patches.autobahn import DeferredText, deferring
from tests.fresh_python import assert_prints_ok

SETTINGS = [
    ("openHandshakeTimeout", 5, "WebSocketServerFactory"),
    ("utf8validateIncoming", True, "x"),
]


def test_the_deferred_text_is_what_it_stands_for_when_formatted():
    deferred = deferring(pprint.pformat)(SETTINGS)
    assert isinstance(deferred, DeferredText)
    assert str(deferred) == pprint.pformat(SETTINGS)
    assert repr(deferred) == pprint.pformat(SETTINGS)
    # As Twisted's logger formats an event: a string.Formatter over the format and its fields.
    formatted = string.Formatter().format("\n{attrs}", attrs=deferred)
    assert formatted == "\n" + pprint.pformat(SETTINGS)
    assert f"{deferred:>400}".strip() == pprint.pformat(SETTINGS)


def test_nothing_is_made_until_asked():
    calls = []
    deferred = deferring(lambda value: calls.append(value) or "text")(SETTINGS)
    assert calls == []
    assert str(deferred) == "text"
    assert calls == [SETTINGS]


def test_daphne_started_through_chatsite_daphne_defers_it():
    # In a process of its own, as daphne is started: the names autobahn's log calls use
    # stand in for the same text, and Timings still prints as a string.
    check = """
import pprint
import chatsite.server.process.daphne
from autobahn import util
from autobahn.twisted import websocket as twisted_websocket
from autobahn.websocket import protocol
from chatsite.server.patches import autobahn as autobahn_patch
from chatsite.server.patches.autobahn import DeferredText

calls = []
real = util.hltype
util.hltype = lambda obj: calls.append(obj) or real(obj)
# Again, around the counting hltype.
autobahn_patch.defer_autobahn_debug_formatting()
send = protocol.WebSocketProtocol.sendData
for module in (protocol, twisted_websocket):
    text = module.hltype(send)
    assert isinstance(text, DeferredText) and calls == []
    assert str(text) == real(send) and calls == [send], str(text)
    calls.clear()
    assert f"{module.hlval(12)}" == util.hlval(12)
assert str(protocol.pformat(["a"])) == pprint.pformat(["a"])
timings = protocol.Timings()
timings.track("x")
assert str(timings) == pprint.pformat(timings._timings), str(timings)
print("ok")
"""
    assert_prints_ok(check)


def test_daphne_does_not_start_on_an_autobahn_that_changed_under_the_patch():
    # daphne runs no system checks: its launcher runs the patch's own (chatsite.server.E001)
    # before patching, and stops with its message.
    check = """
from autobahn.websocket import protocol
del protocol.pformat
try:
    import chatsite.server.process.daphne
except SystemExit as stopped:
    message = str(stopped.code)
    assert "chatsite.server.E001" in message and "pformat is gone" in message, message
    assert "requirements.txt" in message, message
    print("ok")
"""
    assert_prints_ok(check)
