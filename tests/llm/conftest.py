"""A scripted OpenAI-compatible server shared by the llm tests; each test scripts its own model."""

from __future__ import annotations

import itertools

import pytest

from agents.llm.client import OpenAIChatModel
from agents.llm.scripted import ScriptedServer

_model_names = itertools.count(1)


@pytest.fixture(scope="session")
def scripted_server():
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def model_name() -> str:
    return f"scripted-{next(_model_names)}"


@pytest.fixture
def make_model(scripted_server, model_name):
    def make(**options) -> OpenAIChatModel:
        settings = {"deadline_seconds": 10.0, "max_retries": 3}
        settings.update(options)
        return OpenAIChatModel(
            base_url=scripted_server.base_url, api_key="test-key", model=model_name, **settings
        )

    return make
