"""Staff add a tool in the admin and a user's very next question uses it: no code change,
no restart of the worker or daphne that were already running."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentProfile, PromptVersion, ToolConfig
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_lookup_table_made_in_the_admin_answers_in_the_chat(
    stack, open_tab, make_user, user, model_name
):
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    profile = stack.profile(model_name, tools=())
    admin = open_tab(staff, path="/admin/agents/toolconfig/add/").page

    # 1. The tool, in the admin.
    admin.locator("#id_name").fill("capital_lookup")
    admin.locator("#id_kind").select_option("lookup_table")
    admin.locator("#id_description").fill("Looks up the capital city of a country.")
    admin.locator("#id_config").fill(json.dumps({"table": {"France": "Paris", "Peru": "Lima"}}))
    admin.locator("input[name=_save]").click()
    expect(admin.locator(".messagelist")).to_contain_text("capital_lookup")
    tool = ToolConfig.objects.get(name="capital_lookup")
    assert (tool.kind, tool.config["table"]["Peru"]) == ("lookup_table", "Lima")

    # 2. Enabled on the profile, in the admin (the tools widget moves it across on double-click).
    admin.goto(f"/admin/agents/agentprofile/{profile.pk}/change/")
    admin.locator("#id_tools_from option", has_text="capital_lookup").dblclick()
    admin.locator("input[name=_save]").click()
    expect(admin.locator(".messagelist")).to_contain_text("was changed successfully")
    assert list(AgentProfile.objects.get(pk=profile.pk).tools.all()) == [tool]
    newest = PromptVersion.objects.filter(profile=profile).order_by("-number").first()
    assert newest.snapshot["tool_names"] == ["capital_lookup"]

    # 3. A user asks in the chat; the model decides to call the new tool.
    stack.model.script(
        model_name,
        [
            Reply("Thought: I should look it up.\nAction: capital_lookup\nAction Input: Peru"),
            Reply("Thought: The table says Lima.\nFinal Answer: The capital of Peru is Lima."),
        ],
    )
    chat = open_tab(user, path="/").page
    chat.get_by_label("Agent").select_option(profile.slug)
    ask(chat, "What is the capital of Peru?")
    expect(chat).to_have_url(re.compile(r"/c/\d+/$"))
    expect(chat.locator(".msg.assistant .answer")).to_have_text("The capital of Peru is Lima.")
    chat.locator(".msg.assistant details.steps summary").click()
    expect(chat.locator(".step.action .tool-name")).to_have_text("capital_lookup")
    expect(chat.locator(".step.observation pre")).to_have_text("Lima")

    # The model was shown the new tool, and the observation came from the table, not the model.
    first, second = stack.model.requests(model_name)
    assert "capital_lookup: Looks up the capital city of a country." in json.dumps(first)
    assert "Observation: Lima" in second["messages"][-1]["content"]
