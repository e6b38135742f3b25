"""A failing model endpoint: the user sees a plain reason and a reference, staff see the
detail in the run inspector, and nobody sees the key or the endpoint's credentials."""

from __future__ import annotations

import html
import json
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from agents.llm.scripted import Fail
from agents.models import AgentProfile, AgentRun, Message, ModelCall, ModelConfig
from agents.services.conversations import conversation_create
from agents.services.profiles import prompt_version_ensure
from tests.driving import run_execute

pytestmark = pytest.mark.django_db(transaction=True)

API_KEY = "sk-live+abc/DEF=ghi&jkl"
PASSWORD = "hunter2+pw/="


def _failing_run(user, scripted_model, failure: Fail) -> AgentRun:
    name = f"fail-{uuid.uuid4().hex[:8]}"
    scripted_model.script(name, [failure])
    scheme, rest = scripted_model.base_url.split("://", 1)
    config = ModelConfig(
        name=name,
        base_url=f"{scheme}://scout:{quote(PASSWORD, safe='')}@{rest}",
        model=name,
        max_retries=0,
    )
    config.set_api_key(API_KEY)
    config.save()
    profile = AgentProfile.objects.create(name=name, slug=name, model_config=config)
    conversation = conversation_create(owner=user, profile=profile)
    message = Message.objects.create(conversation=conversation, role="user", content="hello")
    run = AgentRun.objects.create(
        conversation=conversation,
        trigger_message=message,
        profile_version=prompt_version_ensure(profile=profile),
        model_config=config,
        model_name=name,
    )
    run_execute(run.pk)
    run.refresh_from_db()
    return run


def _secret_free(text: str) -> bool:
    return not any(
        form in text for form in (API_KEY, quote(API_KEY, safe=""), PASSWORD, quote(PASSWORD))
    )


def test_the_user_sees_a_plain_reason_and_a_reference(user, scripted_model, client):
    echo = {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}
    run = _failing_run(user, scripted_model, Fail(401, body=echo))

    assert run.status == AgentRun.Status.FAILED
    assert run.error_code == "model_auth"
    expected = (
        "The AI model service did not accept this site's credentials. The site's staff can "
        f"fix this. (Reference: run {run.pk}.)"
    )
    assert run.error_message == expected
    failed = run.events.get(type="run.failed")
    assert failed.payload == {"code": "model_auth", "message": expected}

    client.force_login(user)
    shown = client.get(f"/api/conversations/{run.conversation_id}/").content.decode()
    assert json.loads(shown)["events"][-1]["message"] == expected
    for hidden in ("127.0.0.1", "Incorrect API key", "error_detail"):
        assert hidden not in shown
    assert _secret_free(shown)


def test_staff_read_the_redacted_detail_in_the_inspector(
    user, scripted_model, client, make_user, settings
):
    echo = {"error": {"message": f"upstream refused key {API_KEY} for scout:{PASSWORD}"}}
    run = _failing_run(user, scripted_model, Fail(502, body=echo))

    assert run.error_code == "model_server_error"
    assert "127.0.0.1" in run.error_detail
    assert "(502): upstream refused key [secret] for [secret]" in run.error_detail
    assert _secret_free(run.error_detail)
    assert all(_secret_free(call.error) for call in ModelCall.objects.filter(run=run))

    settings.SECURE_SSL_REDIRECT = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    page = client.get(f"/admin/agents/agentrun/{run.pk}/change/").content.decode()
    assert run.error_detail in html.unescape(page)
    assert _secret_free(html.unescape(page))
