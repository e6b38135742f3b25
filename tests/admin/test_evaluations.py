"""The admin's side of evaluation sets: a stored run made a case from its inspector, every
thumbs-down from the feedback page, a set run against a version from its page, an
evaluation's report and two side by side, and restoring a version through the gate."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import (
    AgentProfile,
    Conversation,
    EvalCase,
    EvalResult,
    EvalRun,
    EvalSet,
    PromptVersion,
)
from agents.services.conversations import message_send
from agents.services.evaluations import eval_run_ended
from agents.services.feedback import feedback_set
from agents.services.prompt_versions import prompt_version_ensure, prompt_version_live
from tests.admin.conftest import page_text, profile_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile():
    return AgentProfile.objects.create(name="Geographer", slug="geographer")


@pytest.fixture
def eval_set(profile):
    return EvalSet.objects.create(profile=profile, name="Capitals")


def test_a_run_becomes_a_case_from_its_inspector(
    staff_client, user, profile, eval_set, make_finished_run
):
    run = make_finished_run(owner=user, profile_version=prompt_version_ensure(profile=profile))
    page = page_text(staff_client.get(reverse("admin:agents_agentrun_change", args=[run.pk])))
    assert "Make this run a case" in page

    response = staff_client.post(
        reverse("admin:agents_agentrun_add_case", args=[run.pk]), {"eval_set": eval_set.pk}
    )
    assert response.status_code == 302
    case = EvalCase.objects.get(eval_set=eval_set)
    assert (case.question, case.history, case.source_run_id) == (
        "What is the capital of France?",
        [],
        run.pk,
    )
    # Twice is still one case.
    staff_client.post(
        reverse("admin:agents_agentrun_add_case", args=[run.pk]), {"eval_set": eval_set.pk}
    )
    assert EvalCase.objects.filter(eval_set=eval_set).count() == 1


def test_every_thumbs_down_from_the_feedback_page(
    staff_client, user, profile, eval_set, make_finished_run
):
    version = prompt_version_ensure(profile=profile)
    disliked = make_finished_run(owner=user, profile_version=version)
    liked = make_finished_run(owner=user, profile_version=version)
    feedback_set(message=disliked.answer, user=user, rating="down")
    feedback_set(message=liked.answer, user=user, rating="up")
    page = page_text(
        staff_client.get(reverse("admin:agents_answerfeedback_profile_stats", args=[profile.pk]))
    )
    assert "Add a case for every thumbs-down answer" in page

    staff_client.post(reverse("admin:agents_evalset_thumbs_down", args=[eval_set.pk]))

    assert list(eval_set.cases.values_list("source_run_id", flat=True)) == [disliked.pk]


def test_a_set_run_from_its_page_and_its_report(
    staff_client, user, profile, eval_set, make_finished_run
):
    version = prompt_version_ensure(profile=profile)
    eval_set.cases.create(
        name="France", question="What is the capital of France?", answer_contains="Paris"
    )
    response = staff_client.post(
        reverse("admin:agents_evalset_evaluate", args=[eval_set.pk]), {"version": version.pk}
    )
    eval_run = EvalRun.objects.get()
    assert response["Location"] == reverse("admin:agents_evalrun_change", args=[eval_run.pk])
    page = page_text(staff_client.get(response["Location"]))
    assert "Running: 0 of 1 cases checked" in page
    assert 'http-equiv="refresh"' in page

    # Its replay ended (here a stored run stands in for it): checked, reported.
    result = eval_run.results.get()
    result.run = make_finished_run(owner=user, profile_version=version)
    result.save()
    eval_run_ended(run=result.run)
    page = page_text(staff_client.get(response["Location"]))
    assert "1 of 1 cases passed" in page
    assert "The answer contains “Paris”" in page


def test_an_empty_set_is_refused_on_its_page(staff_client, profile, eval_set):
    version = prompt_version_ensure(profile=profile)
    response = staff_client.post(
        reverse("admin:agents_evalset_evaluate", args=[eval_set.pk]),
        {"version": version.pk},
        follow=True,
    )
    assert "The set has no cases yet." in page_text(response)
    assert not EvalRun.objects.exists()


def _done(eval_set, version, passed):
    eval_run = EvalRun.objects.create(
        eval_set=eval_set, version=version, status=EvalRun.Status.DONE, cases=2, passed=passed
    )
    for index, case in enumerate(eval_set.cases.order_by("pk")):
        EvalResult.objects.create(eval_run=eval_run, case=case, passed=index < passed)
    return eval_run


def test_two_evaluations_side_by_side_and_the_gate_on_restore(
    staff_client, settings, profile, eval_set
):
    first = prompt_version_ensure(profile=profile)
    profile.system_prompt = "Be brief. " + profile.system_prompt
    profile.save()
    second = prompt_version_ensure(profile=profile)
    for name in ("France", "Peru"):
        eval_set.cases.create(name=name, question=f"The capital of {name}?")
    worse, better = _done(eval_set, first, 1), _done(eval_set, second, 2)

    response = staff_client.post(
        reverse("admin:agents_evalrun_changelist"),
        {"action": "compare", "_selected_action": [worse.pk, better.pk]},
    )
    page = page_text(staff_client.get(response["Location"]))
    assert "1 of 2 passed" in page
    assert "2 of 2 passed" in page

    settings.CHAT_EVAL_GATE_PUBLISH = True
    versions = PromptVersion.objects.filter(profile=profile).count()
    response = staff_client.post(
        reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, first.number]),
        follow=True,
    )
    assert "passes 1 of 2 cases of the set “Capitals”" in page_text(response)
    assert PromptVersion.objects.filter(profile=profile).count() == versions


def _profile_added(staff_client) -> AgentProfile:
    response = staff_client.post(reverse("admin:agents_agentprofile_add"), profile_form_data())
    assert response.status_code == 302, page_text(response)
    return AgentProfile.objects.get(slug="geographer")


def test_with_the_gate_on_a_save_writes_a_draft_that_is_live_only_once_published(
    staff_client, settings, user
):
    """The one rule, on the path that used to skip it: a save of a profile the gate holds
    changes nothing a run reads; the draft goes live through the gate, refused while it
    passes less than the live version, then published once it passes as much."""
    profile = _profile_added(staff_client)
    live = profile.versions.get()
    eval_set = EvalSet.objects.create(profile=profile, name="Capitals")
    for name in ("France", "Peru"):
        eval_set.cases.create(name=name, question=f"The capital of {name}?")
    _done(eval_set, live, 2)
    settings.CHAT_EVAL_GATE_PUBLISH = True
    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])

    response = staff_client.post(
        change_url,
        profile_form_data(
            system_prompt="", max_iterations="2", description="Knows capitals, briefly."
        ),
        follow=True,
    )

    page = page_text(response)
    assert "saved as draft version 2, and runs still use version 1" in page
    draft = profile.versions.get(number=2)
    assert draft.is_draft
    assert draft.snapshot["max_iterations"] == 2
    profile.refresh_from_db()
    # The row runs read keeps the live version's settings; what no version holds is saved.
    assert profile.max_iterations == 5
    assert profile.description == "Knows capitals, briefly."
    assert prompt_version_live(profile=profile) == live
    conversation = Conversation.objects.create(owner=user, profile=profile)
    sent = message_send(conversation=conversation, user=user, content="Hello")
    assert sent.run.profile_version == live
    # The form says a draft waits, and the draft's page offers to publish it.
    assert "Version 2 is a draft waiting to be published" in page_text(staff_client.get(change_url))
    version_url = reverse("admin:agents_agentprofile_version", args=[profile.pk, 2])
    assert "Publish version 2" in page_text(staff_client.get(version_url))
    # Saving the same edits again reuses the draft.
    staff_client.post(change_url, profile_form_data(max_iterations="2"))
    assert profile.versions.count() == 2

    # Not evaluated, then worse: refused, and nothing is written.
    publish_url = reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, 2])
    response = staff_client.post(publish_url, follow=True)
    assert "has not been evaluated on the set “Capitals” yet" in page_text(response)
    _done(eval_set, draft, 1)
    response = staff_client.post(publish_url, follow=True)
    assert "passes 1 of 2 cases of the set “Capitals”" in page_text(response)
    assert "the current version geographer v1 passes 2 of 2" in page_text(response)
    assert profile.versions.count() == 2
    assert prompt_version_live(profile=profile) == live

    # As good as the live version: published, the draft itself becomes live.
    _done(eval_set, draft, 2)
    response = staff_client.post(publish_url, follow=True)
    assert "Published version 2: runs use it now." in page_text(response)
    draft.refresh_from_db()
    profile.refresh_from_db()
    assert not draft.is_draft
    assert prompt_version_live(profile=profile) == draft
    assert profile.max_iterations == 2
    assert profile.versions.count() == 2


def test_with_the_gate_off_or_no_sets_a_save_is_live_at_once(staff_client, settings):
    profile = _profile_added(staff_client)
    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])
    # The gate on, but no set to pass: nothing holds the profile.
    settings.CHAT_EVAL_GATE_PUBLISH = True
    staff_client.post(change_url, profile_form_data(max_iterations="3"))
    assert (prompt_version_live(profile=profile).number, profile.versions.count()) == (2, 2)
    # A set, the gate off: the same.
    EvalSet.objects.create(profile=profile, name="Capitals")
    settings.CHAT_EVAL_GATE_PUBLISH = False
    response = staff_client.post(change_url, profile_form_data(max_iterations="4"), follow=True)
    assert "saved as draft" not in page_text(response)
    live = prompt_version_live(profile=profile)
    assert (live.number, live.is_draft, live.snapshot["max_iterations"]) == (3, False, 4)
    profile.refresh_from_db()
    assert profile.max_iterations == 4


def test_a_gated_save_with_a_form_error_keeps_the_input_and_writes_nothing(staff_client, settings):
    profile = _profile_added(staff_client)
    EvalSet.objects.create(profile=profile, name="Capitals")
    settings.CHAT_EVAL_GATE_PUBLISH = True
    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])
    response = staff_client.post(
        change_url, profile_form_data(system_prompt="Hello {nonsense}", max_iterations="8")
    )
    assert response.status_code == 200
    page = page_text(response)
    assert "nonsense" in page
    assert 'name="max_iterations" value="8"' in page
    assert profile.versions.count() == 1
