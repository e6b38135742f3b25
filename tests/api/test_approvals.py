"""Deciding a paused call and continuing a run over HTTP: the same services as the socket."""

from __future__ import annotations

import pytest

from agents.models import AgentRun
from tests.paused import paused_run

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"


@pytest.fixture
def api(client, user):
    client.force_login(user)
    return client


def decide_url(approval_id: int) -> str:
    return f"/api/approvals/{approval_id}/decide/"


def test_the_owner_denies_with_a_reason_once(api, conversation):
    agent_run, approval = paused_run(conversation)

    response = api.post(
        decide_url(approval.pk), {"approve": False, "reason": "Not Bob"}, content_type=JSON
    )
    again = api.post(decide_url(approval.pk), {"approve": True}, content_type=JSON)

    assert response.status_code == 200
    body = response.json()["approval"]
    assert (body["decision"], body["reason"], body["approved"]) == ("declined", "Not Bob", False)
    assert again.status_code == 400
    assert again.json()["code"] == "already_decided"
    agent_run.refresh_from_db()
    assert agent_run.status == AgentRun.Status.QUEUED


def test_someone_else_gets_a_404_and_nothing_changes(client, other_user, conversation):
    _, approval = paused_run(conversation)
    client.force_login(other_user)

    response = client.post(decide_url(approval.pk), {"approve": True}, content_type=JSON)

    assert response.status_code == 404
    approval.refresh_from_db()
    assert approval.decision == ""


@pytest.mark.parametrize("body", [{}, {"approve": "true"}, {"approve": True, "reason": ["x"]}])
def test_bad_input_is_refused_and_loses_nothing(api, conversation, body):
    _, approval = paused_run(conversation)

    response = api.post(decide_url(approval.pk), body, content_type=JSON)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_field"
    approval.refresh_from_db()
    assert approval.decision == ""


def test_continue_is_refused_for_a_run_not_stopped_at_a_budget(api, conversation):
    agent_run, _ = paused_run(conversation)

    response = api.post(f"/api/runs/{agent_run.pk}/continue/", content_type=JSON)

    assert response.status_code == 400
    assert response.json()["code"] == "not_paused"
