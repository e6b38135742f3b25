"""The admin's side of evaluation sets: a stored run made a case from its inspector, every
thumbs-down from the feedback page, a set run against a version from its page, an
evaluation's report and two side by side, and restoring a version through the gate."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AgentProfile, EvalCase, EvalResult, EvalRun, EvalSet, PromptVersion
from agents.services.evaluations import eval_run_ended
from agents.services.feedback import feedback_set
from agents.services.prompt_versions import prompt_version_ensure
from tests.admin.conftest import page_text

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
