"""Fixtures for the admin tests: a staff client, and the settings a plain-HTTP test client needs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

_model_names = itertools.count(1)


@pytest.fixture(autouse=True)
def _plain_http_admin(settings):
    # Production defaults redirect to HTTPS; the test client speaks plain HTTP.
    settings.SECURE_SSL_REDIRECT = False
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


@pytest.fixture
def staff(make_user):
    return make_user("admin", is_staff=True, is_superuser=True)


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def model_name():
    """A model name no other test scripts, so tests can share one scripted server."""
    return f"admin-test-model-{next(_model_names)}"


def profile_form_data(**overrides):
    """The add/change form of a profile, as the browser posts it."""
    data = {
        "name": "Geographer",
        "slug": "geographer",
        "description": "Knows capitals.",
        "mode": "react",
        "model_config": "",
        "temperature": "",
        "system_prompt": "",
        "label_set": "en",
        "few_shot_examples": "",
        "max_iterations": "5",
        "max_execution_time": "60",
        "memory_strategy": "window",
        "memory_window_turns": "4",
        "memory_token_budget": "1000",
        # The read-only versions inline still posts its management form.
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "0",
    }
    data.update(overrides)
    return data


def page_text(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.fixture
def make_finished_run(db):
    """A succeeded run with its events and one model call, stored by the pipeline's services."""
    from django.utils import timezone

    from agents.models import AgentRun, Message, UsageEntry
    from agents.react.types import (
        ActionStep,
        FinalAnswerStep,
        ModelCallRecord,
        ObservationStep,
        ThoughtStep,
    )
    from agents.runs.store import run_finish, run_record_model_call, run_record_step, run_started
    from agents.services.conversations import conversation_create

    def make(
        *,
        owner,
        profile_version=None,
        model_config=None,
        prompt_tokens=120,
        completion_tokens=30,
        created_at=None,
    ):
        conversation = conversation_create(owner=owner, title="Capitals")
        question = Message.objects.create(
            conversation=conversation, role="user", content="What is the capital of France?"
        )
        # Queuing a run is message_send's job, which also rate-limits; the test needs many.
        run = AgentRun.objects.create(
            conversation=conversation,
            trigger_message=question,
            profile_version=profile_version,
            model_config=model_config,
            model_name=model_config.model if model_config else "demo",
            status=AgentRun.Status.RUNNING,
            attempts=1,
            started_at=timezone.now(),
        )
        run_started(run=run, model=run.model_name, profile=str(profile_version or "-"))
        run_record_model_call(
            run=run,
            record=ModelCallRecord(
                index=0,
                messages=[
                    {"role": "system", "content": "You answer with tools. <b>bold</b>"},
                    {"role": "user", "content": "What is the capital of France?"},
                ],
                options={"stop": ["Observation:"], "temperature": 0.0},
                response_text="Thought: I should look the capital up.\nAction: capitals",
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                duration_ms=420,
            ),
        )
        for step in (
            ThoughtStep(text="I should look the capital up."),
            ActionStep(tool="capitals", tool_input="France", call_id="call-1"),
            ObservationStep(tool="capitals", call_id="call-1", text="Paris"),
        ):
            run_record_step(run=run, step=step)
        run_finish(run=run, step=FinalAnswerStep(text="The capital of France is Paris."))
        if created_at is not None:
            AgentRun.objects.filter(pk=run.pk).update(created_at=created_at)
            UsageEntry.objects.filter(run_id=run.pk).update(created_at=created_at)
        run.refresh_from_db()
        return run

    return make


@pytest.fixture
def scripted_server(scripted_model):
    """The session's scripted OpenAI-compatible server (``scripted_model`` in tests/processes)."""
    return scripted_model


@pytest.fixture
def scripted_endpoint(db, scripted_server, model_name):
    """A ModelConfig pointing at the scripted server under a model name of its own."""
    from agents.models import ModelConfig

    model_config = ModelConfig(
        name=f"Scripted {model_name}",
        base_url=scripted_server.base_url,
        model=model_name,
        request_timeout_seconds=5,
        max_retries=0,
    )
    model_config.set_api_key("sk-scripted-key-for-tests")
    model_config.save()
    return model_config
