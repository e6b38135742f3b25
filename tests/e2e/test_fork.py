""" "Retry from here" in the browser: a three-step run forked at its second step. The new
branch starts with the first step as it was (not run again), the model is called from there,
and the answer's switcher shows both branches."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.services.conversations import conversation_create
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_branches import sent_contents
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def add(thought: str, sum_text: str) -> Reply:
    return Reply(f"Thought: {thought}\nAction: calculator\nAction Input: {sum_text}")


def test_retry_from_the_second_step_keeps_the_first_and_adds_a_branch(
    stack, open_tab, user, model_name
):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(
        model_name,
        [
            add("First the apples.", "17 + 25"),
            add("Then the pears.", "8 + 5"),
            Reply("Thought: Both counted.\nFinal Answer: 42 apples and 13 pears."),
            Reply("Thought: Apples are enough.\nFinal Answer: 42 apples, pears not counted."),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Count the fruit.")
    reply = page.locator(".msg.assistant")
    expect(page.locator(".answer")).to_have_text(["42 apples and 13 pears."])
    expect(reply.locator(".branch-switch")).to_have_count(0)
    requests_before = len(stack.model.requests(model_name))

    page.locator("details.steps summary").click()
    second = page.locator(".step.thought", has_text="Then the pears.")
    with page.expect_response(lambda response: "/fork/" in response.url) as response:
        second.get_by_role("button", name="Retry from here").click()
    assert response.value.status == 201

    expect(page.locator(".answer")).to_have_text(["42 apples, pears not counted."])
    expect(reply.locator(".branch-position")).to_have_text("2 / 2")
    # The new branch starts with the first step as it was, then the model's new turn.
    page.locator("details.steps summary").click()
    steps = page.locator("#thread .msg.assistant .step")
    expect(steps.locator(".step-text, .tool-input, pre.observation-text")).to_have_text(
        ["First the apples.", "17 + 25", "42", "Apples are enough."]
    )
    # One model call for the fork, holding the first step and nothing of the second.
    assert len(stack.model.requests(model_name)) == requests_before + 1
    sent = sent_contents(stack, model_name)
    assert "First the apples." in sent
    assert "Observation: 42" in sent
    assert "Then the pears." not in sent
    assert_accessible(tab)

    # Both branches, one switch apart.
    with page.expect_response(lambda response: "/branch/" in response.url):
        reply.get_by_role("button", name="Previous version").click()
    expect(page.locator(".answer")).to_have_text(["42 apples and 13 pears."])
    expect(reply.locator(".branch-position")).to_have_text("1 / 2")
