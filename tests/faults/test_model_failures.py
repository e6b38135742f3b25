"""The model endpoint misbehaving: 500s, 429 with ``Retry-After``, a hung connection. A run
either succeeds after the client's retries or fails with a clear code, within the deadline
of the profile's model endpoint; never stuck in ``running``."""

from __future__ import annotations

import time
import uuid

import pytest

from agents.llm.scripted import Fail, Hang, Reply
from agents.models import AgentRun
from agents.services.conversations import conversation_create
from tests.faults.checks import FINAL, assert_log_sound, model_name, step_kinds
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DEADLINE_SECONDS = 2.0


def _ask(live_stack, user, model: str, *, max_retries: int) -> tuple[AgentRun, dict]:
    profile = live_stack.profile(model)
    profile.model_config.request_timeout_seconds = DEADLINE_SECONDS
    profile.model_config.max_retries = max_retries
    profile.model_config.save()
    conversation = conversation_create(owner=user, profile=profile)
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "6*7?", "client_id": uuid.uuid4().hex})
    last = sock.receive_until(run_ended, timeout=60)[-1]
    run = live_stack.wait_for_run(last["run_id"])
    assert_log_sound(conversation)
    return run, last


def _timed(response):
    """A scripted entry that notes when the request arrived."""
    arrivals: list[float] = []

    def answer(body: dict):
        arrivals.append(time.monotonic())
        return response

    return answer, arrivals


def test_two_500s_then_an_answer_succeeds_after_retries(live_stack, user):
    model = model_name("500")
    live_stack.model.script(model, [Fail(500), Fail(502), Reply(FINAL)])

    run, last = _ask(live_stack, user, model, max_retries=2)

    assert run.status == AgentRun.Status.SUCCEEDED
    assert last["message"]["content"] == "It is 42."
    assert len(live_stack.model.requests(model)) == 3
    # The retries are the client's business: one model call, one thought in the log.
    assert run.model_calls.count() == 1


def test_a_429_is_retried_after_the_seconds_retry_after_names(live_stack, user):
    model = model_name("429")
    refuse, refused_at = _timed(Fail(429, retry_after=1))
    answer, answered_at = _timed(Reply(FINAL))
    live_stack.model.script(model, [refuse, answer])

    run, _ = _ask(live_stack, user, model, max_retries=1)

    assert run.status == AgentRun.Status.SUCCEEDED
    assert answered_at[0] - refused_at[0] >= 1.0


@pytest.mark.parametrize(
    ("responses", "max_retries", "code", "words"),
    [
        pytest.param([Fail(500), Fail(503)], 1, "model_server_error", "", id="500s-past-retries"),
        pytest.param(
            [Fail(429, retry_after=30)], 3, "model_rate_limited", "", id="retry-after-past-deadline"
        ),
        pytest.param([Fail.insufficient_quota()], 3, "model_quota", "quota", id="quota"),
        pytest.param([Hang(60)], 0, "model_timeout", "2s", id="hang"),
        pytest.param([Hang(60, after_headers=True)], 0, "model_timeout", "2s", id="hang-in-body"),
    ],
)
def test_a_failing_model_ends_the_run_failed_with_a_clear_code(
    live_stack, user, responses, max_retries, code, words
):
    model = model_name(code)
    live_stack.model.script(model, responses)

    run, last = _ask(live_stack, user, model, max_retries=max_retries)

    assert run.status == AgentRun.Status.FAILED
    assert last["type"] == "run.failed"
    assert last["code"] == code
    assert run.error_code == code
    # The user reads a plain reason and a reference; the technical words are staff's detail.
    assert last["message"].endswith(f"(Reference: run {run.pk}.)")
    assert words in run.error_detail
    # Retry-After beyond the deadline and a quota error are not retried at all.
    if code in ("model_rate_limited", "model_quota"):
        assert len(live_stack.model.requests(model)) == 1
    assert step_kinds(list(run.events.order_by("seq"))) == []
