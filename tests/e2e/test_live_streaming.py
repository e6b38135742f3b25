"""The words of a reply on the page as the model writes them, at a human pace.

The scripted model streams slowly and holds its reply at a ``Pause`` part-way: whatever the
page shows before the gate opens came from what the model had sent by then, so these tests
check order against the server's own signal, never against a clock.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Pause, Reply, ToolCalls
from agents.models import AgentRun, Conversation
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ANSWER_MARKDOWN, ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SLOW = {"chunk_size": 4, "chunk_interval": 0.03}
GATE_WAIT = 30  # seconds; a ceiling for the scripted server to reach its gate

# What the page shows of an answer, without the copy buttons on its code blocks.
ANSWER_TEXT_JS = """node => {
    const copy = node.cloneNode(true);
    for (const button of copy.querySelectorAll('.copy-code')) button.remove();
    return copy.textContent;
}"""


def gated(text: str, upto: str, **options) -> tuple[Reply, Pause]:
    """A slow reply that stops once ``upto`` (a prefix of ``text``) has been sent."""
    assert text.startswith(upto)
    gate = Pause(after_chars=len(upto))
    return Reply(text, pause=gate, **{**SLOW, **options}), gate


def wait_for(gate: Pause) -> None:
    assert gate.reached.wait(GATE_WAIT), "the model never got to its gate"


def ask_and_wait(stack, open_tab, user, model_name, replies, question, gate, **profile):
    """A new conversation's page with ``replies`` scripted; asks, and waits for ``gate``."""
    stack.model.script(model_name, replies)
    profile_row = stack.profile(model_name, **profile)
    conversation = conversation_create(owner=user, profile=profile_row)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    ask(tab.page, question)
    wait_for(gate)
    return tab, conversation


def test_a_thought_shows_as_it_is_written_and_folds_into_its_step(
    stack, open_tab, user, model_name
):
    thought = "I should add the numbers with the calculator, then answer."
    first, gate = gated(
        f"Thought: {thought}\nAction: calculator\nAction Input: 2 + 2",
        upto="Thought: I should add the numbers ",
    )
    tab, _ = ask_and_wait(
        stack,
        open_tab,
        user,
        model_name,
        [first, Reply("Thought: Done.\nFinal Answer: 4")],
        "What is 2 + 2?",
        gate,
    )
    page = tab.page

    # The model is held after "…the numbers ": those words are on the page already.
    live = page.locator(".step.thought.live .step-text")
    expect(live).to_contain_text("I should add the numbers")
    expect(page.locator(".steps > summary")).to_have_text("Thinking…")
    assert "calculator, then" not in live.text_content()
    expect(page.locator(".step.action")).to_have_count(0)

    gate.open()
    expect(page.locator(".step.action .tool-name")).to_have_text("calculator")
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    # Each stored thought took its live one's place: the whole text, once.
    expect(page.locator(".step.thought.live")).to_have_count(0)
    # Each stored thought, in order (the step also holds its label and, once the run has
    # ended, "Retry from here").
    expect(page.locator(".step.thought .step-text")).to_have_text([thought, "Done."])
    expect(page.locator(".answer")).to_have_text("4")
    assert tab.errors == []


def test_a_reload_mid_answer_shows_the_answer_so_far_at_once_then_the_rest(
    stack, open_tab, user, model_name
):
    answer = "Lisbon has seven hills, many trams, and a long river front to walk along."
    so_far = "Lisbon has seven hills, many trams,"
    final, gate = gated(
        f"Thought: I know this.\nFinal Answer: {answer}",
        upto=f"Thought: I know this.\nFinal Answer: {so_far}",
    )
    tab, conversation = ask_and_wait(
        stack, open_tab, user, model_name, [final], "Tell me about Lisbon.", gate
    )
    page = tab.page
    streaming = page.locator(".answer.streaming")
    expect(streaming).to_have_text(so_far)

    # The model sends nothing while the page reloads: all it shows comes from the server's
    # copy of the answer so far, once.
    page.reload()
    expect(streaming).to_have_text(so_far)
    expect(page.locator(".step.thought.live")).to_have_text("ThoughtI know this.")

    gate.open()
    run = stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    assert run.answer.content == answer
    assert page.locator(".answer").evaluate(ANSWER_TEXT_JS).strip() == answer
    assert tab.errors == []


def test_a_new_chat_whose_model_answers_at_once_loses_no_first_word(
    stack, open_tab, user, model_name
):
    answer = "Keeps going to test that no first word is lost on the way to the page."
    so_far = "Keeps going to test"
    final, gate = gated(f"Final Answer: {answer}", upto=f"Final Answer: {so_far}", delay=0)
    stack.model.script(model_name, [final])
    profile = stack.profile(model_name)

    def hold_the_socket_until_words_were_sent(page):
        # The new chat's socket opens only once the model has sent its first words.
        def handle(ws):
            wait_for(gate)
            ws.connect_to_server()

        page.route_web_socket(re.compile(r"/ws/conversations/"), handle)

    tab = open_tab(user, path="/", before_load=hold_the_socket_until_words_were_sent)
    page = tab.page
    page.get_by_label("Agent").select_option(profile.slug)
    ask(page, "Go on.")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator(".answer.streaming")).to_have_text(so_far)

    gate.open()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    conversation = Conversation.objects.get(owner=user)
    run = AgentRun.objects.get(conversation=conversation)
    assert run.answer.content == answer
    assert page.locator(".answer").evaluate(ANSWER_TEXT_JS).strip() == answer
    assert tab.errors == []


