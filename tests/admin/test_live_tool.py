"""A tool made in the admin is used by the very next run: no code change, no restart.

The worker and daphne processes are already running when the tool is created and enabled
through the admin pages; the question then goes through the JSON API like the chat page's.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from agents.llm.scripted import Reply
from agents.models import AgentRun, Message, ToolConfig
from agents.services.conversations import conversation_create
from tests.admin.conftest import page_text, profile_form_data

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_lookup_table_made_in_the_admin_answers_the_next_question(live_stack, staff, client):
    client.force_login(staff)
    model = f"admin-live-{uuid.uuid4().hex[:8]}"
    profile = live_stack.profile(model, tools=())
    assert live_stack.worker.alive  # started before the tool exists

    response = client.post(
        reverse("admin:agents_toolconfig_add"),
        {
            "name": "office_rooms",
            "kind": "lookup_table",
            "description": "Which floor a meeting room is on. Input: the room name.",
            "config": json.dumps({"table": {"Everest": "4th floor, east wing"}}),
            "enabled": "on",
            "timeout_seconds": "5",
        },
    )
    assert response.status_code == 302, page_text(response)
    tool = ToolConfig.objects.get(name="office_rooms")
    response = client.post(
        reverse("admin:agents_agentprofile_change", args=[profile.pk]),
        profile_form_data(
            name=profile.name,
            slug=profile.slug,
            model_config=profile.model_config_id,
            tools=[tool.pk],
        ),
    )
    assert response.status_code == 302, page_text(response)
    assert profile.versions.order_by("-number").first().snapshot["tool_names"] == ["office_rooms"]

    live_stack.model.script(
        model,
        [
            Reply(
                "Thought: I should look the room up.\nAction: office_rooms\nAction Input: everest"
            ),
            Reply("Thought: Found it.\nFinal Answer: Everest is on the 4th floor, east wing."),
        ],
    )
    conversation = conversation_create(owner=staff, profile=profile)
    status, body = live_stack.http(
        "POST",
        f"/api/conversations/{conversation.pk}/messages/",
        staff,
        body={"content": "Where is room Everest?", "client_id": uuid.uuid4().hex},
    )
    assert status in (200, 201), body
    run = live_stack.wait_for_run(AgentRun.objects.get(conversation=conversation).pk)

    assert run.status == AgentRun.Status.SUCCEEDED, run.error_message
    requests = live_stack.model.requests(model)
    assert "office_rooms" in json.dumps(requests[0]["messages"])  # the model was told of it
    assert "4th floor, east wing" in json.dumps(requests[1]["messages"])  # and it answered
    answer = Message.objects.get(conversation=conversation, role=Message.Role.ASSISTANT)
    assert answer.content == "Everest is on the 4th floor, east wing."
