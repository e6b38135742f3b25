"""A run no worker holds is found by the sweeper of a live worker, without a broker message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, Message
from agents.services.conversations import conversation_create
from agents.services.prompt_versions import prompt_version_ensure

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _orphan_run(user, **fields) -> AgentRun:
    """A run written without its task being enqueued: as if the broker lost the message."""
    conversation = conversation_create(owner=user)
    message = Message.objects.create(conversation=conversation, role="user", content="hello")
    profile = AgentProfile.objects.get(is_default=True)
    return AgentRun.objects.create(
        conversation=conversation,
        trigger_message=message,
        profile_version=prompt_version_ensure(profile=profile),
        **fields,
    )


def test_a_run_past_its_attempts_is_failed_visibly(live_stack, user, settings):
    run = _orphan_run(
        user,
        status=AgentRun.Status.RUNNING,
        attempts=settings.AGENT_MAX_ATTEMPTS,
        worker_id="a-worker-that-died:1",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )
    # A live worker's sweeper re-enqueues it; the next claim is one attempt too many.
    ended = live_stack.wait_for_run(run.pk)

    assert ended.status == AgentRun.Status.FAILED
    assert ended.error_code == "too_many_attempts"
    assert ended.attempts == settings.AGENT_MAX_ATTEMPTS + 1
    failed = ended.events.get(type="run.failed")
    assert failed.payload["code"] == "too_many_attempts"
    assert failed.payload["message"]
    # The attempt that failed at once was never announced (the claim announces the others).
    assert not ended.events.filter(type="run.started").exists()
