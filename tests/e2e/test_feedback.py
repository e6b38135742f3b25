"""Under a finished answer: thumbs up or down with a comment, which staff then see per prompt
version in the admin; and Copy, which puts the answer's Markdown on the clipboard."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import AnswerFeedback
from agents.services.conversations import conversation_create
from agents.services.prompt_versions import prompt_version_ensure
from tests.answers import finished_answer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ANSWER = "The product is **42**.\n\n```python\nprint(6 * 7)\n```"


@pytest.fixture
def answered(stack, user, model_name):
    profile = stack.profile(model_name)
    version = prompt_version_ensure(profile=profile)
    conversation = conversation_create(owner=user, title="Products", profile=profile)
    answer = finished_answer(conversation=conversation, answer=ANSWER, profile_version=version)
    return conversation, answer


def test_thumbs_and_comment_are_stored_and_shown_in_the_admin(open_tab, user, make_user, answered):
    conversation, answer = answered
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    up = page.get_by_role("button", name="Good answer")
    down = page.get_by_role("button", name="Bad answer")
    expect(up).to_have_attribute("aria-pressed", "false")

    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    page.get_by_label("Comment on this answer (optional)").fill("Right, and nicely short.")
    page.get_by_role("button", name="Save comment").click()
    expect(page.locator(".feedback-status")).to_have_text("Comment saved.")
    feedback = AnswerFeedback.objects.get()
    assert (feedback.message, feedback.user, feedback.rating) == (answer, user, "down")
    assert feedback.comment == "Right, and nicely short."
    assert feedback.prompt_version == answer.run.profile_version

    # Changing the thumb keeps the comment; a reload shows what was chosen.
    up.click()
    expect(page.locator(".feedback-status")).to_have_text("Thanks for the feedback.")
    expect(up).to_have_attribute("aria-pressed", "true")
    expect(down).to_have_attribute("aria-pressed", "false")
    page.reload()
    expect(page.get_by_role("button", name="Good answer")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_label("Comment on this answer (optional)")).to_have_value(
        "Right, and nicely short."
    )
    assert list(AnswerFeedback.objects.values_list("rating", "comment")) == [
        ("up", "Right, and nicely short.")
    ]

    staff = make_user("staffer", is_staff=True, is_superuser=True)
    admin = open_tab(staff, path="/admin/agents/answerfeedback/by-version/").page
    row = admin.locator(f'#feedback-stats tr[data-profile="{conversation.profile.name}"]')
    expect(row).to_have_count(1)
    expect(row.locator(".count")).to_have_text("1")
    expect(row.locator(".share")).to_have_text("100% (1)")
    expect(row).to_contain_text("Right, and nicely short.")
    assert tab.errors == []


def test_pressing_the_chosen_thumb_again_clears_the_feedback(open_tab, user, answered):
    conversation, _ = answered
    page = open_tab(user, path=f"/c/{conversation.pk}/").page
    up = page.get_by_role("button", name="Good answer")
    up.click()
    expect(page.locator(".feedback-status")).to_have_text("Thanks for the feedback.")
    assert AnswerFeedback.objects.count() == 1
    up.click()
    expect(page.locator(".feedback-status")).to_have_text("Feedback removed.")
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(page.locator(".feedback-comment")).to_be_hidden()
    assert not AnswerFeedback.objects.exists()


def test_copy_puts_the_answers_markdown_on_the_clipboard(open_tab, user, answered):
    conversation, _ = answered
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = page.get_by_role("button", name="Copy the answer as Markdown")
    copy.click()
    expect(copy).to_have_text("Copied")
    # Said to screen readers too, through the page's live region.
    expect(page.get_by_role("status").filter(has_text="Copied")).to_have_count(1)
    assert page.evaluate("navigator.clipboard.readText()") == ANSWER
    assert tab.errors == []
