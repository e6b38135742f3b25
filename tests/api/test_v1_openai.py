"""The official ``openai`` SDK against chatsite: a real daphne and celery worker, an API key,
and the scripted model behind the agent (tests/processes.py). The tool that needs approval
files tickets on a local server that counts what reaches it (tests/counting_server.py)."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest

from agents.llm.scripted import Fail, Reply
from agents.models import AgentRun, Conversation, Message
from agents.services.api_keys import api_key_create, api_key_revoke
from agents.services.conversations import conversation_create, message_send
from tests.counting_server import CountingServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FOUR = Reply("Thought: Two and two make four.\nFinal Answer: It is **4**.")
AND_THEN = Reply("Thought: Add two more.\nFinal Answer: Then it is 6.")
ALL_DONE = Reply("Thought: That is done.\nFinal Answer: All done.")


def _model_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _sdk(live_stack, secret: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=live_stack.daphne.url + "/v1", api_key=secret, max_retries=0)


def _key(user, *scopes: str) -> str:
    return api_key_create(owner=user, name="tests", scopes=scopes or ("read", "chat")).secret


@pytest.fixture
def agent(live_stack):
    """A profile with the scripted model; script it with ``live_stack.model.script``."""
    return live_stack.profile(_model_name("v1"))


def test_the_sdk_lists_the_agents_the_owner_may_use(live_stack, user, agent):
    models = _sdk(live_stack, _key(user, "read")).models.list()

    assert agent.slug in [model.id for model in models.data]


def test_an_answer_then_a_streamed_answer_in_the_same_conversation(live_stack, user, agent):
    live_stack.model.script(agent.slug, [FOUR, AND_THEN])
    sdk = _sdk(live_stack, _key(user))

    first = sdk.chat.completions.create(
        model=agent.slug, messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    assert first.choices[0].message.content == "It is **4**."
    assert first.choices[0].finish_reason == "stop"
    conversation_id = first.model_extra["conversation_id"]
    steps = first.model_extra["chatsite"]["steps"]
    assert [step["kind"] for step in steps] == ["thought"]
    assert first.usage.total_tokens > 0

    stream = sdk.chat.completions.create(
        model=agent.slug,
        messages=[{"role": "user", "content": "And two more?"}],
        stream=True,
        extra_body={"conversation_id": conversation_id},
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert text == "Then it is 6."
    assert chunks[-1].choices[0].finish_reason == "stop"
    events = [chunk.model_extra["chatsite"].get("event") for chunk in chunks]
    kinds = [event["type"] for event in events if event]
    assert kinds[0] == "message.created"
    assert kinds[-1] == "run.finished"
    assert "step" in kinds

    # One conversation of two turns; the model saw the first turn when asked the second.
    conversation = Conversation.objects.get()
    assert conversation.pk == conversation_id
    questions = Message.objects.filter(conversation=conversation, role="user")
    assert [m.content for m in questions.order_by("pk")] == ["What is 2 + 2?", "And two more?"]
    second_prompt = json.dumps(live_stack.model.requests(agent.slug)[-1]["messages"])
    assert "What is 2 + 2?" in second_prompt
    assert "It is **4**." in second_prompt


def test_earlier_turns_without_a_conversation_are_refused_and_nothing_is_written(
    live_stack, user, agent
):
    sdk = _sdk(live_stack, _key(user))

    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(
            model=agent.slug,
            messages=[
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi"},
                {"role": "user", "content": "What is 2 + 2?"},
            ],
        )
    assert refused.value.body["code"] == "history_not_supported"
    assert not Conversation.objects.exists()


@pytest.fixture
def tickets():
    server = CountingServer()
    yield server
    server.close()


def test_a_paused_run_comes_back_paused_and_runs_the_call_once_approved(live_stack, user, tickets):
    tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
    tickets.tool(tool, needs_approval=True)
    agent = live_stack.profile(_model_name("v1-approval"), tools=(tool,))
    file_it = Reply(
        f'Thought: I will file it.\nAction: {tool}\nAction Input: {{"title": "Broken printer"}}'
    )
    live_stack.model.script(agent.slug, [file_it, ALL_DONE])
    secret = _key(user)

    paused = _sdk(live_stack, secret).chat.completions.create(
        model=agent.slug, messages=[{"role": "user", "content": "File a ticket, please."}]
    )

    assert paused.choices[0].finish_reason == "approval_required"
    extension = paused.model_extra["chatsite"]
    assert extension["status"] == "awaiting_approval"
    (pending,) = extension["pending_approvals"]
    assert pending["tool"] == tool
    assert "Broken printer" in str(pending["tool_input"])
    assert tickets.calls == 0

    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(headers=headers, timeout=60) as http:
        decided = http.post(pending["decide_url"], json={"approve": True})
        assert decided.status_code == 200, decided.text
        assert decided.json()["approval"]["decision"] == "approved"
        # The run's events, from the start of the log, to its end.
        frames = []
        with http.stream("GET", extension["run_url"] + "/events") as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            for line in events.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[len("data: ") :]))
        run = http.get(extension["run_url"]).json()

    types = [frame["type"] for frame in frames]
    assert types[0] == "message.created"
    assert "approval.requested" in types
    assert "approval.decided" in types
    assert types[-1] == "run.finished"
    assert [frame["seq"] for frame in frames] == sorted(frame["seq"] for frame in frames)
    assert run["status"] == "succeeded"
    assert run["answer"] == "All done."
    assert tickets.paths == ["/tickets?title=Broken%20printer"]


def test_a_revoked_key_is_refused_with_the_reason(live_stack, user, agent):
    made = api_key_create(owner=user, name="old", scopes=["read", "chat"])
    api_key_revoke(key=made.key, by=user)

    with pytest.raises(openai.AuthenticationError) as refused:
        _sdk(live_stack, made.secret).models.list()
    assert refused.value.body["code"] == "key_revoked"

    with pytest.raises(openai.AuthenticationError) as unknown:
        _sdk(live_stack, "cs-" + "x" * 43).models.list()
    assert unknown.value.body["code"] == "invalid_key"


def test_a_read_only_key_cannot_start_a_run(live_stack, user, agent):
    sdk = _sdk(live_stack, _key(user, "read"))

    with pytest.raises(openai.PermissionDeniedError) as refused:
        sdk.chat.completions.create(
            model=agent.slug, messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )
    assert refused.value.body["code"] == "insufficient_scope"
    assert not AgentRun.objects.exists()


def test_another_users_runs_and_conversations_are_not_found(live_stack, user, other_user, agent):
    theirs = conversation_create(owner=other_user, profile=agent)
    sent = message_send(conversation=theirs, user=other_user, content="Mine", client_id="a")
    secret = _key(user)
    headers = {"Authorization": f"Bearer {secret}"}

    with httpx.Client(base_url=live_stack.daphne.url, headers=headers, timeout=30) as http:
        for method, path in [
            ("GET", f"/v1/runs/{sent.run.pk}"),
            ("GET", f"/v1/runs/{sent.run.pk}/events"),
            ("POST", f"/v1/runs/{sent.run.pk}/cancel"),
        ]:
            response = http.request(method, path)
            assert response.status_code == 404, (path, response.text)
            assert response.json()["code"] == "not_found"

    with pytest.raises(openai.NotFoundError):
        _sdk(live_stack, secret).chat.completions.create(
            model=agent.slug,
            messages=[{"role": "user", "content": "Add to theirs"}],
            extra_body={"conversation_id": theirs.pk},
        )
    assert Message.objects.filter(conversation=theirs).count() == 1


def test_a_run_that_fails_answers_finish_reason_error_with_the_runs_reason(live_stack, user, agent):
    live_stack.model.script(agent.slug, [Fail.insufficient_quota()])

    failed = _sdk(live_stack, _key(user)).chat.completions.create(
        model=agent.slug, messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )

    assert failed.choices[0].finish_reason == "error"
    extension = failed.model_extra["chatsite"]
    run = AgentRun.objects.get()
    assert extension["status"] == "failed" == run.status
    assert extension["error"] == {"code": run.error_code, "message": run.error_message}
    assert failed.choices[0].message.content == ""
