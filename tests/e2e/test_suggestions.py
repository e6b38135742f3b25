"""Starting points: the empty chat shows the chosen agent's suggested prompts and its
description; clicking one fills the message box and sends it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import Conversation

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_suggested_prompt_fills_the_box_and_sends(stack, open_tab, user, model_name):
    profile = stack.profile(
        model_name,
        description="Does sums with a calculator.",
        suggested_prompts="What is (28 + 10) * 3?\nWhat is 7 squared?",
    )
    stack.model.script(model_name, [Reply("Thought: easy.\nFinal Answer: It is **114**.")])

    tab = open_tab(user, path="/")
    page = tab.page
    page.get_by_label("Agent").select_option(profile.slug)
    suggestions = page.get_by_role("list", name=f"Suggested prompts for {profile.name}")
    expect(suggestions).to_be_visible()
    expect(suggestions.get_by_role("button")).to_have_text(
        ["What is (28 + 10) * 3?", "What is 7 squared?"]
    )
    expect(page.locator("#profile-description")).to_have_text("Does sums with a calculator.")

    suggestions.get_by_role("button", name="What is (28 + 10) * 3?").click()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator(".msg.user .bubble")).to_have_text("What is (28 + 10) * 3?")
    expect(page.locator(".msg.assistant .answer strong")).to_have_text("114")
    conversation = Conversation.objects.get(owner=user)
    assert conversation.profile == profile
    asked = stack.model.requests(model_name)[0]["messages"]
    assert "What is (28 + 10) * 3?" in asked[-1]["content"]
    # An answer finished live gets the same tools as a replayed one.
    expect(page.get_by_role("button", name="Copy the answer as Markdown")).to_be_visible()
    expect(page.get_by_role("button", name="Good answer")).to_be_visible()
    assert tab.errors == []


def test_switching_agents_switches_the_suggestions(stack, open_tab, user, model_name):
    maths = stack.profile(model_name, description="Sums.", suggested_prompts="Add 2 and 2")
    clock = stack.profile(f"{model_name}-clock", description="Time.", suggested_prompts="Time?")
    page = open_tab(user, path="/").page
    page.get_by_label("Agent").select_option(maths.slug)
    expect(page.get_by_role("button", name="Add 2 and 2")).to_be_visible()
    expect(page.get_by_role("button", name="Time?")).to_be_hidden()
    page.get_by_label("Agent").select_option(clock.slug)
    expect(page.get_by_role("button", name="Time?")).to_be_visible()
    expect(page.get_by_role("button", name="Add 2 and 2")).to_be_hidden()
    expect(page.locator("#profile-description")).to_have_text("Time.")
