"""Configured tools run by the real engine, against the scripted OpenAI-compatible server.

The model only ever sees redacted text: the test reads every request the server received.
"""

from __future__ import annotations

import itertools
import json
import threading

import pytest
from django.db import connection

from agents.llm.client import OpenAIChatModel
from agents.llm.scripted import Reply, ScriptedServer, ToolCalls
from agents.models import Conversation, Message, ToolConfig
from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.types import FinalAnswerStep, ObservationStep
from agents.tools.base import REDACTED
from agents.tools.builtin.conversation_search import ConversationSearch
from agents.tools.registry import build_tools

TOKEN = "tok-engine-5e4d3c2b1a"
_models = itertools.count(1)


@pytest.fixture(scope="module")
def scripted():
    with ScriptedServer() as server:
        yield server


def _executor(scripted, model: str, tools, mode: str = "react") -> AgentExecutor:
    chat_model = OpenAIChatModel(
        base_url=scripted.base_url, api_key="test-key", model=model, deadline_seconds=10
    )
    return AgentExecutor(
        model=chat_model, tools=tools, prompt=PromptConfig(mode=mode), config=AgentConfig()
    )


@pytest.mark.django_db
def test_react_run_uses_the_calculator(scripted, user):
    model = f"tools-engine-{next(_models)}"
    scripted.script(
        model,
        [
            Reply("Thought: I should compute it.\nAction: maths\nAction Input: (28+10)*3"),
            Reply("Thought: I know it now.\nFinal Answer: 114"),
        ],
    )
    maths = ToolConfig.objects.create(name="maths", kind="calculator", description="Arithmetic.")
    tools = build_tools([maths], user=user)
    steps = list(_executor(scripted, model, tools).run("what is (28+10)*3?"))
    observations = [step for step in steps if isinstance(step, ObservationStep)]
    assert [(o.tool, o.text, o.is_error) for o in observations] == [("maths", "114", False)]
    assert isinstance(steps[-1], FinalAnswerStep)
    assert steps[-1].text == "114"


@pytest.mark.django_db
def test_secret_reaches_the_api_but_never_the_model(scripted, server, user):
    config = ToolConfig(
        name="echo_api",
        kind="http_request",
        description="Calls the echo API.",
        config={
            "url_template": f"http://127.0.0.1:{server.server_address[1]}/echo",
            "headers": {"Authorization": "Bearer {secret:API_TOKEN}"},
            "allow_networks": ["127.0.0.0/8"],
        },
    )
    config.set_secrets({"API_TOKEN": TOKEN})
    config.save()
    model = f"tools-engine-{next(_models)}"
    scripted.script(
        model,
        [
            ToolCalls([("echo_api", {})], text="Let me call the API."),
            Reply("The API answered."),
        ],
    )
    tools = build_tools([config], user=user)
    steps = list(_executor(scripted, model, tools, mode="tools").run("call the api"))
    (observation,) = [step for step in steps if isinstance(step, ObservationStep)]
    assert f"Bearer {REDACTED}" in observation.text
    assert server.received[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    sent_to_model = json.dumps(scripted.requests(model))
    assert REDACTED in sent_to_model  # the observation did reach the model...
    assert TOKEN not in sent_to_model  # ...without the secret
    assert TOKEN not in json.dumps([repr(step) for step in steps])


@pytest.mark.django_db(transaction=True)
def test_database_tools_release_their_thread_connection(user):
    conversation = Conversation.objects.create(owner=user, title="Garden")
    Message.objects.create(conversation=conversation, role="user", content="Plant tulips now?")
    outcome: dict[str, object] = {}

    def in_tool_thread() -> None:  # what the executor does for every tool call
        outcome["text"] = ConversationSearch(user=user).run(query="tulips")
        outcome["closed"] = connection.connection is None

    thread = threading.Thread(target=in_tool_thread)
    thread.start()
    thread.join()
    assert "Plant tulips now?" in str(outcome["text"])
    assert outcome["closed"] is True
