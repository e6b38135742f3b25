"""``/compact`` in the composer folds the conversation into a stored summary, and the chat
shows a quiet marker that opens to the summary in use."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.memory.testing import summariser_policy
from agents.models import Conversation, MemorySummary
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_compact_shows_a_marker_that_opens_to_the_summary(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=())
    stack.model.script(
        model_name,
        [
            Reply("Thought: Noted.\nFinal Answer: I will remember that Miso is your cat."),
            Reply("Thought: Easy.\nFinal Answer: 2 + 2 is 4."),
        ],
    )
    # Once the scripted answers are used up, the summariser's request gets a real fold.
    stack.model.policy(model_name, summariser_policy)

    page = open_tab(user, path="/").page
    page.get_by_label("Agent").select_option(profile.slug)
    ask(page, "Please remember that my cat is called Miso.")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator(".msg.assistant .answer")).to_have_text(
        "I will remember that Miso is your cat."
    )
    expect(page.locator(".msg.assistant .usage")).to_have_count(1)  # the run has ended
    ask(page, "What is 2 + 2?")
    expect(page.locator(".msg.assistant .answer").last).to_have_text("2 + 2 is 4.")
    expect(page.locator(".msg.assistant .usage")).to_have_count(2)
    expect(page.locator(".summary-marker")).to_have_count(0)

    ask(page, "/compact")
    expect(page.locator("#notice")).to_contain_text("Summarising")
    marker = page.locator(".summary-marker")
    expect(marker).to_be_visible()
    marker.locator("summary").click()
    expect(marker).to_contain_text("Miso")

    conversation = Conversation.objects.get(owner=user)
    summary = MemorySummary.objects.get(conversation=conversation)
    assert "Miso" in summary.text
    assert summary.covers_through == conversation.messages.order_by("id").last()
    # "/compact" is a command, never a message to the agent.
    assert not conversation.messages.filter(content="/compact").exists()

    # A reload shows the same marker, from the stored summary.
    page.reload()
    page.locator(".summary-marker summary").click()
    expect(page.locator(".summary-marker")).to_contain_text("Miso")
