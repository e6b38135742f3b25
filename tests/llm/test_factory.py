"""Which model answers: a configured endpoint, the settings' endpoint, or the demo."""

from __future__ import annotations

import pytest

from agents.llm.client import OpenAIChatModel
from agents.llm.demo import DEMO_MODEL_NAME
from agents.llm.factory import chat_model_for, is_demo_model, model_name_for
from agents.models import ModelConfig
from agents.react.errors import ModelError

NO_ENDPOINT = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": ""}


@pytest.fixture
def no_endpoint(settings):
    for name, value in NO_ENDPOINT.items():
        setattr(settings, name, value)
    return settings


def test_nothing_configured_means_the_demo(no_endpoint):
    model = chat_model_for(None)

    assert model.model_name == DEMO_MODEL_NAME == model_name_for(None)
    assert is_demo_model(None)


@pytest.mark.django_db
def test_a_config_with_an_endpoint_uses_it_with_its_key(no_endpoint):
    config = ModelConfig(
        name="local",
        base_url="http://127.0.0.1:11434/v1",
        model="llama3",
        request_timeout_seconds=42,
        max_retries=1,
        default_temperature=0.3,
    )
    config.set_api_key("sk-secret")
    config.save()

    model = chat_model_for(config)

    assert isinstance(model, OpenAIChatModel)
    assert (model.base_url, model.model_name) == ("http://127.0.0.1:11434/v1", "llama3")
    assert model_name_for(config) == "llama3"
    assert (model.deadline_seconds, model.max_retries, model.default_temperature) == (42, 1, 0.3)
    assert model._client.api_key == "sk-secret"
    assert not is_demo_model(config)


def test_an_empty_config_falls_back_to_the_settings_endpoint(no_endpoint):
    no_endpoint.OPENAI_BASE_URL = "http://127.0.0.1:8000/v1"
    no_endpoint.OPENAI_MODEL = "qwen"
    config = ModelConfig(name="default", base_url="", model="demo")

    model = chat_model_for(config)

    assert (model.base_url, model.model_name) == ("http://127.0.0.1:8000/v1", "qwen")
    assert model_name_for(config) == "qwen"
    assert not is_demo_model(config)
    assert is_demo_model(config) == is_demo_model(None)


def test_settings_endpoint_without_a_model_name_is_a_clear_error(no_endpoint):
    no_endpoint.OPENAI_API_KEY = "sk-x"

    model = chat_model_for(None)

    with pytest.raises(ModelError, match="OPENAI_MODEL") as raised:
        model.complete([{"role": "user", "content": "hi"}])

    assert raised.value.code == "model_misconfigured"


@pytest.mark.parametrize(
    ("base_url", "settings_key"), [("", ""), ("", "sk-x"), ("http://127.0.0.1:1/v1", "")]
)
def test_a_config_is_demo_exactly_when_the_demo_model_answers(no_endpoint, base_url, settings_key):
    """An endpoint row without a base URL is not the demo once the settings name an endpoint,
    because the settings' endpoint then answers its runs."""
    no_endpoint.OPENAI_API_KEY = settings_key
    no_endpoint.OPENAI_MODEL = "qwen"
    config = ModelConfig(name="default", base_url=base_url, model="m")

    assert is_demo_model(config) == (base_url == "" and settings_key == "")
