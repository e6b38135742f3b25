"""Approval before side effects and Continue after a budget, in the browser, against a real
daphne and worker. The tool files tickets on a local server that counts what reaches it."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentRun, ToolApproval
from tests.counting_server import CountingServer
from tests.e2e.test_accessibility import assert_accessible, dark, light
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FINAL = "Thought: That is done.\nFinal Answer: All done."


@pytest.fixture
def tickets():
    server = CountingServer()
    yield server
    server.close()


def _file_ticket(tool: str, title: str = "Broken printer") -> Reply:
    return Reply(f'Thought: I will file it.\nAction: {tool}\nAction Input: {{"title": "{title}"}}')


def _start(stack, open_tab, user, model_name, tickets, *, needs_approval=True, **profile):
    """A chat whose model files one ticket and then answers; returns (tab, tool name)."""
    tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
    tickets.tool(tool, needs_approval=needs_approval)
    chosen = stack.profile(model_name, tools=(tool,), **profile)
    stack.model.script(model_name, [_file_ticket(tool), Reply(FINAL)])
    tab = open_tab(user, path="/")
    tab.page.get_by_label("Agent").select_option(chosen.slug)
    ask(tab.page, "Please file a ticket about the printer.")
    expect(tab.page).to_have_url(re.compile(r"/c/\d+/$"))
    return tab, tool


def _paused(page, tool: str):
    request = page.locator(".step.approval")
    expect(request).to_have_count(1)
    expect(request.locator(".tool-name")).to_have_text(tool)
    expect(request.locator(".tool-input")).to_contain_text("Broken printer")
    expect(page.locator(".msg.assistant .steps-title")).to_contain_text(
        "Waiting for you: approve or deny the call"
    )
    return request


def _waits_still(page, said: str) -> None:
    """The run waits for its owner: nothing turns, and screen readers were told what for."""
    spinner = page.locator(".msg.assistant .steps .spinner")
    assert spinner.evaluate("n => getComputedStyle(n).animationName") == "none"
    expect(page.locator(".msg.assistant .steps-progress")).to_contain_text(said)
    expect(page.locator(".msg.assistant .steps-progress")).to_have_attribute("role", "status")


def _run() -> AgentRun:
    return AgentRun.objects.get()


def _ended(stack) -> AgentRun:
    """The run once its end is stored (the answer shows while it streams, a moment before)."""
    return stack.wait_for_run(_run().pk)


def test_approve_runs_the_call_once(stack, open_tab, user, model_name, tickets):
    tab, tool = _start(stack, open_tab, user, model_name, tickets)
    page = tab.page
    request = _paused(page, tool)
    _waits_still(page, "Waiting for you: approve or deny the call")
    assert tickets.calls == 0
    assert _run().status == AgentRun.Status.AWAITING_APPROVAL

    request.get_by_role("button", name="Approve").click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
    expect(request.locator(".approval-status")).to_have_text(f"Approved by {user.username}")
    expect(page.locator(".step.observation pre")).to_contain_text("Filed ticket 1.")
    assert tickets.paths == ["/tickets?title=Broken%20printer"]
    assert not tab.errors
    # No "picked up after an interruption" note: the pause was not a crash.
    expect(page.locator(".step.note")).to_have_count(0)


def test_deny_never_reaches_the_tool_and_the_model_reads_why(
    stack, open_tab, user, model_name, tickets
):
    tab, tool = _start(stack, open_tab, user, model_name, tickets)
    page = tab.page
    request = _paused(page, tool)

    request.get_by_label("Reason for denying (optional)").fill("It was fixed this morning")
    request.get_by_role("button", name="Deny").click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
    expect(request.locator(".approval-status")).to_contain_text("Denied by")
    expect(request.locator(".approval-status")).to_contain_text("It was fixed this morning")
    expect(page.locator(".step.observation pre")).to_contain_text("declined")
    _ended(stack)
    assert tickets.calls == 0
    told = stack.model.requests(model_name)[1]["messages"][-1]["content"]
    assert "It was fixed this morning" in told
    approval = ToolApproval.objects.get()
    assert (approval.decision, approval.decided_by) == ("declined", user)


def test_a_reload_while_paused_shows_the_request_again(stack, open_tab, user, model_name, tickets):
    tab, tool = _start(stack, open_tab, user, model_name, tickets)
    page = tab.page
    _paused(page, tool)

    page.reload()

    request = _paused(page, tool)
    # The page opened on a paused run: the status region says so, as it would have live.
    _waits_still(page, "Waiting for you: approve or deny the call")
    expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    # The request with its buttons and reason box, in both themes.
    for theme in (light, dark):
        theme(page)
        assert_accessible(tab)
    request.get_by_role("button", name="Approve").click()
    expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
    assert tickets.calls == 1


def test_approving_in_a_second_tab_updates_both(stack, open_tab, user, model_name, tickets):
    first, tool = _start(stack, open_tab, user, model_name, tickets)
    _paused(first.page, tool)
    second = open_tab(user, path=first.page.url.removeprefix(stack.daphne.url))
    request = _paused(second.page, tool)

    request.get_by_role("button", name="Approve").click()

    for page in (first.page, second.page):
        expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
        expect(page.locator(".step.approval .approval-status")).to_have_text(
            f"Approved by {user.username}"
        )
        expect(page.locator(".step.approval button")).to_have_count(0)
    assert tickets.calls == 1


def test_a_worker_killed_while_paused_leaves_the_call_to_the_next_one(
    stack, open_tab, user, model_name, tickets
):
    tab, tool = _start(stack, open_tab, user, model_name, tickets)
    page = tab.page
    request = _paused(page, tool)
    paused_by = _run().attempts

    stack.worker.kill()
    stack.worker.start()
    request.get_by_role("button", name="Approve").click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
    run = _ended(stack)
    assert tickets.calls == 1
    assert (run.status, run.attempts, run.resumes) == ("succeeded", paused_by + 1, 1)


def test_a_run_at_its_step_budget_offers_continue_and_finishes(
    stack, open_tab, user, model_name, tickets
):
    tab, _ = _start(
        stack, open_tab, user, model_name, tickets, needs_approval=False, budget_steps=1
    )
    page = tab.page
    button = page.get_by_role("button", name="Continue (+1 step)")
    expect(button).to_be_visible()
    expect(page.locator(".step.note.budget")).to_contain_text("The run used its budget of steps.")
    assert _run().status == AgentRun.Status.OUT_OF_BUDGET
    _waits_still(page, "Waiting for you: the run reached its budget")
    # One unit: the budget of one step was one reply that called the tool, and the header
    # counts it as the button does (issue 42, defect 4).
    expect(page.locator(".msg.assistant .steps-title")).to_contain_text("1 step · 1 tool call")
    assert tickets.calls == 1
    assert_accessible(tab)

    button.click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("All done.")
    expect(page.get_by_role("button", name=re.compile("Continue"))).to_have_count(0)
    run = _ended(stack)
    assert tickets.calls == 1  # the same run went on: the tool did not run again
    assert (run.status, run.budget_grants) == ("succeeded", 1)
    assert len(stack.model.requests(model_name)) == 2


def test_stop_while_paused_closes_the_request_and_frees_the_chat(
    stack, open_tab, user, model_name, tickets
):
    tab, tool = _start(stack, open_tab, user, model_name, tickets)
    page = tab.page
    request = _paused(page, tool)

    page.get_by_role("button", name="Stop").click()

    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    status = "Stopped before a decision: the call did not run"
    expect(request.locator(".approval-status")).to_have_text(status)
    expect(request.get_by_role("button")).to_have_count(0)
    page.reload()
    expect(page.locator(".step.approval .approval-status")).to_have_text(status)
    assert tickets.calls == 0
    approval = ToolApproval.objects.get()
    assert (approval.decision, approval.decided_by) == ("cancelled", user)
    assert not tab.errors


def test_a_run_left_at_its_budget_is_stopped_by_the_sweep(
    stack, open_tab, user, model_name, tickets
):
    from datetime import timedelta

    from django.utils import timezone

    from agents.services.approvals import budget_pauses_expire

    tab, _ = _start(
        stack, open_tab, user, model_name, tickets, needs_approval=False, budget_steps=1
    )
    page = tab.page
    expect(page.get_by_role("button", name="Continue (+1 step)")).to_be_visible()

    a_week_later = timezone.now() + timedelta(days=7)
    assert budget_pauses_expire(now=a_week_later) == [_run().pk]

    expect(page.locator(".run-status.cancelled")).to_have_text("Stopped")
    expect(page.get_by_role("button", name=re.compile("Continue"))).to_have_count(0)
    ask(page, "Thanks, that is enough.")  # the conversation takes messages again
    expect(page.locator(".msg.user")).to_have_count(2)
    assert tickets.calls == 1
