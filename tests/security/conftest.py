from tests.consumers.fixtures import (  # noqa: F401 - fixtures, found by name
    _no_leftover_tasks,
    _transport_settings,
    conversation,
    other_conversation,
)
