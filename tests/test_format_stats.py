"""parse_errors_by_model: the admin's per-model count of parse errors per run."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone

from agents.format_stats import parse_errors_by_model
from agents.models import AgentRun
from agents.react.types import ErrorStep, FinalAnswerStep, ModeSwitchStep, ObservationStep
from agents.runs.store import run_finish, run_record_step
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db

PARSE_ERROR = ErrorStep(code="parse_error", message="the reply has neither…", model_text="hm")
NOTE = ObservationStep(tool="", call_id="reply-1", text="follow the format", is_error=True)


def a_run(user, model_name: str, steps) -> AgentRun:
    conversation = conversation_create(owner=user)
    sent = message_send(conversation=conversation, user=user, content="q")
    AgentRun.objects.filter(pk=sent.run.pk).update(
        status=AgentRun.Status.RUNNING, model_name=model_name
    )
    run = AgentRun.objects.select_related("conversation").get(pk=sent.run.pk)
    for step in steps:
        run_record_step(run=run, step=step)
    run_finish(run=run, step=FinalAnswerStep(text="a"))
    return run


def test_parse_errors_are_counted_per_model_and_run(user, settings):
    settings.CHAT_SENDS_PER_MINUTE = 0  # four sends; the rate limit is not under test
    switch = ModeSwitchStep(from_mode="react", to_mode="tools", parse_errors=3)
    a_run(user, "small-model", [PARSE_ERROR, NOTE] * 3 + [switch])
    a_run(user, "small-model", [PARSE_ERROR, NOTE])
    a_run(user, "small-model", [])
    a_run(user, "big-model", [ErrorStep(code="unknown_tool", message="no such tool")])
    now = timezone.now()

    rows = parse_errors_by_model(since=now - datetime.timedelta(hours=1), until=now)

    small, big = rows
    assert (small.model_name, small.runs, small.runs_with_parse_errors) == ("small-model", 3, 2)
    assert (small.parse_errors, small.mode_switches) == (4, 1)
    assert small.parse_errors_per_run == pytest.approx(4 / 3)
    assert (big.model_name, big.runs, big.parse_errors, big.mode_switches) == (
        "big-model",
        1,
        0,
        0,
    )
    assert parse_errors_by_model(since=now, until=now + datetime.timedelta(hours=1)) == []
