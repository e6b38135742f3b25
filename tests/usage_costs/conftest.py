"""Priced endpoints and agents on them, for the usage and budget tests."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.models import AgentProfile, ModelConfig


@pytest.fixture
def cheap_endpoint(db) -> ModelConfig:
    return ModelConfig.objects.create(
        name="cheap",
        base_url="http://127.0.0.1:9/v1",
        model="cheap-model",
        prompt_price_per_million=Decimal("0.1500"),
        completion_price_per_million=Decimal("0.6000"),
    )


@pytest.fixture
def dear_endpoint(db) -> ModelConfig:
    return ModelConfig.objects.create(
        name="dear",
        base_url="http://127.0.0.1:9/v1",
        model="dear-model",
        prompt_price_per_million=Decimal("2.5000"),
        completion_price_per_million=Decimal("10.0000"),
    )


@pytest.fixture
def cheap_agent(cheap_endpoint) -> AgentProfile:
    return AgentProfile.objects.create(name="Helper", slug="helper", model_config=cheap_endpoint)


@pytest.fixture
def dear_agent(dear_endpoint) -> AgentProfile:
    return AgentProfile.objects.create(name="Analyst", slug="analyst", model_config=dear_endpoint)


@pytest.fixture(autouse=True)
def _plain_http_and_unhashed_static(settings):
    """Pages through the test client: plain http, static files unhashed (nothing was
    collected); and sends not rate-limited, which these tests do not test (on SQLite a
    user's id comes back in the next test, with the last test's sends still counted)."""
    settings.CHAT_SENDS_PER_MINUTE = 10_000
    settings.SECURE_SSL_REDIRECT = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
