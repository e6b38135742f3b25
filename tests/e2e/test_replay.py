"""Replaying a run from the admin's run inspector, in Chromium: the form, the side-by-side
page reloading until the replay ends, and both pages accessible at desktop and 375 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentRun
from agents.services.prompt_versions import prompt_version_ensure
from tests.e2e.conftest import DESKTOP, MOBILE
from tests.e2e.test_accessibility import _finished_run, assert_accessible, dark, light
from tests.e2e.test_chat import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

VIEWS = {"desktop-light": (DESKTOP, light), "mobile-dark": (MOBILE, dark)}


@pytest.mark.parametrize("view", VIEWS)
def test_staff_replay_a_run_and_read_it_beside_the_original(
    stack, open_tab, make_user, user, model_name, view
):
    viewport, scheme = VIEWS[view]
    profile, original = _finished_run(stack, user, model_name)
    profile.system_prompt = "Show your working in one line."
    profile.save()
    version = prompt_version_ensure(profile=profile)
    # The new version calls the calculator as the original did (answered from the record),
    # then answers in other words.
    stack.model.script(
        model_name,
        [
            Reply("Thought: I should add.\nAction: calculator\nAction Input: 2 + 2"),
            Reply("Thought: The calculator says 4.\nFinal Answer: 2 + 2 makes **4**."),
        ],
    )
    staff = make_user("replayer", is_staff=True, is_superuser=True)
    tab = open_tab(staff, viewport=viewport, path="/admin/", before_load=scheme)
    page = tab.page
    page.goto(f"/admin/agents/agentrun/{original.pk}/change/")
    assert_accessible(tab)

    page.get_by_label("Prompt version").select_option(str(version.pk))
    page.get_by_role("button", name="Replay").click()

    # The page reloads itself until the replay has ended.
    expect(page.locator(".chatsite-compare-steps")).to_contain_text("makes", timeout=60_000)
    expect(page.locator(".chatsite-live")).to_have_count(0)
    replay = AgentRun.objects.get(replay_of=original)
    assert replay.status == AgentRun.Status.SUCCEEDED
    assert page.locator("tr.chatsite-differs mark").count() > 0
    assert_accessible(tab)
    if view == "desktop-light":
        screenshot(page, "replay-compare.png")
