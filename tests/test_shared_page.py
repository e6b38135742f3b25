"""/s/<token>/: a shared conversation, read-only, for signed-in users unless the setting
makes shares public; a revoked or unknown link is a 404; nothing else of the owner's shows."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone, translation

from agents.models import AgentRun, ConversationShare, Message, RunEvent, ToolConfig
from agents.protocol import FrameType, message_created_payload
from agents.runs.log import event_append
from agents.runs.store import run_fail
from agents.services.branches import branch_activate
from agents.services.conversations import conversation_create
from agents.services.shares import share_create, share_revoke
from agents.transcript import failure_note
from tests.answers import finished_answer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


@pytest.fixture
def shared(user):
    conversation = conversation_create(owner=user, title="Sums with the calculator")
    finished_answer(
        conversation=conversation,
        question="What is 6 * 7?",
        answer="It is **42**.<script>alert(1)</script>",
    )
    share, _ = share_create(conversation=conversation)
    return share


def test_a_signed_in_user_reads_the_conversation_with_its_steps(client, other_user, shared):
    client.force_login(other_user)
    response = client.get(f"/s/{shared.token}/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Sums with the calculator" in text
    assert "What is 6 * 7?" in text
    assert "I should use the calculator." in text
    assert '<code class="tool-name">calculator</code>' in text
    assert "It is <strong>42</strong>." in text
    # The answer's script is text; the page's only scripts are the site's own files.
    assert "<script>" not in text
    scripts = re.findall(r"<script\b[^>]*>", text)
    assert scripts
    assert all(re.search(r'src="/(static|jsi18n)/', tag) for tag in scripts)
    assert response["Referrer-Policy"] == "no-referrer"
    assert "script-src 'self'" in response["Content-Security-Policy"]


def test_nothing_else_of_the_owners_shows(client, user, other_user, shared):
    conversation_create(owner=user, title="My private diary")
    client.force_login(other_user)
    text = client.get(f"/s/{shared.token}/").content.decode()
    assert "My private diary" not in text
    assert user.username not in text
    assert "/c/" not in text  # no link into the owner's chats


def test_a_tool_secret_in_a_step_is_blanked(client, other_user, shared):
    tool = ToolConfig.objects.create(name="weather", kind="http_request", description="d")
    tool.set_secrets({"API_KEY": "sk-very-secret-value-123"})
    tool.save()
    step = RunEvent.objects.filter(type="step", payload__kind="observation").get()
    step.payload = {**step.payload, "text": "42 (key sk-very-secret-value-123)"}
    step.save()
    client.force_login(other_user)
    text = client.get(f"/s/{shared.token}/").content.decode()
    assert "sk-very-secret-value-123" not in text
    assert "42 (key [secret])" in text


def test_observations_of_a_tool_reading_other_conversations_are_not_shown(
    client, other_user, shared
):
    ToolConfig.objects.create(name="Past_Chats", kind="conversation_search", description="d")
    step = RunEvent.objects.filter(type="step", payload__kind="observation").get()
    # The model may spell a tool's name in another case: the engine still runs it.
    step.payload = {**step.payload, "tool": "past_chats", "text": "My private diary: I owe 40"}
    step.save()
    client.force_login(other_user)

    text = client.get(f"/s/{shared.token}/").content.decode()

    assert "My private diary" not in text
    assert "Not shown: this tool read the owner&#x27;s other conversations." in text


def test_an_anonymous_visitor_is_sent_to_sign_in(client, shared):
    response = client.get(f"/s/{shared.token}/")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/s/{shared.token}/"


def test_the_setting_makes_shares_public(client, shared, settings):
    settings.CHAT_PUBLIC_SHARES = True
    response = client.get(f"/s/{shared.token}/")
    assert response.status_code == 200
    assert "What is 6 * 7?" in response.content.decode()


def test_a_revoked_link_is_a_404_that_says_it_was_revoked_even_when_public(
    client, other_user, shared, settings
):
    share_revoke(conversation=shared.conversation)
    client.force_login(other_user)
    response = client.get(f"/s/{shared.token}/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "This link was revoked" in text
    assert "does not exist" not in text
    assert "What is 6 * 7?" not in text
    assert response["Referrer-Policy"] == "no-referrer"
    settings.CHAT_PUBLIC_SHARES = True
    client.logout()
    response = client.get(f"/s/{shared.token}/")
    assert response.status_code == 404
    assert "This link was revoked" in response.content.decode()


def test_an_unknown_token_is_a_404(client, other_user, shared):
    client.force_login(other_user)
    response = client.get(f"/s/{shared.token[:-1]}x/")
    assert response.status_code == 404
    assert "revoked" not in response.content.decode()
    assert ConversationShare.objects.count() == 1


@pytest.fixture
def failed_share(user):
    """A shared conversation whose only run failed, with the message the worker stores."""
    conversation = conversation_create(owner=user, title="A run that failed")
    asked = Message.objects.create(conversation=conversation, role="user", content="Hello?")
    branch_activate(conversation=conversation, leaf_id=asked.pk)
    run = AgentRun.objects.create(
        conversation=conversation,
        trigger_message=asked,
        status=AgentRun.Status.RUNNING,
        attempts=1,
        started_at=timezone.now(),
    )
    event_append(
        conversation=conversation,
        run=run,
        type=FrameType.MESSAGE_CREATED,
        payload=message_created_payload(asked),
    )
    assert run_fail(
        run=run,
        code="model_timeout",
        message="The AI model took too long to answer. (Reference: R-7F3A.)",
    )
    share, _ = share_create(conversation=conversation)
    return share


def test_a_failed_runs_reason_is_said_in_english_as_stored(client, other_user, failed_share):
    client.force_login(other_user)
    text = client.get(f"/s/{failed_share.token}/").content.decode()
    assert "The run failed." in text
    assert "The AI model took too long to answer. (Reference: R-7F3A.)" in text


def test_a_failed_runs_reason_is_translated_by_its_code_keeping_the_reference(
    client, other_user, failed_share
):
    client.force_login(other_user)
    response = client.get(f"/s/{failed_share.token}/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    text = response.content.decode()
    assert "运行失败。" in text
    assert "AI 模型的回答耗时过长。请稍后再试。 （参考编号：R-7F3A。）" in text
    assert "took too long" not in text
    assert "(Reference:" not in text


def test_the_word_run_in_a_reference_is_said_in_the_pages_language():
    stored = "The AI model took too long to answer. Please try again. (Reference: run 12.)"
    with translation.override("zh-hans"):
        assert failure_note("model_timeout", stored).endswith("（参考编号：运行 12。）")
    with translation.override("en"):
        assert failure_note("model_timeout", stored) == stored


def test_a_server_error_and_an_unreachable_server_are_said_apart_in_each_language():
    """Issue 42: a model's HTTP 5xx is not "could not be reached"."""
    from agents.llm.errors import public_failure_message
    from agents.react.errors import ModelServerError, ModelUnavailable

    server = public_failure_message(ModelServerError("x (500)"), reference="run 3")
    unreachable = public_failure_message(ModelUnavailable("cannot reach"), reference="run 3")
    assert server.startswith("The AI model's server reported an error.")
    assert unreachable.startswith("The AI model's server could not be reached.")
    with translation.override("zh-hans"):
        said = failure_note("model_server_error", server)
        assert said.startswith("AI 模型的服务器报告了一个错误。")
        assert failure_note("model_unavailable", unreachable).startswith("无法连接到")
        assert "model_" not in said
