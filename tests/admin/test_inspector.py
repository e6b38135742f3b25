"""The run inspector, the read-only conversation page and the usage table."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, MemorySummary, ModelConfig
from agents.services.prompt_versions import prompt_version_ensure
from agents.services.usage import usage_by_user_day
from tests.admin.conftest import page_text


@pytest.fixture
def priced_model(db):
    return ModelConfig.objects.create(
        name="Priced",
        base_url="http://127.0.0.1:9/v1",
        model="priced-model",
        prompt_price_per_million=Decimal("2.00"),
        completion_price_per_million=Decimal("10.00"),
    )


@pytest.fixture
def version(db):
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    return prompt_version_ensure(profile=profile)


@pytest.mark.django_db
def test_run_detail_shows_the_timeline_and_the_model_calls(
    staff_client, user, priced_model, version, make_finished_run
):
    run = make_finished_run(owner=user, profile_version=version, model_config=priced_model)

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))

    assert "I should look the capital up." in body  # the thought
    assert "#1 run.started" in body
    assert "#3 step: action" in body
    assert "run.finished" in body
    assert "The capital of France is Paris." in body  # the final answer
    assert "Model calls (1)" in body
    assert "120 prompt + 30 completion tokens, 420 ms" in body
    # The exact messages sent, escaped, and what came back.
    assert "You answer with tools. &lt;b&gt;bold&lt;/b&gt;" in body
    assert "&quot;Observation:&quot;" in body
    assert "Thought: I should look the capital up.\nAction: capitals" in body
    assert "geographer v1" in body
    assert "alice" in body


@pytest.mark.django_db
def test_run_list_filters(staff_client, user, other_user, version, make_finished_run):
    # Django shows (and applies) a related filter only when there are two choices or more.
    other_profile = AgentProfile.objects.create(name="Cook", slug="cook")
    other_version = prompt_version_ensure(profile=other_profile)
    mine = make_finished_run(owner=user, profile_version=version)
    theirs = make_finished_run(owner=other_user, profile_version=other_version)
    AgentRun.objects.filter(pk=theirs.pk).update(status=AgentRun.Status.FAILED)
    url = reverse("admin:agents_agentrun_changelist")

    def listed(**params) -> set[int]:
        response = staff_client.get(url, params)
        assert response.status_code == 200
        return {run.pk for run in response.context["cl"].result_list}

    assert listed() == {mine.pk, theirs.pk}
    assert listed(status__exact="failed") == {theirs.pk}
    assert listed(conversation__owner__id__exact=user.pk) == {mine.pk}
    assert listed(profile_version__profile__id__exact=version.profile_id) == {mine.pk}
    today = timezone.localdate()
    assert listed(created_at__year=today.year, created_at__month=today.month) == {
        mine.pk,
        theirs.pk,
    }


@pytest.mark.django_db
def test_conversation_page_shows_memory_summaries(staff_client, user, make_finished_run):
    run = make_finished_run(owner=user)
    MemorySummary.objects.create(
        conversation=run.conversation,
        text="The user asked about the capital of France.",
        covers_through=run.trigger_message,
        token_count=12,
        model_name="summariser-model",
    )

    body = page_text(
        staff_client.get(reverse("admin:agents_conversation_change", args=[run.conversation_id]))
    )

    assert "The user asked about the capital of France." in body
    assert "summariser-model" in body
    assert "What is the capital of France?" in body


@pytest.mark.django_db
def test_usage_per_user_and_day_with_cost(
    staff_client, user, other_user, priced_model, make_finished_run
):
    now = timezone.now()
    yesterday = now - datetime.timedelta(days=1)
    make_finished_run(
        owner=user, model_config=priced_model, prompt_tokens=1000, completion_tokens=200
    )
    make_finished_run(
        owner=user, model_config=priced_model, prompt_tokens=500, completion_tokens=100
    )
    make_finished_run(owner=user, prompt_tokens=50, completion_tokens=5)  # demo: free
    make_finished_run(
        owner=other_user,
        model_config=priced_model,
        prompt_tokens=2_000_000,
        completion_tokens=0,
        created_at=yesterday,
    )

    rows = usage_by_user_day(
        since=now - datetime.timedelta(days=3), until=now + datetime.timedelta(days=1)
    )

    by_user = {(row.username, row.day): row for row in rows}
    alice = by_user[("alice", timezone.localdate(now))]
    assert (alice.runs, alice.prompt_tokens, alice.completion_tokens) == (3, 1550, 305)
    # 1500 prompt tokens at 2/M + 300 completion tokens at 10/M; the demo run costs nothing.
    assert alice.cost == Decimal("0.006000")
    bob = by_user[("bob", timezone.localdate(yesterday))]
    assert (bob.runs, bob.cost) == (1, Decimal("4.000000"))
    assert rows[0].day >= rows[-1].day  # newest day first

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_usage")))
    assert "0.006000" in body
    assert "4.000000" in body
    assert "4.006000" in body  # the total

    only_today = page_text(
        staff_client.get(
            reverse("admin:agents_agentrun_usage"),
            {"since": timezone.localdate(now).isoformat()},
        )
    )
    assert "0.006000" in only_today
    assert "4.000000" not in only_today


@pytest.mark.django_db
def test_usage_range_form_reports_bad_dates(staff_client):
    response = staff_client.get(reverse("admin:agents_agentrun_usage"), {"since": "yesterday"})
    assert response.status_code == 200
    assert "Enter a valid date" in page_text(response)


@pytest.mark.django_db
def test_the_inspector_shows_who_decided_what_and_when(
    staff_client, user, priced_model, version, make_finished_run
):
    from agents.models import ToolApproval

    run = make_finished_run(owner=user, profile_version=version, model_config=priced_model)
    decided_at = timezone.make_aware(datetime.datetime(2026, 11, 24, 9, 30, 5))
    ToolApproval.objects.create(
        run=run,
        call_id="call-1",
        tool="send_mail",
        tool_input={"to": "boss@example.com"},
        decision="declined",
        reason="Not to the boss",
        decided_by=user,
        decided_at=decided_at,
    )
    ToolApproval.objects.create(
        run=run, call_id="call-2", tool="file_ticket", tool_input="printer", decision="expired",
        decided_at=decided_at,
    )  # fmt: skip

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))

    assert "Approvals (2)" in body
    assert "send_mail" in body
    assert "boss@example.com" in body
    assert "Declined" in body
    assert "Not to the boss" in body
    assert "alice" in body
    assert "2026-11-24 09:30:05" in body
    assert "Expired (declined)" in body
    assert "(nobody: the sweeper)" in body


@pytest.mark.django_db(transaction=True)
def test_the_inspector_says_when_a_run_was_stopped_before_a_decision(staff_client, user):
    from agents.services.conversations import conversation_create, run_cancel
    from tests.paused import paused_run

    run, _ = paused_run(conversation_create(owner=user, title="Mail"))
    run_cancel(run=run, user=user)

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))

    assert "send_mail" in body
    assert "Run stopped before a decision" in body
    assert "Pending" not in body


@pytest.mark.django_db
def test_a_delegate_calls_sub_agent_run_is_shown_under_it(
    staff_client, user, version, make_finished_run
):
    from agents.models import Message
    from agents.react.types import FinalAnswerStep, ThoughtStep
    from agents.runs.store import run_finish, run_record_step, run_started

    parent = make_finished_run(owner=user, profile_version=version)
    child = AgentRun.objects.create(
        conversation=parent.conversation,
        trigger_message=parent.trigger_message,
        profile_version=version,
        model_name="demo",
        status=AgentRun.Status.RUNNING,
        attempts=1,
        parent_run=parent,
        parent_call_id="call-1",
        task="Look up the capital",
        depth=1,
    )
    run_started(run=child, model="demo", profile="geographer")
    run_record_step(run=child, step=ThoughtStep(text="The helper looks it up."))
    run_finish(run=child, step=FinalAnswerStep(text="Paris, says the helper."))

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[parent.pk])))

    assert f"Sub-agent run {child.pk} (Succeeded)" in body
    assert "The helper looks it up." in body
    assert reverse("admin:agents_agentrun_change", args=[child.pk]) in body
    # The child's answer is in its run.finished, not a message of the conversation.
    assert not Message.objects.filter(run=child).exists()
    child_page = page_text(
        staff_client.get(reverse("admin:agents_agentrun_change", args=[child.pk]))
    )
    assert "Look up the capital" in child_page
    assert "Paris, says the helper." in child_page


@pytest.mark.django_db
def test_the_inspector_shows_the_custom_instructions_a_run_was_given(
    staff_client, user, priced_model, version, make_finished_run
):
    run = make_finished_run(owner=user, profile_version=version, model_config=priced_model)
    AgentRun.objects.filter(pk=run.pk).update(user_instructions="Answer like a pirate.")

    body = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))

    assert "Added to the prompt" in body
    assert "Answer like a pirate." in body
