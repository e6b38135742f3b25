"""AgentProfile admin: validation, versions on every save, diff and restore."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from agents.models import AgentProfile, ModelConfig, ToolConfig
from tests.admin.conftest import page_text, profile_form_data


@pytest.fixture
def tool(db):
    return ToolConfig.objects.create(
        name="capitals",
        kind="lookup_table",
        description="Capitals",
        config={"table": {"France": "Paris"}},
    )


def _add(client, **overrides):
    response = client.post(reverse("admin:agents_agentprofile_add"), profile_form_data(**overrides))
    assert response.status_code == 302, page_text(response)
    return AgentProfile.objects.get(slug=overrides.get("slug", "geographer"))


@pytest.mark.django_db
def test_every_save_writes_a_version_including_the_tools(staff_client, staff, tool):
    profile = _add(staff_client, tools=[tool.pk])

    versions = list(profile.versions.order_by("number"))
    assert [v.number for v in versions] == [1]
    assert versions[0].snapshot["tool_names"] == ["capitals"]
    assert versions[0].created_by == staff

    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])
    staff_client.post(change_url, profile_form_data(max_iterations="7"))  # tools removed too
    latest = profile.versions.order_by("-number").first()
    assert latest.number == 2
    assert latest.snapshot["max_iterations"] == 7
    assert latest.snapshot["tool_names"] == []

    # Saving with no change writes nothing new.
    staff_client.post(change_url, profile_form_data(max_iterations="7"))
    assert profile.versions.count() == 2
    assert LogEntry.objects.filter(object_id=str(profile.pk)).count() == 3


@pytest.mark.django_db
def test_unknown_template_variable_is_a_form_error_naming_it(staff_client):
    template = (
        "You are helpful.\n{tools}\n{tool_names}\n{input}\n{agent_scratchpad}\n{favourite_colour}"
    )
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"), profile_form_data(system_prompt=template)
    )
    assert response.status_code == 200
    assert "Unknown variable {favourite_colour}" in page_text(response)
    assert not AgentProfile.objects.filter(slug="geographer").exists()


@pytest.mark.django_db
def test_missing_template_variable_is_a_form_error_naming_it(staff_client):
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"),
        profile_form_data(system_prompt="You are helpful. Question: {input}"),
    )
    assert response.status_code == 200
    body = page_text(response)
    assert "Missing variable {agent_scratchpad}" in body
    assert "Missing variable {tool_names}" in body
    assert not AgentProfile.objects.filter(slug="geographer").exists()


@pytest.mark.django_db
def test_making_a_profile_default_moves_the_flag(staff_client):
    old_default = AgentProfile.objects.get(is_default=True)
    profile = _add(staff_client, make_default="on")
    old_default.refresh_from_db()
    assert profile.is_default
    assert not old_default.is_default


@pytest.mark.django_db
def test_version_pages_show_the_diff_safely(staff_client, tool):
    profile = _add(staff_client, system_prompt="", description="x")
    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])
    staff_client.post(
        change_url, profile_form_data(few_shot_examples="Question: <script>alert(1)</script>")
    )

    versions_page = page_text(
        staff_client.get(reverse("admin:agents_agentprofile_versions", args=[profile.pk]))
    )
    assert "v2 (current)" in versions_page

    diff_page = page_text(
        staff_client.get(reverse("admin:agents_agentprofile_version", args=[profile.pk, 2]))
    )
    assert "<script>alert(1)</script>" not in diff_page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in diff_page
    assert 'class="added"' in diff_page
    assert 'class="removed"' in diff_page
    assert "This is the current version." in diff_page


@pytest.mark.django_db
def test_restore_writes_a_new_version_equal_to_the_old_one(staff_client, staff, tool):
    profile = _add(staff_client, tools=[tool.pk], max_iterations="5")
    first = profile.versions.get(number=1)
    change_url = reverse("admin:agents_agentprofile_change", args=[profile.pk])
    staff_client.post(change_url, profile_form_data(max_iterations="9", label_set="zh"))
    assert profile.versions.count() == 2

    restore_url = reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, 1])
    assert staff_client.get(restore_url).status_code == 302  # GET changes nothing
    assert profile.versions.count() == 2
    response = staff_client.post(restore_url, follow=True)

    assert "Restored version 1 as version 3" in page_text(response)
    third = profile.versions.get(number=3)
    assert third.snapshot == first.snapshot
    assert profile.versions.get(number=1).snapshot == first.snapshot  # the old one untouched
    profile.refresh_from_db()
    assert profile.max_iterations == 5
    assert profile.label_set == "en"
    assert list(profile.tools.values_list("name", flat=True)) == ["capitals"]
    assert LogEntry.objects.filter(
        object_id=str(profile.pk), change_message__contains="Restored version 1"
    ).exists()


@pytest.mark.django_db
def test_restore_reports_tools_that_are_gone(staff_client, tool):
    profile = _add(staff_client, tools=[tool.pk])
    staff_client.post(
        reverse("admin:agents_agentprofile_change", args=[profile.pk]), profile_form_data()
    )
    tool.delete()

    response = staff_client.post(
        reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, 1]), follow=True
    )

    assert "These tools no longer exist and were left out: capitals" in page_text(response)


@pytest.mark.django_db
def test_a_valid_custom_template_is_saved_and_versioned(staff_client):
    template = (
        "Answer with tools.\n{tools}\nReply as Thought:, then Action: one of [{tool_names}] and "
        "Action Input:, or Final Answer:. Never write Observation: yourself.\n{history}\n"
        "Question: {input}\nThought:{agent_scratchpad}"
    )
    profile = _add(staff_client, system_prompt=template, mode="react", label_set="en")
    assert profile.versions.get().snapshot["system_prompt"] == template


@pytest.mark.django_db
def test_tools_mode_refuses_react_only_variables(staff_client):
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"),
        profile_form_data(mode="tools", system_prompt="Be brief. {agent_scratchpad}"),
    )
    assert "Unknown variable {agent_scratchpad} in tools mode" in page_text(response)


@pytest.mark.django_db
def test_the_form_shows_the_default_templates_to_start_from(staff_client):
    body = page_text(staff_client.get(reverse("admin:agents_agentprofile_add")))
    assert "ReAct text, English" in body
    assert "Native tool calling, Chinese" in body
    assert "{agent_scratchpad}" in body


@pytest.mark.django_db
def test_restore_reports_a_model_endpoint_that_is_gone(staff_client):
    endpoint = ModelConfig.objects.create(name="Old endpoint", model="old")
    profile = _add(staff_client, model_config=endpoint.pk)
    staff_client.post(
        reverse("admin:agents_agentprofile_change", args=[profile.pk]), profile_form_data()
    )
    endpoint.delete()  # allowed now: no profile points at it any more

    response = staff_client.post(
        reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, 1]), follow=True
    )

    assert "The model endpoint of that version no longer exists" in page_text(response)
    profile.refresh_from_db()
    assert profile.model_config is None


@pytest.mark.django_db
def test_budgets_are_saved_in_the_version_and_bad_ones_are_form_errors(staff_client, tool):
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"),
        profile_form_data(budget_steps="3", budget_tool_calls='{"capitals": 0}'),
    )
    assert response.status_code == 200
    assert "Give a JSON object of tool names and whole numbers of at least 1" in page_text(response)
    assert not AgentProfile.objects.filter(slug="geographer").exists()

    profile = _add(
        staff_client, budget_steps="3", budget_tokens="5000", budget_tool_calls='{"capitals": 2}'
    )

    snapshot = profile.versions.order_by("-number").first().snapshot
    assert snapshot["budget_steps"] == 3
    assert snapshot["budget_tokens"] == 5000
    assert snapshot["budget_tool_calls"] == {"capitals": 2}
