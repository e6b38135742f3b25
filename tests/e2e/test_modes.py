"""A native tool-calling profile and a Chinese profile on the chat page: each run's steps and
its answer show as a ReAct run's do."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply, ToolCalls
from agents.services.conversations import conversation_create
from tests.e2e.test_chat import ask, step_kinds

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _ask_in_a_new_conversation(stack, open_tab, user, model_name, replies, question, **profile):
    """The chat page of a new conversation with a profile of ``profile``'s fields; asks."""
    profile = stack.profile(model_name, tools=("calculator",), **profile)
    stack.model.script(model_name, replies)
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    ask(tab.page, question)
    return tab


def test_a_native_mode_run_shows_its_steps_and_answer(stack, open_tab, user, model_name):
    replies = [
        ToolCalls([("calculator", {"expression": "2 + 2"})], text="I should add."),
        Reply("The sum is **4**."),
    ]
    tab = _ask_in_a_new_conversation(
        stack, open_tab, user, model_name, replies, "What is 2 + 2?", mode="tools"
    )
    page = tab.page

    expect(page.locator(".answer strong")).to_have_text("4")
    expect(page.locator(".msg.assistant .answer")).to_have_text("The sum is 4.")
    page.locator("details.steps summary").click()
    assert step_kinds(page) == ["thought", "action", "observation"]
    expect(page.locator(".step.thought")).to_contain_text("I should add.")
    expect(page.locator(".step.action .tool-name")).to_have_text("calculator")
    # Native calls carry JSON arguments; the page shows them as JSON.
    expect(page.locator(".step.action .tool-input")).to_have_text('{\n  "expression": "2 + 2"\n}')
    expect(page.locator(".step.observation pre")).to_have_text("4")
    assert tab.errors == []


def test_a_chinese_profile_run_shows_its_steps_and_answer(stack, open_tab, user, model_name):
    replies = [
        Reply("思考：我需要把两个数相加。\n行动：calculator\n行动输入：2 + 2"),
        Reply("思考：计算器说是 4。\n最终答案：二加二等于 **4**。"),
    ]
    tab = _ask_in_a_new_conversation(
        stack, open_tab, user, model_name, replies, "二加二等于多少？", label_set="zh"
    )
    page = tab.page

    expect(page.locator(".msg.user .bubble")).to_have_text("二加二等于多少？")
    expect(page.locator(".answer strong")).to_have_text("4")
    expect(page.locator(".msg.assistant .answer")).to_have_text("二加二等于 4。")
    page.locator("details.steps summary").click()
    assert step_kinds(page) == ["thought", "action", "observation", "thought"]
    expect(page.locator(".step.thought").first).to_contain_text("我需要把两个数相加。")
    expect(page.locator(".step.action .tool-input")).to_have_text("2 + 2")
    expect(page.locator(".step.observation pre")).to_have_text("4")
    expect(page.locator(".step.thought").last).to_contain_text("计算器说是 4。")
    assert tab.errors == []
