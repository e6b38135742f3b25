"""Trying a profile before users see it: the preview and "Try it"."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.test import AsyncClient
from django.urls import reverse

from agents.llm.scripted import Fail, Reply
from agents.models import AgentProfile, Conversation, MemorySummary, ToolConfig
from tests.admin.conftest import page_text
from tests.tree import continue_branch


@pytest.fixture
def capitals(db):
    return ToolConfig.objects.create(
        name="capitals",
        kind="lookup_table",
        description="Looks up the capital of a country. Input: the country.",
        config={"table": {"France": "Paris"}},
    )


@pytest.fixture
def profile(db, scripted_endpoint, capitals):
    profile = AgentProfile.objects.create(
        name="Geographer", slug="geographer", model_config=scripted_endpoint, max_iterations=4
    )
    profile.tools.set([capitals])
    return profile


@pytest.mark.django_db
def test_preview_shows_the_exact_messages_with_tools_and_memory(staff_client, profile):
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])
    response = staff_client.post(
        url,
        {
            "question": "What is the capital of France?",
            "memory_summary": "The user is planning a trip to Europe.",
            "history": "user: Hello\nassistant: Hi! Where are you going?",
        },
    )
    body = page_text(response)
    assert response.status_code == 200
    assert "What is the capital of France?" in body
    assert "capitals" in body
    assert "Looks up the capital of a country." in body
    assert "The user is planning a trip to Europe." in body
    assert "Where are you going?" in body
    assert "Observation" in body  # the ReAct stop sequence in the options


@pytest.mark.django_db
def test_preview_refuses_a_malformed_history_line(staff_client, profile):
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])
    body = page_text(staff_client.post(url, {"question": "Hi", "history": "robot: beep"}))
    assert "Line 1 must start with" in body


@pytest.mark.django_db
def test_preview_in_tool_calling_mode_shows_the_tool_schema(staff_client, profile):
    profile.mode = AgentProfile.Mode.TOOLS
    profile.save()
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])
    body = page_text(staff_client.post(url, {"question": "Capital of France?"}))
    assert "&quot;function&quot;" in body
    assert "&quot;capitals&quot;" in body


@pytest.mark.django_db
def test_try_it_streams_the_steps_of_a_real_run(
    staff_client, scripted_server, scripted_endpoint, profile
):
    scripted_server.script(
        scripted_endpoint.model,
        [
            Reply("Thought: I should look it up.\nAction: capitals\nAction Input: France"),
            Reply("Thought: I know it now.\nFinal Answer: The capital is Paris."),
        ],
    )
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])
    assert staff_client.get(url).status_code == 200

    response = staff_client.post(url, {"question": "What is the capital of France?"})

    assert response.streaming
    assert response["X-Accel-Buffering"] == "no"
    body = page_text(response)
    # Each step in the order it happened (a model call's details come before its steps).
    position = 0
    for text in (
        "Model call 0",
        "<h3>Thought</h3>",
        "I should look it up.",
        "<h3>Action: capitals</h3>",
        "Observation from capitals",
        "Paris",
        "Model call 1",
        "<h3>Final answer</h3>",
        "The capital is Paris.",
        "Finished in",
    ):
        position = body.index(text, position)
    assert body.rstrip().endswith("</html>")
    requests = scripted_server.requests(scripted_endpoint.model)
    assert len(requests) == 2
    assert "What is the capital of France?" in str(requests[0]["messages"])


@pytest.mark.django_db
def test_try_it_reports_a_failing_model(staff_client, scripted_server, scripted_endpoint, profile):
    scripted_server.script(scripted_endpoint.model, [Fail(401)])
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])

    body = page_text(staff_client.post(url, {"question": "Hello?"}))

    assert "Run failed" in body
    assert "model_auth" in body
    assert "Finished in" in body


@pytest.mark.django_db
def test_preview_fills_memory_from_a_conversation(staff_client, profile, user):
    conversation = Conversation.objects.create(owner=user, title="Trip")
    first = continue_branch(conversation, "user", "I live in Lyon.")
    summarised = continue_branch(conversation, "assistant", "Noted: Lyon.")
    MemorySummary.objects.create(
        conversation=conversation,
        text="The user lives in Lyon.",
        covers_from=first,
        covers_through=summarised,
        token_count=6,
    )
    continue_branch(conversation, "user", "Next week: Rome.")
    continue_branch(conversation, "assistant", "Enjoy Rome!")
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])

    body = page_text(
        staff_client.post(url, {"question": "Where do I live?", "conversation": conversation.pk})
    )

    assert "The user lives in Lyon." in body
    assert "Next week: Rome." in body
    assert "Enjoy Rome!" in body
    assert "I live in Lyon." not in body  # folded into the summary


@pytest.mark.django_db
def test_preview_names_a_missing_conversation(staff_client, profile):
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])
    body = page_text(staff_client.post(url, {"question": "Hi", "conversation": 999999}))
    assert "There is no conversation 999999." in body


@pytest.mark.django_db
def test_try_it_streams_piece_by_piece_under_asgi(
    staff, scripted_server, scripted_endpoint, profile
):
    """Under ASGI (daphne) the page must arrive as pieces, not be collected first."""
    scripted_server.script(
        scripted_endpoint.model, [Reply("Thought: Easy.\nFinal Answer: Paris, of course.")]
    )
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])
    client = AsyncClient()

    async def run():
        await client.aforce_login(staff)
        response = await client.post(url, {"question": "Capital of France?"})
        chunks = [chunk async for chunk in response.streaming_content]
        return response, chunks

    response, chunks = async_to_sync(run)()

    assert response["X-Accel-Buffering"] == "no"
    body = b"".join(chunks).decode()
    assert "Paris, of course." in body
    # The page head, each step and the page end are separate pieces.
    assert len(chunks) >= 4
    assert "Paris, of course." not in chunks[0].decode()


@pytest.fixture
def profile_viewer(client, make_user):
    """Staff allowed to view agent profiles, and nothing else."""
    viewer = make_user("vera", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agentprofile"))
    client.force_login(viewer)
    return viewer


def _conversation_with(owner, secret_line: str) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="Private")
    continue_branch(conversation, "user", secret_line)
    continue_branch(conversation, "assistant", "Noted.")
    return conversation


@pytest.mark.django_db
def test_preview_does_not_show_a_conversation_the_viewer_may_not_read(
    client, profile_viewer, profile, user
):
    """Viewing profiles is no licence to read users' chats through the preview's memory."""
    conversation = _conversation_with(user, "My PIN is 4921.")
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])

    body = page_text(client.post(url, {"question": "Hi", "conversation": conversation.pk}))

    assert "My PIN is 4921." not in body
    # Worded as for a missing one: the id says nothing about whether the conversation exists.
    assert f"There is no conversation {conversation.pk}." in body


@pytest.mark.django_db
def test_preview_uses_the_viewers_own_conversation(client, profile_viewer, profile):
    conversation = _conversation_with(profile_viewer, "I am testing the preview.")
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])

    body = page_text(client.post(url, {"question": "Hi", "conversation": conversation.pk}))

    assert "I am testing the preview." in body


@pytest.mark.django_db
def test_preview_uses_any_conversation_with_the_view_conversation_permission(
    client, profile_viewer, profile, user
):
    profile_viewer.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    conversation = _conversation_with(user, "Please remember my flight on Friday.")
    url = reverse("admin:agents_agentprofile_preview", args=[profile.pk])

    body = page_text(client.post(url, {"question": "Hi", "conversation": conversation.pk}))

    assert "Please remember my flight on Friday." in body


@pytest.mark.django_db
def test_try_it_says_a_call_needs_approval_instead_of_failing(
    staff_client, scripted_server, scripted_endpoint, profile, capitals
):
    ToolConfig.objects.filter(pk=capitals.pk).update(needs_approval=True)
    scripted_server.script(
        scripted_endpoint.model,
        [Reply("Thought: I should look it up.\nAction: capitals\nAction Input: France")],
    )
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])

    body = page_text(staff_client.post(url, {"question": "Capital of France?"}))

    assert "Needs approval: the run stops here" in body
    assert "The agent wants to call capitals, which needs approval." in body
    assert "France" in body
    assert "Observation from capitals" not in body  # the call did not run
    assert "Run failed" not in body
    assert "awaiting_approval" not in body
    assert "Finished in" in body


@pytest.mark.django_db
def test_try_it_says_the_run_reached_its_budget(
    staff_client, scripted_server, scripted_endpoint, profile
):
    AgentProfile.objects.filter(pk=profile.pk).update(budget_steps=1)
    scripted_server.script(
        scripted_endpoint.model,
        [
            Reply("Thought: I should look it up.\nAction: capitals\nAction Input: France"),
            Reply("Thought: I know it now.\nFinal Answer: The capital is Paris."),
        ],
    )
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])

    body = page_text(staff_client.post(url, {"question": "Capital of France?"}))

    assert "Observation from capitals" in body
    assert "Budget reached: the run stops here" in body
    assert "The run used its budget of 1 steps." in body
    assert "In a chat its owner can press Continue; Try it stops here." in body
    assert "Run failed" not in body
    assert "budget_exhausted" not in body
    assert len(scripted_server.requests(scripted_endpoint.model)) == 1
