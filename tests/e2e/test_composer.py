"""The composer and its notices, as a user meets them: commands, limits, refusals, another tab
deleting the chat, and the edit box."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentProfile, Conversation
from agents.protocol import max_message_chars
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask
from tests.processes import DaphneProcess, process_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def answered_conversation(stack, user, model_name) -> Conversation:
    stack.model.script(model_name, [Reply("Thought: Easy.\nFinal Answer: four")])
    return conversation_create(owner=user, profile=stack.profile(model_name))


@pytest.mark.parametrize("command", ["/compact", "/Compact"])
def test_compact_reports_success_as_information_not_as_an_error(
    stack, open_tab, user, model_name, command
):
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    page = open_tab(user, path=f"/c/{conversation.pk}/").page
    ask(page, command)
    status = page.get_by_role("status").filter(has_text=re.compile("summar", re.I))
    expect(status).to_be_visible()
    expect(page.locator("#notice")).to_have_class(re.compile(r"\binfo\b"))
    expect(page.get_by_role("alert")).to_have_count(0)
    assert stack.model.requests(model_name) == []


@pytest.mark.parametrize("command", ["/compact", "/COMPACT"])
def test_compact_in_a_new_chat_is_not_sent_as_a_question(
    stack, open_tab, user, model_name, command
):
    profile = stack.profile(model_name)
    page = open_tab(user, path="/").page
    page.get_by_label("Agent").select_option(profile.slug)
    ask(page, command)
    expect(page.get_by_role("status").filter(has_text="Nothing to summarise")).to_be_visible()
    assert page.url == f"{stack.daphne.url}/"
    assert not Conversation.objects.filter(owner=user).exists()
    assert stack.model.requests(model_name) == []


def test_the_demo_banner_follows_the_agent_picker(stack, open_tab, user, model_name):
    # A site with no model endpoint in its settings: a profile without one gets the demo.
    daphne = DaphneProcess(process_env(OPENAI_BASE_URL="", OPENAI_API_KEY="")).start()
    try:
        real = stack.profile(model_name)
        demo = AgentProfile.objects.create(name="Offline demo", slug="offline-demo")
        page = open_tab(user, path="/", daphne=daphne).page
        banner = page.locator("#demo-banner")
        picker = page.get_by_label("Agent")
        picker.select_option(demo.slug)
        expect(banner).to_be_visible()
        picker.select_option(real.slug)
        expect(banner).to_be_hidden()
        picker.select_option(demo.slug)
        expect(banner).to_be_visible()
    finally:
        daphne.stop()


def test_a_paste_over_the_limit_is_kept_counted_and_refused_clearly(
    stack, open_tab, user, model_name
):
    limit = max_message_chars()
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    page = open_tab(user, path=f"/c/{conversation.pk}/").page
    box = page.get_by_label("Message", exact=True)
    box.focus()
    pasted = "x" * (limit + 10)
    page.keyboard.insert_text(pasted)  # what a paste does: no key events per character

    counter = page.locator("#char-count")
    expect(counter).to_have_text(f"{limit + 10:,} / {limit:,}")
    expect(counter).to_have_class(re.compile(r"\bover\b"))
    box.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text(
        f"Your message is {limit + 10:,} characters; the limit is {limit:,}."
    )
    assert box.input_value() == pasted  # nothing the user typed is lost
    expect(page.locator(".msg.user")).to_have_count(0)
    assert stack.model.requests(model_name) == []

    # Shortened below the limit, it goes.
    stack.model.script(model_name, [Reply("Final Answer: ok")])
    box.fill("x" * (limit - 1))
    expect(counter).not_to_have_class(re.compile(r"\bover\b"))
    box.press("Enter")
    expect(page.locator(".msg.user")).to_have_count(1)
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")  # the run ended


def test_deleting_a_chat_updates_the_other_tabs(stack, open_tab, user, model_name):
    profile = stack.profile(model_name)
    doomed = conversation_create(owner=user, profile=profile, title="Doomed chat")
    conversation_create(owner=user, profile=profile, title="Another chat")
    deleting = open_tab(user, path=f"/c/{doomed.pk}/").page
    # A second tab of the same browser on the same chat, and one on the start page.
    same_chat = deleting.context.new_page()
    same_chat.goto(f"/c/{doomed.pk}/")
    start_page = deleting.context.new_page()
    start_page.goto("/")
    # And another device (its own browser) on the same chat.
    elsewhere = open_tab(user, path=f"/c/{doomed.pk}/").page
    for page in (same_chat, start_page, elsewhere):
        expect(page.get_by_role("link", name="Doomed chat")).to_be_visible()

    deleting.get_by_role("group").filter(has_text="More").locator("summary").click()
    deleting.get_by_role("button", name="Delete", exact=True).click()
    expect(deleting.locator("#sidebar-toast")).to_contain_text("Deleted “Doomed chat”.")
    # Deleted when the Undo toast runs out, then the page leaves for a new chat.
    expect(deleting).to_have_url(f"{stack.daphne.url}/")
    assert not Conversation.objects.filter(pk=doomed.pk).exists()

    for page in (same_chat, start_page):
        expect(page.get_by_role("link", name="Doomed chat")).to_have_count(0)
        expect(page.get_by_role("link", name="Another chat")).to_be_visible()
    expect(same_chat.get_by_role("alert")).to_contain_text("This conversation was deleted.")

    # The other device learns it on its next send: no grey bubble stays, the text comes back.
    box = elsewhere.get_by_label("Message", exact=True)
    box.fill("Are you still there?")
    box.press("Enter")
    expect(elsewhere.get_by_role("alert")).to_contain_text("This conversation was deleted.")
    expect(elsewhere.locator(".msg.user")).to_have_count(0)
    expect(box).to_have_value("Are you still there?")
    expect(elsewhere.get_by_role("link", name="Doomed chat")).to_have_count(0)


def test_a_rate_limit_says_how_long_to_wait_and_stays_until_then(stack, open_tab, user, model_name):
    """The refusal carries ``retry_after``; the page counts down on its own clock."""
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))

    def refuse_sends(page):
        page.clock.install()

        def handle(ws):
            server = ws.connect_to_server()

            def from_page(message):
                frame = json.loads(message)
                if frame.get("type") != "message.send":
                    server.send(message)
                    return
                refusal = {
                    "type": "error",
                    "code": "rate_limited",
                    "message": "At most 20 messages a minute.",
                    "client_id": frame["client_id"],
                    "retry_after": 30,
                }
                ws.send(json.dumps(refusal))

            ws.on_message(from_page)

        page.route_web_socket(re.compile(r"/ws/conversations/"), handle)

    page = open_tab(user, path=f"/c/{conversation.pk}/", before_load=refuse_sends).page
    ask(page, "One more, please.")
    alert = page.get_by_role("alert")
    expect(alert).to_have_text("At most 20 messages a minute. You can send again in 30 s.")
    expect(page.get_by_label("Message", exact=True)).to_have_value("One more, please.")

    page.clock.run_for(9_000)  # past the 8 s after which the old notice vanished
    expect(alert).to_have_text("At most 20 messages a minute. You can send again in 21 s.")
    page.clock.run_for(22_000)
    expect(page.locator("#notice")).to_be_hidden()


def test_enter_sends_the_edit_box(stack, open_tab, user, model_name):
    conversation = answered_conversation(stack, user, model_name)
    page = open_tab(user, path=f"/c/{conversation.pk}/").page
    ask(page, "What is 2 + 2?")
    expect(page.locator(".answer")).to_have_text("four")

    stack.model.script(model_name, [Reply("Final Answer: six")])
    page.get_by_role("button", name="Edit this message and ask again").click()
    editor = page.get_by_label("Edit your message")
    editor.fill("What is 3 + 3?")
    editor.press("Shift+Enter")  # a new line, not a send
    editor.type("Quickly.")
    editor.press("Enter")
    # The edit is a new version of the question: it replaces the original on screen.
    expect(page.locator(".msg.user .bubble")).to_have_text(["What is 3 + 3?\nQuickly."])
    expect(page.locator(".msg.user .branch-position")).to_have_text("2 / 2")
    expect(page.locator(".answer")).to_have_text(["six"])


def test_signing_out_in_another_tab_stops_the_chat_from_reconnecting(
    stack, open_tab, user, model_name
):
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    chat = open_tab(user, path=f"/c/{conversation.pk}/").page
    other = chat.context.new_page()
    other.goto("/")
    other.locator("#user-menu-button").click()
    other.get_by_role("menuitem", name="Sign out").click()

    # The server closes the chat's socket with 4401; the page says why, and does not retry.
    expect(chat.locator("#connection-status")).to_have_text(
        "You have signed out. Sign in again to go on."
    )
