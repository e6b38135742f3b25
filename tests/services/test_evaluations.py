"""Checking a case's replay when it ends (``eval_run_ended``), without a worker: stored runs
stand in for replays."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile, AgentRun, EvalRun, EvalSet
from agents.services.evaluations import eval_run_ended, eval_run_start
from agents.services.prompt_versions import prompt_version_ensure
from tests.admin.conftest import make_finished_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def started(make_user):
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    version = prompt_version_ensure(profile=profile)
    eval_set = EvalSet.objects.create(profile=profile, name="Capitals")
    eval_set.cases.create(
        name="France",
        question="What is the capital of France?",
        must_call=[{"tool": "capitals", "arguments": "France"}],
        must_not_call=[{"tool": "capitals", "arguments": "Spain"}],
        answer_matches=r"\bParis\b",
        max_tokens=100,
    )
    staff = make_user("evaluating-staff", is_staff=True)
    return version, eval_run_start(eval_set=eval_set, version=version, user=staff), staff


def test_each_expectation_is_checked_and_the_last_case_closes_the_run(
    started,
    make_finished_run,  # noqa: F811
):
    version, eval_run, staff = started
    result = eval_run.results.get()
    result.run = make_finished_run(owner=staff, profile_version=version)  # 150 tokens
    result.save()

    eval_run_ended(run=result.run)

    result.refresh_from_db()
    assert [(check["expectation"], check["passed"]) for check in result.checks] == [
        ("The run ends with an answer", True),
        ("Calls capitals /France/", True),
        ("Does not call capitals /Spain/", True),
        ("The answer matches /\\bParis\\b/", True),
        ("At most 100 tokens", False),
    ]
    assert result.checks[-1]["detail"] == "150 tokens"
    assert (result.passed, result.tokens, result.steps) == (False, 150, 1)
    eval_run.refresh_from_db()
    assert (eval_run.status, eval_run.passed) == (EvalRun.Status.DONE, 0)
    # Told twice (a redelivered end), it is checked once.
    eval_run_ended(run=result.run)
    assert eval_run.results.get().checks == result.checks


def test_a_replay_stopped_at_a_budget_fails_its_case_and_a_running_one_waits(
    started,
    make_finished_run,  # noqa: F811
):
    version, eval_run, staff = started
    result = eval_run.results.get()
    result.run = make_finished_run(owner=staff, profile_version=version)
    result.save()
    AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.RUNNING)
    eval_run_ended(run=result.run)
    result.refresh_from_db()
    assert result.passed is None

    AgentRun.objects.filter(pk=result.run.pk).update(status=AgentRun.Status.OUT_OF_BUDGET)
    eval_run_ended(run=result.run)
    result.refresh_from_db()
    assert result.passed is False
    assert result.checks[0] == {
        "expectation": "The run ends with an answer",
        "passed": False,
        "detail": "",
    }
