from tests.clock import minute_turn_clock  # noqa: F401 - a fixture, found by name
from tests.consumers.fixtures import (  # noqa: F401 - fixtures, found by name
    _transport_settings,
    conversation,
    other_conversation,
)
