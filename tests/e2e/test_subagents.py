"""A sub-agent in the browser: the child's run is drawn inside the parent's steps, its
approval card appears there, and approving it lets both finish (against a real daphne and
worker; the child's tool files tickets on a local server that counts what reaches it)."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentRun, ToolConfig
from tests.counting_server import CountingServer
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tickets():
    server = CountingServer()
    yield server
    server.close()


def test_the_childs_steps_and_approval_show_under_the_parents_call(
    stack, open_tab, user, model_name, tickets
):
    ticket = f"file_ticket_{uuid.uuid4().hex[:6]}"
    tickets.tool(ticket)
    child_model = f"{model_name}-child"
    helper = stack.profile(child_model, tools=(ticket,))
    delegate = f"delegate_{uuid.uuid4().hex[:6]}"
    ToolConfig.objects.create(
        name=delegate, kind="delegate", description="Hands a task.", config={"profile": helper.slug}
    )
    lead = stack.profile(model_name, tools=(delegate,))
    stack.model.script(
        child_model,
        [
            Reply(f'Thought: Filing.\nAction: {ticket}\nAction Input: {{"title": "Printer"}}'),
            Reply("Final Answer: Filed ticket 1."),
        ],
    )
    stack.model.script(
        model_name,
        [
            Reply(f"Thought: The helper files tickets.\nAction: {delegate}\nAction Input: File it"),
            Reply("Final Answer: The helper filed it."),
        ],
    )
    tab = open_tab(user, path="/")
    page = tab.page
    page.get_by_label("Agent").select_option(lead.slug)
    ask(page, "Please have the printer ticket filed.")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))

    nested = page.locator(".step.subagent-step .msg.assistant.subagent")
    expect(nested).to_have_count(1)
    request = nested.locator(".step.approval")
    expect(request.locator(".tool-name")).to_have_text(ticket)
    # The parent waits with its child; the child is not an answer of the branch.
    parent = page.locator(".msg.assistant:not(.subagent)")
    expect(parent).to_have_count(1)
    expect(parent.locator(":scope > .steps > summary .steps-title")).to_contain_text(
        "Waiting for you: approve or deny the call"
    )
    assert tickets.calls == 0
    assert_accessible(tab)

    request.get_by_role("button", name="Approve").click()

    expect(parent.locator(":scope > .answer")).to_have_text("The helper filed it.")
    expect(nested.locator(":scope > .answer")).to_have_text("Filed ticket 1.")
    parent_run = stack.wait_for_run(AgentRun.objects.get(parent_run__isnull=True).pk)
    assert parent_run.status == AgentRun.Status.SUCCEEDED
    assert tickets.calls == 1

    # A reload draws the same nesting from the stored frames.
    page.reload()
    expect(page.locator(".step.subagent-step .msg.assistant.subagent")).to_have_count(1)
    expect(page.locator(".msg.assistant:not(.subagent)")).to_have_count(1)
    assert not tab.errors
