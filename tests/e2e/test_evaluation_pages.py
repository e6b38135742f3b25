"""The admin pages of evaluation sets in Chromium: the set (its cases and its forms), an
evaluation's report, two evaluations side by side and the run inspector's "Make this run a
case", each passing axe, at desktop width and at 375 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import AgentProfile, EvalResult, EvalRun, EvalSet
from agents.services.prompt_versions import prompt_version_ensure
from tests.admin.conftest import make_finished_run  # noqa: F401 (a fixture)
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import assert_accessible

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("viewport", [None, MOBILE], ids=["desktop", "375px"])
def test_evaluation_pages_pass_axe(stack, open_tab, make_user, user, viewport, make_finished_run):  # noqa: F811
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    version = prompt_version_ensure(profile=profile)
    run = make_finished_run(owner=user, profile_version=version)
    eval_set = EvalSet.objects.create(profile=profile, name="Capitals")
    case = eval_set.cases.create(
        name="France", question=run.trigger_message.content, source_run=run, answer_contains="Paris"
    )
    reports = []
    for passed in (True, False):
        eval_run = EvalRun.objects.create(
            eval_set=eval_set, version=version, status=EvalRun.Status.DONE, cases=1, passed=passed
        )
        EvalResult.objects.create(
            eval_run=eval_run,
            case=case,
            run=run if passed else None,
            passed=passed,
            tokens=150,
            steps=1,
            checks=[{"expectation": "The answer contains “Paris”", "passed": passed, "detail": ""}],
        )
        reports.append(eval_run)
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    tab = open_tab(staff, viewport=viewport, path="/admin/")
    page = tab.page

    page.goto(f"/admin/agents/evalset/{eval_set.pk}/change/")
    expect(page.locator("#eval-set-run")).to_contain_text("Run this set against a version")
    assert_accessible(tab)
    page.goto(f"/admin/agents/evalrun/{reports[0].pk}/change/")
    expect(page.locator("#eval-report")).to_contain_text("1 of 1 cases passed")
    assert_accessible(tab)
    page.goto(f"/admin/agents/evalrun/{reports[0].pk}/compare/{reports[1].pk}/")
    expect(page.locator("#eval-compare")).to_contain_text("0 of 1 passed")
    assert_accessible(tab)
    page.goto(f"/admin/agents/agentrun/{run.pk}/change/")
    expect(page.locator("#run-eval-case")).to_contain_text("Make this run a case")
    assert_accessible(tab)
