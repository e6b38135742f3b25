"""Changing an agent safely, in Chromium, as staff with the publishing gate on: a set made
from two thumbs-down answers on the feedback page, a save of the profile that becomes a
draft, the set run against the live version and the draft with each case's result arriving
live on the evaluation's page (no reload), the two side by side with the case that changed,
and the draft, which fails more cases, refused when published."""

from __future__ import annotations

import threading
import uuid

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import Conversation, EvalSet, ModelConfig
from agents.services.feedback import feedback_set
from agents.services.prompt_versions import prompt_version_ensure, prompt_version_live
from tests.answers import finished_answer
from tests.e2e.test_accessibility import assert_accessible

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

QUESTIONS = ("What is 6 * 7?", "And 6 * 7 once more?")
# A ceiling for a test that failed before releasing a held reply.
HOLD_SECONDS = 120


def _sent(request) -> str:
    return "\n".join(str(message.get("content") or "") for message in request["messages"])


def _calculates_when_released(released: dict[str, threading.Event]):
    """The good version: asks the calculator (its first reply to a case waits until the test
    releases that case), then answers with what the recorded observation said."""

    def answer(request) -> Reply:
        sent = _sent(request)
        if "Observation: 42" in sent or "not recorded" in sent:
            return Reply("Thought: The calculator said 42.\nFinal Answer: It is 42.")
        for question, release in released.items():
            if question in sent:
                release.wait(HOLD_SECONDS)
        return Reply("Thought: Let me count.\nAction: calculator\nAction Input: 6 * 7")

    return answer


def _guesses(request) -> Reply:
    """The draft: answers at once, without the calculator."""
    return Reply("Thought: I know this.\nFinal Answer: 42, I think.")


