import pytest

from tests.consumers.fixtures import (  # noqa: F401 - fixtures, found by name
    _transport_settings,
)


@pytest.fixture(autouse=True)
def _plain_static_files(settings):
    # Pages name their static files; without a collected manifest, serve them unhashed.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
