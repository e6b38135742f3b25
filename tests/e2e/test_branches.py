"""Versions in the browser: regenerate and edit keep the earlier ones as siblings, the
‹ 2 / 3 › switcher shows each branch with its whole continuation, the choice survives a
reload, and the next question continues the branch shown (as the model's request proves)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import Conversation, Message
from agents.services.conversations import conversation_create
from tests.e2e.test_accessibility import assert_accessible, dark, light
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def answer(text: str) -> Reply:
    return Reply(f"Thought: I know this.\nFinal Answer: {text}")


def switch(page, article, direction: str) -> None:
    """Press ‹ or › on one message and wait until the server has the new branch."""
    with page.expect_response(lambda response: "/branch/" in response.url) as response:
        article.get_by_role("button", name=f"{direction} version").click()
    assert response.value.ok


def sent_contents(stack, model_name: str) -> str:
    """Everything the model was sent in its latest request, as one text."""
    request = stack.model.requests(model_name)[-1]
    return "\n".join(str(message.get("content", "")) for message in request["messages"])


def test_regenerate_twice_switch_between_the_answers_reload_and_continue(
    stack, open_tab, user, model_name
):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(
        model_name,
        [
            answer("crimson-one"),
            answer("azure-two"),
            answer("golden-three"),
            answer("the follow-up answer"),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    reply = page.locator(".msg.assistant")
    ask(page, "Name a colour.")
    expect(page.locator(".answer")).to_have_text(["crimson-one"])
    expect(reply.locator(".branch-switch")).to_have_count(0)  # one version: no switcher

    page.get_by_role("button", name="Regenerate").click()
    expect(page.locator(".answer")).to_have_text(["azure-two"])
    expect(reply.locator(".branch-position")).to_have_text("2 / 2")
    page.get_by_role("button", name="Regenerate").click()
    expect(page.locator(".answer")).to_have_text(["golden-three"])
    expect(reply.locator(".branch-position")).to_have_text("3 / 3")
    expect(reply.get_by_role("button", name="Next version")).to_be_disabled()

    switch(page, reply, "Previous")
    expect(page.locator(".answer")).to_have_text(["azure-two"])
    expect(reply.locator(".branch-position")).to_have_text("2 / 3")
    # The switcher is drawn anew for the version shown; the button pressed keeps the focus.
    expect(reply.get_by_role("button", name="Previous version")).to_be_focused()
    switch(page, reply, "Previous")
    expect(page.locator(".answer")).to_have_text(["crimson-one"])
    expect(reply.locator(".branch-position")).to_have_text("1 / 3")
    switch(page, reply, "Next")
    switch(page, reply, "Previous")
    expect(reply.locator(".branch-position")).to_have_text("1 / 3")

    # The choice is the server's: a reload shows the first answer, with its switcher.
    page.reload()
    expect(page.locator(".answer")).to_have_text(["crimson-one"])
    expect(reply.locator(".branch-position")).to_have_text("1 / 3")
    first_answer = Message.objects.get(conversation=conversation, content="crimson-one")
    assert Conversation.objects.get(pk=conversation.pk).active_leaf_id == first_answer.pk
    # The switcher passes axe-core in both themes (tests/e2e/test_accessibility.py).
    for theme in (light, dark):
        theme(page)
        assert_accessible(tab)

    # The next question continues that branch: the model reads the first answer only.
    ask(page, "Why that one?")
    expect(page.locator(".answer")).to_have_text(["crimson-one", "the follow-up answer"])
    sent = sent_contents(stack, model_name)
    assert "crimson-one" in sent
    assert "azure-two" not in sent
    assert "golden-three" not in sent
    question = Message.objects.get(conversation=conversation, content="Why that one?")
    assert question.parent_id == first_answer.pk
    assert tab.errors == []


def test_edit_a_middle_question_then_switch_back_to_the_original_branch(
    stack, open_tab, user, model_name
):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(
        model_name,
        [
            answer("answer one"),
            answer("answer two"),
            answer("answer three"),
            answer("answer two, edited"),
            answer("after the original"),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    for number, text in enumerate(["one", "two", "three"], start=1):
        ask(page, f"Question {text}?")
        expect(page.locator(".answer")).to_have_count(number)
        expect(page.locator(".answer").last).to_have_text(f"answer {text}")

    middle = page.locator(".msg.user").nth(1)
    middle.get_by_role("button", name="Edit this message and ask again").click()
    page.get_by_label("Edit your message").fill("Question two, put differently?")
    page.get_by_role("button", name="Send as a new question").click()
    # The edit starts a branch after the first turn; the third question is not on it.
    expect(page.locator(".answer")).to_have_text(["answer one", "answer two, edited"])
    expect(page.locator(".msg.user .bubble")).to_have_text(
        ["Question one?", "Question two, put differently?"]
    )
    edited = page.locator(".msg.user").nth(1)
    expect(edited.locator(".branch-position")).to_have_text("2 / 2")
    expect(page.locator(".msg.user").first.locator(".branch-switch")).to_have_count(0)

    # Back to the original: its whole continuation returns, the third turn included.
    switch(page, edited, "Previous")
    expect(page.locator(".msg.user .bubble")).to_have_text(
        ["Question one?", "Question two?", "Question three?"]
    )
    expect(page.locator(".answer")).to_have_text(["answer one", "answer two", "answer three"])
    expect(page.locator(".msg.user").nth(1).locator(".branch-position")).to_have_text("1 / 2")

    page.reload()
    expect(page.locator(".answer")).to_have_text(["answer one", "answer two", "answer three"])
    ask(page, "And after that?")
    expect(page.locator(".answer").last).to_have_text("after the original")
    sent = sent_contents(stack, model_name)
    assert "answer three" in sent
    assert "Question three?" in sent
    assert "put differently" not in sent
    assert "answer two, edited" not in sent
    assert tab.errors == []