def test_a_set_from_thumbs_downs_run_live_against_two_versions_compared_and_gated(
    stack, open_tab, user, make_user, spawn_daphne
):
    good_model = f"eval-good-{uuid.uuid4().hex[:8]}"
    worse_model = f"eval-worse-{uuid.uuid4().hex[:8]}"
    released = {question: threading.Event() for question in QUESTIONS}
    stack.model.policy(good_model, _calculates_when_released(released))
    stack.model.policy(worse_model, _guesses)
    profile = stack.profile(good_model)
    live = prompt_version_ensure(profile=profile)
    worse_endpoint = ModelConfig.objects.create(
        name="Cheaper endpoint", base_url=stack.model.base_url, model=worse_model
    )
    worse_endpoint.set_api_key("test-key")
    worse_endpoint.save()
    for question in QUESTIONS:
        answer = finished_answer(
            conversation=Conversation.objects.create(owner=user, profile=profile),
            question=question,
            profile_version=live,
        )
        feedback_set(message=answer, user=user, rating="down", comment="Show the working")
    liked = finished_answer(
        conversation=Conversation.objects.create(owner=user, profile=profile),
        question="What is 2 + 2?",
        profile_version=live,
    )
    feedback_set(message=liked, user=user, rating="up")
    eval_set = EvalSet.objects.create(profile=profile, name="Arithmetic")
    staff = make_user("evaluator", is_staff=True, is_superuser=True)
    gated = spawn_daphne(CHAT_EVAL_GATE_PUBLISH="true")
    tab = open_tab(
        staff, path=f"/admin/agents/answerfeedback/by-version/{profile.pk}/", daphne=gated
    )
    page = tab.page

    # The set from the feedback page's bulk action: the two thumbs-downs, not the thumbs-up.
    page.locator("#feedback-eval-sets form", has_text="Arithmetic").get_by_role(
        "button", name="Add a case for every thumbs-down answer"
    ).click()
    expect(page.locator(".messagelist")).to_contain_text("2 cases added from thumbs-down answers.")
    first, second = eval_set.cases.order_by("pk")
    assert (first.question, second.question) == QUESTIONS
    first.must_call = [{"tool": "calculator", "arguments": r"6 \* 7"}]
    first.answer_contains = "42"
    first.save()
    second.answer_contains = "42"
    second.save()

    # Saving the profile with the cheaper endpoint: a draft, runs still use the live version.
    page.goto(f"/admin/agents/agentprofile/{profile.pk}/change/")
    page.locator("select[name='model_config']").select_option(str(worse_endpoint.pk))
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text(
        "saved as draft version 2, and runs still use version 1"
    )
    draft = profile.versions.get(number=2)
    assert draft.is_draft
    assert prompt_version_live(profile=profile) == live
    page.goto(f"/admin/agents/agentprofile/{profile.pk}/change/")
    expect(page.locator("#waiting-draft")).to_contain_text("Version 2 is a draft")
    assert_accessible(tab)

    # The live version, its cases held: the page follows them over its socket.
    page.goto(f"/admin/agents/evalset/{eval_set.pk}/change/")
    page.get_by_label("Prompt version").select_option(str(live.pk))
    page.get_by_role("button", name="Run the set").click()
    report = page.locator("#eval-report")
    heading = page.locator("#eval-progress")
    expect(heading).to_have_text("Running: 0 of 2 cases checked")
    expect(report).to_have_attribute("data-live", "true")
    page.evaluate("window.notReloaded = true")
    released[QUESTIONS[0]].set()
    expect(heading).to_have_text("Running: 1 of 2 cases checked")
    first_row = page.locator("tr", has=page.locator("td", has_text=QUESTIONS[0]))
    second_row = page.locator("tr", has=page.locator("td", has_text=QUESTIONS[1]))
    expect(first_row.locator(".eval-result strong")).to_have_text("pass")
    expect(second_row.locator(".eval-result")).to_have_text("running…")
    released[QUESTIONS[1]].set()
    expect(heading).to_have_text("2 of 2 cases passed")
    expect(second_row.locator(".eval-result strong")).to_have_text("pass")
    expect(second_row.locator(".eval-replay a")).to_contain_text("Run ")
    assert page.evaluate("window.notReloaded") is True
    assert_accessible(tab)

    # The draft: it answers without the calculator.
    page.goto(f"/admin/agents/evalset/{eval_set.pk}/change/")
    page.get_by_label("Prompt version").select_option(str(draft.pk))
    page.get_by_role("button", name="Run the set").click()
    expect(page.locator("#eval-progress")).to_have_text("1 of 2 cases passed")
    expect(first_row.locator(".eval-result strong")).to_have_text("fail")
    expect(first_row.locator(".eval-checks")).to_contain_text("✗ Calls calculator")

    # Side by side: the pass rates and the case that changed.
    page.goto("/admin/agents/evalrun/")
    page.locator("#action-toggle").check()
    page.locator("select[name='action']").select_option("compare")
    page.get_by_role("button", name="Go").click()
    compare = page.locator("#eval-compare")
    expect(compare.locator("thead")).to_contain_text("2 of 2 passed")
    expect(compare.locator("thead")).to_contain_text("1 of 2 passed")
    expect(page.locator("#eval-compare-summary")).to_have_text(
        "1 case changed between the two versions."
    )
    expect(compare.locator("tr.eval-changed")).to_have_count(1)
    expect(compare.locator("tr.eval-changed td").first).to_contain_text(QUESTIONS[0])
    assert_accessible(tab)

    # Publishing the draft, which fails more cases than the live version: refused.
    page.goto(f"/admin/agents/agentprofile/{profile.pk}/versions/2/")
    expect(page.locator("#version-draft")).to_contain_text("This version is a draft")
    assert_accessible(tab)
    page.get_by_role("button", name="Publish version 2").click()
    expect(page.locator(".messagelist")).to_contain_text(
        "passes 1 of 2 cases of the set “Arithmetic”"
    )
    expect(page.locator(".messagelist")).to_contain_text("It cannot be published.")
    assert prompt_version_live(profile=profile) == live
    draft.refresh_from_db()
    assert draft.is_draft
    profile.refresh_from_db()
    assert profile.model_config_id != worse_endpoint.pk
