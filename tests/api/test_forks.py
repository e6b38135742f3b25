""" "Retry from here" over HTTP: the new run answering the same question, and the refusals
(no step given, a step not of the run, a run still going, another user's run), each with a
clear code that writes nothing. The run's worker side: tests/integration/test_forks.py."""

from __future__ import annotations

import json

import pytest

from agents.models import AgentRun
from agents.runs.reads import run_numbered_steps
from tests.admin.conftest import make_finished_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def fork(api, run_id, body):
    return api.post(f"/api/runs/{run_id}/fork/", json.dumps(body), content_type=JSON)


def test_a_fork_is_a_new_run_of_the_same_question(api, user, make_finished_run):  # noqa: F811
    run = make_finished_run(owner=user)
    thought = run_numbered_steps(run=run)[0][0]

    response = fork(api, run.pk, {"step_seq": thought})

    assert response.status_code == 201, response.content
    created = AgentRun.objects.get(pk=response.json()["run"]["id"])
    assert (created.forked_from_id, created.fork_before_seq) == (run.pk, thought)
    assert created.trigger_message_id == run.trigger_message_id
    assert created.status == AgentRun.Status.QUEUED


def test_refusals_write_nothing(api, user, make_user, make_finished_run):  # noqa: F811
    run = make_finished_run(owner=user)
    other = make_finished_run(owner=make_user("someone-else"))
    runs = AgentRun.objects.count()

    missing = fork(api, run.pk, {})
    assert missing.status_code == 400
    assert "step_seq" in missing.json()["fields"]

    last = run.events.order_by("-seq").first().seq  # run.finished: not a step
    wrong = fork(api, run.pk, {"step_seq": last})
    assert (wrong.status_code, wrong.json()["code"]) == (400, "not_forkable")

    hidden = fork(api, other.pk, {"step_seq": run_numbered_steps(run=other)[0][0]})
    assert (hidden.status_code, hidden.json()["code"]) == (404, "not_found")

    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    going = fork(api, run.pk, {"step_seq": run_numbered_steps(run=run)[0][0]})
    assert (going.status_code, going.json()["code"]) == (400, "not_forkable")

    assert AgentRun.objects.count() == runs
