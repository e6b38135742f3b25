"""/api/conversations/<id>/export/?format=md|json: a download of the whole conversation."""

from __future__ import annotations

import json

import pytest

from agents.models import AgentRun
from agents.react.types import ActionStep, FinalAnswerStep, ObservationStep, ThoughtStep
from agents.runs.store import run_finish, run_record_step
from agents.services.conversations import message_send

pytestmark = pytest.mark.django_db


@pytest.fixture
def answered(user, conversation):
    """A conversation with one question, the steps of its run, and the answer."""
    sent = message_send(conversation=conversation, user=user, content="What is 6*7?")
    AgentRun.objects.filter(pk=sent.run.pk).update(status=AgentRun.Status.RUNNING)
    run = AgentRun.objects.select_related("conversation").get(pk=sent.run.pk)
    for step in (
        ThoughtStep(text="I should multiply."),
        ActionStep(tool="calculator", tool_input="6*7", call_id="c1"),
        ObservationStep(tool="calculator", call_id="c1", text="42"),
    ):
        run_record_step(run=run, step=step)
    run_finish(run=run, step=FinalAnswerStep(text="It is **42**."))
    return conversation


def export(client, user, conversation_id: int, fmt: str | None):
    client.force_login(user)
    query = {} if fmt is None else {"format": fmt}
    return client.get(f"/api/conversations/{conversation_id}/export/", query)


def test_json_export(client, user, answered):
    response = export(client, user, answered.pk, "json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"] == 'attachment; filename="alices-plans.json"'
    data = json.loads(response.content)
    assert data["id"] == answered.pk
    assert data["title"] == "Alice's plans"
    question, answer = data["messages"]
    assert (question["role"], question["content"]) == ("user", "What is 6*7?")
    assert (answer["role"], answer["content"]) == ("assistant", "It is **42**.")
    assert [step["kind"] for step in answer["steps"]] == ["thought", "action", "observation"]
    assert answer["steps"][1]["tool"] == "calculator"
    assert set(answer["usage"]) == {"prompt_tokens", "completion_tokens", "duration_ms"}


def test_markdown_export(client, user, answered):
    response = export(client, user, answered.pk, "md")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="alices-plans.md"'
    text = response.content.decode()
    assert text.startswith("# Alice's plans\n")
    assert text.index("## You") < text.index("What is 6*7?") < text.index("## Assistant")
    assert "> **Thought:** I should multiply." in text
    assert "> **Action:** `calculator` — 6*7" in text
    assert "> **Observation:** 42" in text
    assert text.index("> **Observation:** 42") < text.index("It is **42**.")


def test_markdown_is_the_default(client, user, answered):
    response = export(client, user, answered.pk, None)
    assert response["Content-Disposition"].endswith('.md"')


def test_unknown_format_is_a_clear_400(client, user, answered):
    response = export(client, user, answered.pk, "pdf")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["fields"] == {"format": ["Choose one of: md, json."]}


def test_untitled_conversation_gets_a_filename_from_its_id(client, user):
    from agents.services.conversations import conversation_create

    untitled = conversation_create(owner=user)
    response = export(client, user, untitled.pk, "json")
    assert response["Content-Disposition"] == (
        f'attachment; filename="conversation-{untitled.pk}.json"'
    )


def test_a_mode_switch_step_is_stored_and_exported(client, user, conversation):
    from agents.react.types import ModeSwitchStep

    sent = message_send(conversation=conversation, user=user, content="Try hard")
    AgentRun.objects.filter(pk=sent.run.pk).update(status=AgentRun.Status.RUNNING)
    run = AgentRun.objects.select_related("conversation").get(pk=sent.run.pk)
    run_record_step(
        run=run, step=ModeSwitchStep(from_mode="react", to_mode="tools", parse_errors=3)
    )
    run_finish(run=run, step=FinalAnswerStep(text="Done."))

    data = json.loads(export(client, user, conversation.pk, "json").content)
    (switch,) = data["messages"][1]["steps"]
    assert (switch["kind"], switch["to_mode"], switch["parse_errors"]) == (
        "mode_switch",
        "tools",
        3,
    )
    text = export(client, user, conversation.pk, "md").content.decode()
    assert "> **Mode:** react → tools (after 3 parse errors)" in text
