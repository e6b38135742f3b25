from tests.consumers.fixtures import (  # noqa: F401 - fixtures, found by name
    _transport_settings,
)
