"""Asking in the browser: the steps arrive live and in order, the answer is Markdown, a reload
mid-run shows every step once, and Stop really stops the run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Gate, Reply
from agents.models import AgentRun, Conversation, Message
from agents.services.conversations import conversation_create
from tests.e2e.conftest import MOBILE, WAIT_MS

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ANSWER_MARKDOWN = (
    "The sum is **4**.\n\n"
    "- two\n- plus two\n\n"
    "| a | b | a + b |\n|---|---|---|\n| 2 | 2 | 4 |\n\n"
    "```python\nprint(2 + 2)\n```"
)


def calculator_script(*, gate: Gate | None = None, answer: str = ANSWER_MARKDOWN) -> list:
    """Thought and action, then (after the tool) a streamed final answer.

    With a ``gate``, the final answer waits until the test opens it: the run stays in
    progress, with three steps shown, for as long as the test needs.
    """
    final = Reply(
        f"Thought: The calculator says 4.\nFinal Answer: {answer}",
        chunk_size=3,
        chunk_interval=0.04,
    )
    return [
        Reply(
            "Thought: I should add the two numbers with the calculator.\n"
            "Action: calculator\nAction Input: 2 + 2"
        ),
        gate.hold(final) if gate else final,
    ]


def step_kinds(page) -> list[str]:
    return page.locator("#thread .step").evaluate_all("items => items.map(i => i.classList[1])")


def step_seqs(page) -> list[int]:
    return page.locator("#thread .step[data-seq]").evaluate_all(
        "items => items.map(i => Number(i.dataset.seq))"
    )


def screenshot(page, name: str) -> None:
    """Saved only when asked (CHATSITE_SCREENSHOT_DIR), so a test run leaves the tree alone."""
    folder = os.environ.get("CHATSITE_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name))


def ask(page, text: str) -> None:
    """Type and send, once the page's script is wired up (static/js/chat.js marks it)."""
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_sign_in_ask_and_watch_the_steps_arrive_in_order(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    final_answer = Gate()
    stack.model.script(model_name, calculator_script(gate=final_answer))

    tab = open_tab(None, path="/")
    page = tab.page
    expect(page).to_have_url(f"{stack.daphne.url}/accounts/login/?next=/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()

    page.get_by_label("Agent").select_option(profile.slug)
    ask(page, "What is 2 + 2?")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    conversation = Conversation.objects.get(owner=user)
    assert page.url == f"{stack.daphne.url}/c/{conversation.pk}/"
    assert conversation.profile == profile
    expect(page.locator(".msg.user .bubble")).to_have_text("What is 2 + 2?")

    # While the model holds the final answer back, the first three steps are already there,
    # in order, and no answer is.
    final_answer.wait_arrived()
    expect(page.locator(".step.observation")).to_be_visible()
    assert step_kinds(page)[:3] == ["thought", "action", "observation"]
    expect(page.locator(".step.action .tool-name")).to_have_text("calculator")
    expect(page.locator(".step.action .tool-input")).to_have_text("2 + 2")
    expect(page.locator(".step.observation pre")).to_have_text("4")
    expect(page.locator(".msg.assistant .usage")).to_have_count(0)
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.locator(".answer strong")).to_have_count(0)
    final_answer.open()

    # The answer streams in as Markdown rendered in the browser...
    page.wait_for_selector(".answer.streaming strong", state="attached", timeout=WAIT_MS)
    # ...then becomes the server-rendered Markdown.
    answer = page.locator(".msg.assistant .answer")
    expect(answer.locator("strong")).to_have_text("4")
    expect(answer.locator("ul > li")).to_have_count(2)
    expect(answer.locator("table td").last).to_have_text("4")
    expect(answer.locator("pre code.language-python")).to_have_text("print(2 + 2)\n")
    expect(answer.get_by_role("button", name="Copy the code")).to_be_visible()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert step_kinds(page) == ["thought", "action", "observation", "thought"]

    # Done: the steps fold away, and open again on request.
    steps = page.locator(".msg.assistant details.steps")
    expect(steps).not_to_have_attribute("open", "")
    steps.locator("summary").click()
    expect(page.locator(".step.thought").first).to_be_visible()
    screenshot(page, "desktop.png")
    assert_every_control_is_labelled(page)
    assert tab.errors == []


def assert_every_control_is_labelled(page) -> None:
    """Screen readers announce each button, link and field by a name: none may be empty."""
    unnamed = page.locator("button, a[href], input, select, textarea, summary").evaluate_all(
        """nodes => nodes.filter(n => n.offsetParent !== null || n.closest('dialog'))
            .filter(n => {
                const label = n.getAttribute('aria-label') || n.getAttribute('aria-labelledby')
                    || (n.labels && n.labels.length) || n.textContent.trim()
                    || n.getAttribute('title');
                return !label;
            })
            .map(n => n.outerHTML.slice(0, 80))"""
    )
    assert unnamed == []


def test_reload_mid_run_shows_every_step_once_then_goes_on_live(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    final_answer = Gate()
    stack.model.script(model_name, calculator_script(gate=final_answer))
    conversation = conversation_create(owner=user, profile=profile)

    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 2 + 2?")
    expect(page.locator(".step.observation")).to_be_visible()
    final_answer.wait_arrived()

    page.reload()
    # Everything so far, once each, from the stored events...
    expect(page.locator(".step")).to_have_count(3)
    expect(page.locator(".msg.user")).to_have_count(1)
    assert step_kinds(page) == ["thought", "action", "observation"]
    # ...then the rest of the run, live.
    final_answer.open()
    expect(page.locator(".answer strong")).to_have_text("4")
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")  # it ended
    assert step_kinds(page) == ["thought", "action", "observation", "thought"]
    seqs = step_seqs(page)
    assert seqs == sorted(set(seqs)), "each stored step appears once, in seq order"
    expect(page.locator(".msg.assistant")).to_have_count(1)
    assert tab.errors == []


def test_stop_ends_the_run_on_the_server(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    long_answer = "This answer goes on for a long while. " * 40
    stack.model.script(
        model_name,
        [
            Reply("Thought: Let me add.\nAction: calculator\nAction Input: 2 + 2"),
            Reply(
                f"Thought: I know it now.\nFinal Answer: {long_answer}",
                chunk_size=4,
                chunk_interval=0.1,
            ),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "Talk for a while")

    page.wait_for_selector(".answer.streaming", state="attached", timeout=WAIT_MS)
    page.get_by_role("button", name="Stop").click()

    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    run = AgentRun.objects.get(conversation=conversation)
    assert stack.wait_for_run(run.pk).status == AgentRun.Status.CANCELLED
    # Nothing more arrives for a cancelled run, and the composer is free for the next question.
    expect(page.get_by_role("button", name="Regenerate")).to_be_visible()
    assert tab.errors == []


def test_mobile_width_uses_a_drawer_and_still_chats(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(model_name, calculator_script())
    conversation = conversation_create(owner=user, profile=profile, title="Adding up")

    tab = open_tab(user, viewport=MOBILE, path=f"/c/{conversation.pk}/")
    page = tab.page
    sidebar = page.get_by_role("complementary", name="Conversations")
    opener = page.get_by_role("button", name="Open the conversation list")
    expect(sidebar).to_be_hidden()
    opener.click()
    expect(sidebar).to_be_visible()
    expect(opener).to_have_attribute("aria-expanded", "true")
    expect(sidebar.get_by_role("link", name="Adding up")).to_be_visible()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(opener).to_be_focused()

    ask(page, "What is 2 + 2?")
    expect(page.locator(".answer strong")).to_have_text("4")
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")  # it ended
    page.locator("details.steps summary").click()
    expect(page.locator(".step.observation")).to_be_visible()
    # Nothing sticks out sideways at 375 px.
    assert page.evaluate("document.documentElement.scrollWidth") <= MOBILE["width"]
    box = page.get_by_role("button", name="Send").bounding_box()
    assert box["x"] + box["width"] <= MOBILE["width"]
    screenshot(page, "mobile.png")
    assert tab.errors == []


def test_regenerate_and_edit_a_past_question(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(
        model_name,
        [
            Reply("Thought: Easy.\nFinal Answer: first answer"),
            Reply("Thought: Again.\nFinal Answer: second answer"),
            Reply("Thought: A new question.\nFinal Answer: six"),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 2 + 2?")
    expect(page.locator(".answer")).to_have_text(["first answer"])

    # Both keep their earlier versions as siblings, one switch away (tests/e2e/test_branches.py).
    page.get_by_role("button", name="Regenerate").click()
    expect(page.locator(".answer")).to_have_text(["second answer"])
    expect(page.locator(".msg.assistant .branch-position")).to_have_text("2 / 2")
    assert AgentRun.objects.filter(conversation=conversation).count() == 2

    page.get_by_role("button", name="Edit this message and ask again").click()
    page.get_by_label("Edit your message").fill("What is 3 + 3?")
    page.get_by_role("button", name="Send as a new question").click()
    expect(page.locator(".msg.user .bubble")).to_have_text(["What is 3 + 3?"])
    expect(page.locator(".msg.user").last).to_contain_text("edited and asked again")
    expect(page.locator(".msg.user .branch-position")).to_have_text("2 / 2")
    expect(page.locator(".answer")).to_have_text(["six"])
    assert tab.errors == []


def test_a_second_question_during_a_run_waits_for_the_answer_and_follows_it(
    stack, open_tab, user, model_name
):
    """The server takes one run at a time. A question asked while the agent is answering stays
    on the page, shown as pending, and goes once the run ends: then it continues from the
    answer just written, which the page only knew as a message at the run's end."""
    profile = stack.profile(model_name, tools=("calculator",))
    final_answer = Gate()
    stack.model.script(
        model_name,
        [*calculator_script(gate=final_answer), Reply("Thought: Easy.\nFinal Answer: **6**")],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 2 + 2?")
    expect(page.locator(".step.thought")).to_be_visible()

    ask(page, "And 3 + 3?")
    expect(page.locator(".msg.user.pending .bubble")).to_have_text("And 3 + 3?")
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1
    assert not AgentRun.objects.get(conversation=conversation).is_terminal

    final_answer.open()
    expect(page.locator(".answer strong")).to_have_text(["4", "6"])
    expect(page.locator(".msg.user.pending")).to_have_count(0)
    expect(page.get_by_role("alert")).to_be_hidden()
    first_answer = Message.objects.get(
        conversation=conversation, role="assistant", content__contains="4"
    )
    second = Message.objects.get(conversation=conversation, content="And 3 + 3?")
    assert second.parent_id == first_answer.pk
    assert tab.errors == []


def test_a_model_failure_is_shown(stack, open_tab, user, model_name):
    from agents.llm.scripted import Fail

    profile = stack.profile(model_name, tools=("calculator",))
    stack.model.script(model_name, [Fail(401)])
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    expect(tab.page.locator("html[data-chat-ready]")).to_be_attached()
    box = tab.page.get_by_label("Message", exact=True)
    box.type("Hello?")
    box.press("Shift+Enter")  # a new line, not a send
    box.type("Anyone there?")
    expect(tab.page.locator(".msg.user")).to_have_count(0)
    box.press("Enter")
    expect(tab.page.locator(".msg.user .bubble")).to_have_text("Hello?\nAnyone there?")
    failed = tab.page.locator(".run-status.failed")
    expect(failed).to_contain_text("The run failed.")
    expect(tab.page.get_by_role("button", name="Stop")).to_be_hidden()


class FlakyNetwork:
    """Sits between the page and daphne on the conversation socket (Playwright's websocket
    routing), so a test can cut the connection and keep it down for a while."""

    def __init__(self) -> None:
        self.down = False
        self.open: list = []
        self.connections = 0

    def install(self, page) -> None:
        page.route_web_socket(re.compile(r"/ws/conversations/"), self.handle)

    def handle(self, ws) -> None:
        self.connections += 1
        if self.down:
            ws.close(code=1011, reason="network down")
            return
        self.open.append((ws, ws.connect_to_server()))

    def cut(self) -> None:
        self.down = True
        for page_side, server_side in self.open:
            server_side.close()
            page_side.close(code=1011, reason="network down")
        self.open.clear()


def test_a_dropped_connection_says_reconnecting_then_catches_up(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",))
    final_answer = Gate()
    stack.model.script(model_name, calculator_script(gate=final_answer))
    conversation = conversation_create(owner=user, profile=profile)
    network = FlakyNetwork()
    tab = open_tab(user, path=f"/c/{conversation.pk}/", before_load=network.install)
    page = tab.page
    ask(page, "What is 2 + 2?")
    expect(page.locator(".step.thought")).to_be_visible()

    network.cut()
    status = page.locator("#connection-status")
    expect(status).to_have_text("Reconnecting…")
    final_answer.open()
    # The run ends while the page is cut off. Wait in the browser's own loop, so Playwright
    # keeps answering (and refusing) the page's reconnect attempts meanwhile.
    run = AgentRun.objects.get(conversation=conversation)
    for _ in range(300):
        run.refresh_from_db()
        if run.is_terminal:
            break
        page.wait_for_timeout(100)
    assert run.status == AgentRun.Status.SUCCEEDED
    tried_while_down = network.connections

    network.down = False
    expect(page.locator(".answer strong")).to_have_text("4")
    expect(status).to_have_text("")
    assert tried_while_down >= 2, "the page kept trying while the network was down"
    # Missed events were replayed from the last seq seen, each step exactly once.
    assert step_kinds(page) == ["thought", "action", "observation", "thought"]
    seqs = step_seqs(page)
    assert seqs == sorted(set(seqs))
    assert tab.errors == []


def test_tool_errors_are_marked_and_a_limit_leaves_a_note(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, tools=("calculator",), max_iterations=2)
    stack.model.script(
        model_name,
        [
            Reply("Thought: Divide.\nAction: calculator\nAction Input: 1 / 0"),
            Reply("Thought: Try another tool.\nAction: abacus\nAction Input: 1 / 0"),
            Reply("Final Answer: I could not work it out."),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 1 / 0?")
    expect(page.locator(".answer")).to_have_text("I could not work it out.")
    page.locator("details.steps summary").click()

    # Each failure shows once, as an observation marked with the error's code.
    failed = page.locator(".step.observation.is-error")
    expect(failed).to_have_count(2)
    expect(page.locator(".step.error")).to_have_count(0)
    expect(failed.first.locator(".badge")).to_have_text("error · tool_error")
    expect(failed.last.locator(".badge")).to_have_text("error · unknown_tool")
    expect(failed.last).to_contain_text("abacus")
    expect(page.locator(".step.note")).to_contain_text("step limit")
    expect(page.locator(".usage")).to_contain_text("stopped at a limit")
    assert tab.errors == []
