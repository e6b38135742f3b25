"""The line ``manage.py serve`` prints about the model: the same answer runs get."""

from __future__ import annotations

import pytest

from agents.management.commands.serve import _model_status


@pytest.fixture
def no_endpoint(settings):
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = settings.OPENAI_MODEL = ""
    return settings


@pytest.mark.django_db
def test_nothing_configured_says_the_demo_answers(no_endpoint):
    assert "offline demo model is answering" in _model_status()


@pytest.mark.django_db
def test_an_api_key_alone_means_the_openai_api_not_the_demo(no_endpoint):
    no_endpoint.OPENAI_API_KEY = "sk-test"
    no_endpoint.OPENAI_MODEL = "gpt-4o-mini"

    assert _model_status() == ("Model: https://api.openai.com/v1 (set in the admin or OPENAI_*).")


@pytest.mark.django_db
def test_the_settings_base_url_is_named(no_endpoint):
    no_endpoint.OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"

    assert _model_status() == "Model: http://127.0.0.1:11434/v1 (set in the admin or OPENAI_*)."