def test_live_markdown_reads_the_same_as_the_final_server_html(stack, open_tab, user, model_name):
    reply = f"Thought: Here it is.\nFinal Answer: {ANSWER_MARKDOWN}"
    final, gate = gated(reply, upto=reply)  # held after the last word, before the end
    tab, conversation = ask_and_wait(
        stack, open_tab, user, model_name, [final], "Show me some Markdown.", gate
    )
    page = tab.page

    # While it streams: Markdown, not raw text, with code, a list and a table.
    live = page.locator(".answer.streaming")
    expect(live.locator("pre code.language-python")).to_contain_text("print(2 + 2)")
    expect(live.locator("table td").last).to_have_text("4")
    expect(live.locator("ul > li")).to_have_count(2)
    expect(live.locator("strong")).to_have_text("4")
    expect(live.get_by_role("button", name="Copy the code")).to_be_visible()

    gate.open()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    answer = page.locator(".answer")
    expect(answer).not_to_have_class(re.compile("streaming"))
    stored = AgentRun.objects.get(conversation=conversation).answer.content
    # The page's renderer on the stored text reads exactly as the server's HTML does.
    in_browser = page.evaluate(
        """async (text) => {
            const { renderMarkdown } = await import('/static/js/markdown.js');
            const node = document.createElement('div');
            node.append(renderMarkdown(text));
            return node.outerHTML;
        }""",
        stored,
    )
    server = answer.evaluate("node => node.outerHTML")
    assert text_and_tags(page, in_browser) == text_and_tags(page, server)
    assert tab.errors == []


def text_and_tags(page, html: str) -> tuple[str, list[str]]:
    """An answer's text and element structure, without what the page adds to code blocks
    (copy buttons, language labels, highlighting spans)."""
    return tuple(
        page.evaluate(
            """html => {
                const node = new DOMParser().parseFromString(html, 'text/html').body.firstChild;
                for (const added of node.querySelectorAll('.copy-code, .code-language')) {
                    added.remove();
                }
                const tags = [...node.querySelectorAll('*')]
                    .filter(n => !n.parentElement.closest('code'))
                    .map(n => `${n.tagName} ${n.getAttribute('href') || ''}`);
                return [node.textContent, tags];
            }""",
            html,
        )
    )


def test_stop_says_stopping_at_once_and_stopped_when_the_run_is_cancelled(
    stack, open_tab, user, model_name
):
    answer = "This answer would go on for a long while if nobody stopped it."
    final, gate = gated(f"Final Answer: {answer}", upto="Final Answer: This answer")
    stack.model.script(model_name, [final])
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    held: list[str] = []  # run.cancel frames the page sent, not yet passed to the server
    sockets: list = []

    def hold_cancels(page):
        def handle(ws):
            server = ws.connect_to_server()
            sockets.append(server)
            ws.on_message(lambda m: held.append(m) if '"run.cancel"' in m else server.send(m))

        page.route_web_socket(re.compile(r"/ws/conversations/"), handle)

    tab = open_tab(user, path=f"/c/{conversation.pk}/", before_load=hold_cancels)
    page = tab.page
    ask(page, "Talk for a while.")
    # Waited for in the page: the routing above needs Playwright's loop to keep running.
    expect(page.locator(".answer.streaming")).to_have_text("This answer")
    assert gate.reached.is_set()

    page.get_by_role("button", name="Stop").click()
    # The server has not heard of it yet, and the page already says it is stopping.
    expect(page.locator(".steps > summary")).to_have_text("Stopping…")
    assert len(held) == 1
    expect(page.locator(".run-status.cancelled")).to_have_count(0)

    sockets[-1].send(held.pop())
    # The model stays held until the run is stopped: let go sooner, on a busy machine the
    # rest of the answer can arrive before the worker's cancel poll sees the stop, and the
    # run finishes instead (seen with the suite on two processes).
    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    gate.open()
    run = stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)
    assert run.status == AgentRun.Status.CANCELLED
    assert tab.errors == []


def test_native_tool_calling_streams_its_answer_and_takes_back_a_thought(
    stack, open_tab, user, model_name
):
    # The first reply's text looks like an answer until its tool call comes.
    thought_pause = Pause(after_chars=len("I should"))
    first = ToolCalls(
        [("calculator", {"expression": "2 + 2"})],
        text="I should add them.",
        pause=thought_pause,
        **SLOW,
    )
    answer = "The sum is **4**, as the calculator says."
    second, gate = gated(answer, upto="The sum is **4**,")
    stack.model.script(model_name, [first, second])
    profile = stack.profile(model_name, tools=("calculator",), mode="tools")
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    ask(page, "What is 2 + 2?")

    wait_for(thought_pause)
    expect(page.locator(".answer.streaming")).to_have_text("I should")
    thought_pause.open()
    expect(page.locator(".step.thought")).to_have_text("ThoughtI should add them.")
    expect(page.locator(".answer")).not_to_contain_text("I should")

    wait_for(gate)
    streaming = page.locator(".answer.streaming")
    expect(streaming.locator("strong")).to_have_text("4")
    expect(streaming).to_have_text("The sum is 4,")
    gate.open()
    expect(page.locator(".msg.assistant .usage")).to_contain_text("tokens")
    expect(page.locator(".answer")).to_have_text("The sum is 4, as the calculator says.")
    assert tab.errors == []
